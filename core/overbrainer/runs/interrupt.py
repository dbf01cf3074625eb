"""Ctrl-C and SIGTERM around the steps that must not be cut short.

Starting a job (spawned but not yet recorded, it would be lost) and cancelling one (a
``cancelling`` marker left behind) run with SIGINT and SIGTERM noted instead of raised.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

from overbrainer.errors import Terminated
from overbrainer.redact import escape_controls

DEFERRED = (signal.SIGINT, signal.SIGTERM)


@dataclass
class Noted:
    """Whether Ctrl-C or SIGTERM arrived while deferred, and which came last."""

    caught: bool = False
    signum: int | None = None

    def interrupt(self) -> KeyboardInterrupt:
        """What to raise for the signal that was noted, once the step is done."""
        return Terminated() if self.signum == signal.SIGTERM else KeyboardInterrupt()


@contextmanager
def deferred_sigint(notice: str | None = None) -> Iterator[Noted]:
    """Within the block SIGINT and SIGTERM only set ``caught`` (and ``signum``); the
    previous handlers come back after. ``notice``: written to stderr at the first one, for a
    block that may last minutes (a machine being made), so a Ctrl-C is seen to be heard."""
    noted = Noted()
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def note(signum: int, frame: FrameType | None) -> None:
        first = not noted.caught
        noted.caught = True
        noted.signum = signum
        if first and notice:
            # Straight to the file descriptor: the signal may have cut into a log call or a
            # write to sys.stderr, which must not be entered again from here.
            with contextlib.suppress(OSError):
                os.write(2, f"warning: {escape_controls(notice)}\n".encode())

    previous = {signum: signal.signal(signum, note) for signum in DEFERRED}
    try:
        yield noted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
