"""The chat template a run's model was trained with, as inference tools must see it.

Axolotl and TRL mark the assistant's tokens with transformers' ``{% generation %}`` /
``{% endgeneration %}`` tags; jinja2 without transformers' extension (llama.cpp's server,
Ollama) fails on them, so they never leave training. ``target/export_gguf.py`` does the same
on the target (stdlib only, it cannot import this): ``tests/after`` checks both agree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError

TOKENIZER_CONFIG = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"

_TAG = re.compile(r"\{%(-?)\s*(end)?generation\s*(-?)%\}")


def without_training_tags(template: str) -> str:
    """``template`` without ``{% generation %}`` and ``{% endgeneration %}``: a tag that trims
    whitespace becomes an ``if true`` block that trims the same, the others are removed."""

    def replace(match: re.Match[str]) -> str:
        left, end, right = match.groups()
        if not left and not right:
            return ""
        return "{%" + left + (" endif " if end else " if true ") + right + "%}"

    return _TAG.sub(replace, template)


def has_training_tags(template: str) -> bool:
    return _TAG.search(template) is not None


@dataclass(frozen=True)
class ChatTemplate:
    """A model's chat template (training tags removed) and the special tokens it renders."""

    source: str
    bos_token: str
    eos_token: str
    where: str
    """The file it came from, for messages."""


def _token(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def read_chat_template(model_dir: Path, shown: str) -> ChatTemplate | None:
    """The chat template of the HF model or adapter in ``model_dir`` (``chat_template.jinja``,
    else ``tokenizer_config.json``'s ``chat_template``, its ``default`` when it is a list), or
    None when it has none."""
    config: Any = {}
    config_path = model_dir / TOKENIZER_CONFIG
    if config_path.is_file():
        try:
            config = json.loads(files.read_text(config_path, f"{shown}/{TOKENIZER_CONFIG}") or "")
        except (UserError, ValueError):
            config = {}
    if not isinstance(config, dict):
        config = {}
    source: Any = None
    where = f"{shown}/{TEMPLATE_FILE}"
    if (model_dir / TEMPLATE_FILE).is_file():
        try:
            source = files.read_text(model_dir / TEMPLATE_FILE, where)
        except UserError:
            source = None
    if not isinstance(source, str):
        where = f"{shown}/{TOKENIZER_CONFIG}"
        source = config.get("chat_template")
        if isinstance(source, list):
            named = {
                item.get("name"): item.get("template") for item in source if isinstance(item, dict)
            }
            source = named.get("default")
    if not isinstance(source, str) or not source.strip():
        return None
    return ChatTemplate(
        without_training_tags(source),
        _token(config.get("bos_token")),
        _token(config.get("eos_token")),
        where,
    )
