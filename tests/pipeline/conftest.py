"""A project wired to the loopback provider, with prompts the fake model follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_provider import FakeProvider
from overbrainer.providers import retry
from pipeline_data import write_project


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff steps of a millisecond: retries cost no real seconds (Retry-After still does)."""
    monkeypatch.setattr(retry, "BACKOFF_UNIT", 0.001)


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeProvider) -> Path:
    """The pipeline project: two topics, one openai-protocol provider (the loopback one)."""
    return write_project(tmp_path / "project", provider.url)
