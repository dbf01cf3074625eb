"""The llama.cpp toolchain export and compare use on a target, from the package registry.

``llama-cpp-python`` (pinned) builds llama.cpp from source: its library quantizes
(``llama_model_quantize``) and its ``llama_cpp.server`` serves the child; its source
distribution vendors llama.cpp's ``convert_hf_to_gguf.py`` and the ``gguf`` package that
converter needs. ``target/install_llama_cpp.sh`` puts both in one directory on the target.
"""

from __future__ import annotations

from importlib import resources

LLAMA_CPP_PYTHON = "0.3.16"
"""The pinned ``llama-cpp-python`` release (llama.cpp as vendored by it)."""

LLAMA_CPP = f"llama-cpp-python=={LLAMA_CPP_PYTHON}"
"""What ``export.json`` and ``compare.json`` record as the llama.cpp that was used."""

DEFAULT_DIR = f"~/.cache/overbrainer/llama-cpp-python-{LLAMA_CPP_PYTHON}"
"""Where the toolchain lives on a target unless ``OVERBRAINER_LLAMA_CPP`` says otherwise:
``bin/python`` (a venv with ``llama_cpp``) and ``llama.cpp/`` (the converter and ``gguf-py``)."""

ENV_VAR = "OVERBRAINER_LLAMA_CPP"


def toolchain_dir(env: dict[str, str] | None) -> str:
    """The toolchain directory on targets: ``OVERBRAINER_LLAMA_CPP``, else the default."""
    value = (env or {}).get(ENV_VAR, "").strip()
    return value or DEFAULT_DIR


def target_file(name: str) -> bytes:
    """A file shipped to targets (``target/NAME``): a script run there."""
    return resources.files("overbrainer.after.target").joinpath(name).read_bytes()
