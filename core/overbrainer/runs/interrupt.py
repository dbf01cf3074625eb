"""Ctrl-C around the steps that must not be cut short.

Starting a job (spawned but not yet recorded, it would be lost) and cancelling one (a
``cancelling`` marker left behind) run with SIGINT noted instead of raised.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType


@dataclass
class Noted:
    """Whether a Ctrl-C arrived while it was deferred."""

    caught: bool = False


@contextmanager
def deferred_sigint() -> Iterator[Noted]:
    """Within the block a SIGINT only sets ``caught``; the previous handler comes back after."""
    noted = Noted()
    if threading.current_thread() is not threading.main_thread():
        yield noted
        return

    def note(signum: int, frame: FrameType | None) -> None:
        noted.caught = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        signal.signal(signal.SIGINT, previous)
