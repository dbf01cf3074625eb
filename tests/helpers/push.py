"""The tokens of the push tests' Hub, and Hugging Face's offline mode lifted for it."""

from __future__ import annotations

import pytest

TOKEN = "hf_secretTOKENvalue1234567890"
READ_TOKEN = "hf_readonlyTOKEN987654321"


def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lift the offline mode CI sets for Hugging Face (``HF_HUB_OFFLINE=1``, which
    huggingface_hub reads once, at import): the hub of these tests is on loopback."""
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
