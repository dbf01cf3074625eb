"""Where a served provider is reached: the command's serving session says (it starts the
engine on first use). The session lives above the providers, so it installs itself here."""

from __future__ import annotations

import threading
from typing import Protocol

from overbrainer.errors import UserError

MAX_IN_FLIGHT = 4096
"""The most requests a stage keeps in flight to a served engine, however much it holds
(``serve.concurrency``'s bound)."""


class LoadGauges(Protocol):
    """Where a served engine reports its load (an engine's ``EngineMetrics``)."""

    @property
    def path(self) -> str: ...
    @property
    def running(self) -> str: ...
    @property
    def waiting(self) -> str: ...


class Session(Protocol):
    """The command's served providers, as the stages and training use them."""

    def url(self, provider: str) -> str:
        """Its base URL from here (``http://127.0.0.1:PORT/v1``), started if need be."""
        ...

    def capacity(self, provider: str) -> int:
        """The requests its engine holds at once."""
        ...

    def gauges(self, provider: str) -> LoadGauges | None:
        """Where its engine reports its load; None when it reports none or
        ``serve.concurrency`` fixes the number in flight."""
        ...

    def port_on_target(self, provider: str) -> int:
        """Its port on its target's loopback (started if need be): where a job beside it
        reaches it."""
        ...

    def on_own_machine(self, provider: str) -> bool:
        """Its target makes a machine for each serve (a pod of its own), not the one its
        jobs run on."""
        ...

    def check_servable(self, provider: str) -> object:
        """``UserError`` unless its engine is installed and its target can serve."""
        ...

    def keep(self, provider: str, for_run: str = "") -> None:
        """Leave it up when this command ends: handed to run ``for_run``, else the user's."""
        ...

    def lend(self, provider: str, run_id: str) -> None:
        """Say that run ``run_id`` asks it (its online teacher): not a killed command's
        orphan to end while that run may still ask it."""
        ...

    def end(self, provider: str) -> object:
        """End it, whoever started it."""
        ...


_lock = threading.Lock()
_installed: list[Session] = []


def install(session: Session | None) -> None:
    """Serve this process's served providers through ``session`` (None: none)."""
    with _lock:
        _installed[:] = [] if session is None else [session]


def _session() -> Session | None:
    with _lock:
        return _installed[0] if _installed else None


def served_capacity(provider: str) -> int | None:
    """The requests the served ``provider``'s engine holds at once; None when this command
    serves nothing (the stage keeps ``[pipeline] concurrency``)."""
    session = _session()
    return None if session is None else session.capacity(provider)


def served_gauges(provider: str) -> LoadGauges | None:
    """Where the served ``provider``'s engine reports its load while it runs; None when it
    does not, or the number in flight is fixed (or this command serves nothing)."""
    session = _session()
    return None if session is None else session.gauges(provider)


def served_session(provider: str) -> Session:
    """This command's serving session, for the served ``provider``."""
    session = _session()
    if session is None:
        raise UserError(
            f"providers.{provider} is served (providers.{provider}.serve), and this command "
            "cannot start it: run the stage through the overbrainer command line"
        )
    return session


def served_url(provider: str) -> str:
    """The base URL of the served provider ``provider``, started if need be."""
    return served_session(provider).url(provider)
