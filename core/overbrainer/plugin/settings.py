"""Settings for ``register_targets`` and ``register_settings``: the field types
``Finite``, ``HttpUrl``, ``EnvPattern`` and ``comma_list`` beside the base tier's
``RemotePath`` and ``NonEmpty``; a top-level table of the plugin's own (``Section``,
``RegisterSection``, read with ``Settings.section``); ``resolve_secret`` reads a secret
setting's ``vault:`` reference when the plugin needs the value."""

from __future__ import annotations

from overbrainer.config.model import (
    EnvPattern,
    Finite,
    HttpUrl,
    Section,
    Settings,
    comma_list,
)
from overbrainer.config.secrets import resolve_secret
from overbrainer.config.sections import RegisterSection

__all__ = [
    "EnvPattern",
    "Finite",
    "HttpUrl",
    "RegisterSection",
    "Section",
    "Settings",
    "comma_list",
    "resolve_secret",
]
