"""The progress lines of a batch waited for: a wait of up to 24 hours is never silent.

A line is said at a batch's first poll, whenever its provider status or counts change,
and at least every ``PROGRESS_EVERY_S`` otherwise:
``answers: batch batch_abc: 12/24 done, 0 failed (in_progress), waiting 4m10s (polls every 30s)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from overbrainer.duration import duration
from overbrainer.pipeline.batch_ledger import Batch
from overbrainer.providers.batch_api import BatchStatus, Counts

PROGRESS_EVERY_S = 300.0
"""The longest a batch waited for goes without a progress line when nothing changes."""
POLL_TIMEOUT_S = 60.0
"""The longest one look at a batch (a poll, a page of the list, a cancel) waits for its
reply before it is asked again: not the 600 s of ``request_timeout_secs``, which sizes
answers being written, since a poll's reply is a few hundred bytes."""


def progress(status: BatchStatus) -> str:
    """Where a batch stands, in the provider's counts and word: ``12/24 done, 0 failed
    (in_progress)``, or only the word where it gives no counts."""
    counts = status.counts
    if counts is None:
        return status.status
    return f"{counts.done}/{counts.total} done, {counts.failed} failed ({status.status})"


def every(seconds: float) -> str:
    """``30s``, ``0.5s``, ``5m00s``."""
    return f"{seconds:g}s" if seconds < 60 else duration(seconds)


class BatchWatch:
    """Which polls of the batches waited for get a line (one ``BatchWatch`` a stage)."""

    def __init__(
        self, poll_s: float, every_s: float = PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._poll_s = poll_s
        self._every_s = every_s
        self._clock = clock
        self._said: dict[str, tuple[tuple[str, Counts | None], float]] = {}
        """By batch key: what its last line said, and when."""

    def line(self, batch: Batch, status: BatchStatus) -> str | None:
        """The line this poll of ``batch`` gets, or None when it is not due."""
        now = self._clock()
        seen = (status.status, status.counts)
        last = self._said.get(batch.key)
        if last is not None and last[0] == seen and now - last[1] < self._every_s:
            return None
        self._said[batch.key] = (seen, now)
        waited = duration(max(now - batch.at, 0.0))
        return (
            f"answers: batch {batch.name}: {progress(status)}, waiting {waited} "
            f"(polls every {every(self._poll_s)})"
        )
