"""Where a served provider is reached: the command's serving session says (it starts the
engine on first use). The session lives above the providers, so it installs itself here."""

from __future__ import annotations

import threading
from collections.abc import Callable

from overbrainer.errors import UserError

Resolver = Callable[[str], str]
"""A served provider's name to its base URL (``http://127.0.0.1:PORT/v1``)."""

_lock = threading.Lock()
_installed: list[Resolver] = []


def install(resolver: Resolver | None) -> None:
    """Serve this process's served providers through ``resolver`` (None: none)."""
    with _lock:
        _installed[:] = [] if resolver is None else [resolver]


def served_url(provider: str) -> str:
    """The base URL of the served provider ``provider``, started if need be."""
    with _lock:
        resolver = _installed[0] if _installed else None
    if resolver is None:
        raise UserError(
            f"providers.{provider} is served (providers.{provider}.serve), and this command "
            "cannot start it: run the stage through the overbrainer command line"
        )
    return resolver(provider)
