"""Where a served provider is reached: the command's serving session says (it starts the
engine on first use). The session lives above the providers, so it installs itself here."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol

from overbrainer.errors import UserError

MAX_IN_FLIGHT = 4096
"""The most requests a stage keeps in flight to a served engine, however much it holds
(``serve.concurrency``'s bound)."""

Resolver = Callable[[str], str]
"""A served provider's name to its base URL (``http://127.0.0.1:PORT/v1``)."""

Capacity = Callable[[str], int]
"""A served provider's name to the requests its engine holds at once."""


class LoadGauges(Protocol):
    """Where a served engine reports its load (an engine's ``EngineMetrics``)."""

    @property
    def path(self) -> str: ...
    @property
    def running(self) -> str: ...
    @property
    def waiting(self) -> str: ...


Gauges = Callable[[str], LoadGauges | None]
"""A served provider's name to the gauges its engine reports, None when it reports none or
``serve.concurrency`` fixes the number in flight."""

_lock = threading.Lock()
_installed: list[Resolver] = []
_capacity: list[Capacity] = []
_gauges: list[Gauges] = []


def install(
    resolver: Resolver | None, capacity: Capacity | None = None, gauges: Gauges | None = None
) -> None:
    """Serve this process's served providers through ``resolver`` (None: none), their
    engines holding ``capacity`` requests at once and reporting their load at ``gauges``."""
    with _lock:
        _installed[:] = [] if resolver is None else [resolver]
        _capacity[:] = [] if capacity is None else [capacity]
        _gauges[:] = [] if gauges is None else [gauges]


def served_capacity(provider: str) -> int | None:
    """The requests the served ``provider``'s engine holds at once; None when this command
    serves nothing (the stage keeps ``[pipeline] concurrency``)."""
    with _lock:
        capacity = _capacity[0] if _capacity else None
    return None if capacity is None else capacity(provider)


def served_gauges(provider: str) -> LoadGauges | None:
    """Where the served ``provider``'s engine reports its load while it runs; None when it
    does not, or the number in flight is fixed."""
    with _lock:
        gauges = _gauges[0] if _gauges else None
    return None if gauges is None else gauges(provider)


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
