"""``runs ls``: one line a run, from the records alone (no network)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from overbrainer.job.layout import OUTPUT_DIR
from overbrainer.job.record import RunRecord
from overbrainer.redact import escape_controls
from overbrainer.runs.store import RunStore


def run_line(record: RunRecord, width: int, extra: str = "") -> str:
    """``id  state  target  created``, then the snapshot of a stopped run and ``extra``;
    what the record holds is escaped (it is a file anyone may have written)."""
    snapshot = ""
    if record.snapshot is not None:
        snapshot = (
            f"  step {record.snapshot.step} ({record.snapshot.reason}): "
            f"partial model in {OUTPUT_DIR}/"
        )
    return escape_controls(
        f"{record.id:<{width}}  {record.state.value:<9}  {record.target}  {record.created}"
        f"{snapshot}{extra}"
    )


def run_lines(
    store: RunStore, describe: Callable[[RunRecord], str | None] | None = None
) -> Iterator[str]:
    """The lines of ``runs ls``; ``describe`` adds what a plugin knows (a pod's state)."""
    records = store.list()
    width = max((len(record.id) for record in records), default=0)
    for record in records:
        extra = (describe(record) if describe else None) or ""
        yield run_line(record, width, f"  {extra}" if extra else "")
