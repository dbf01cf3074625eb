"""What ``runs ls`` prints of a run's record, read and checked without pydantic, and every
run's in listing order: the listing shows them, and ``latest`` names the last of them
(``runs.resolve``), so both agree on which records they skip."""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING, Any, NamedTuple

from overbrainer.job.layout import RECORD
from overbrainer.runs.record_file import NotARecord, each_record, load_record

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

STATES = ("preparing", "running", "succeeded", "failed", "cancelled", "stopped")
"""``RunState``'s values (a test holds them equal), without importing pydantic."""
REASONS = ("requested", "deadline", "cost", "disk")
"""``SnapshotReason``'s values."""


class Listed(NamedTuple):
    """What ``runs ls`` prints of a run (a named tuple: no ``dataclasses`` to import)."""

    id: str
    state: str
    target: str
    created: str
    step: int | None = None
    reason: str = "requested"


def read_listed(directory: str, run_id: str) -> Listed:
    """The printed fields of ``directory``'s ``run.json``; ``UserError`` saying why they
    cannot be read, worded as ``RunStore.load`` words it (``record_file``)."""
    missing = f"cannot read runs/{run_id}/{RECORD}: {os.strerror(errno.ENOENT)}"
    return load_record(directory, run_id, missing, _listed_of)


def _listed_of(data: dict[str, Any]) -> Listed:
    """The printed fields of a record's ``data``, checked as pydantic would check them."""
    problem = _problem(data)
    if problem is not None:
        raise NotARecord(problem)
    snapshot = data.get("snapshot")
    return Listed(
        data["id"],
        data.get("state", "preparing"),
        data["target"],
        data["created"],
        snapshot["step"] if snapshot is not None else None,
        snapshot.get("reason", "requested") if snapshot is not None else "requested",
    )


def _problem(data: dict[str, Any]) -> str | None:
    """What makes the printed fields (and the required ones) no run record's."""
    for key in ("id", "target", "created", "remote_dir"):
        if key not in data:
            return f"{key}: Field required"
        if not isinstance(data[key], str):
            return f"{key}: Input should be a valid string"
    if data.get("state", "preparing") not in STATES:
        return f"state: Input should be {', '.join(repr(s) for s in STATES)}"
    snapshot = data.get("snapshot")
    return None if snapshot is None else _snapshot_problem(snapshot)


def _snapshot_problem(snapshot: Any) -> str | None:
    if not isinstance(snapshot, dict):
        return "snapshot: Input should be a valid dictionary"
    step = snapshot.get("step")
    if type(step) is not int or step < 0:
        return "snapshot.step: Input should be an integer of 0 or more"
    if not isinstance(snapshot.get("checkpoint"), str):
        return "snapshot.checkpoint: Input should be a valid string"
    if snapshot.get("reason", "requested") not in REASONS:
        return f"snapshot.reason: Input should be {', '.join(repr(r) for r in REASONS)}"
    return None


def listed_runs(root: Path, warn: Callable[[str], None]) -> list[Listed]:
    """Every readable run under ``root``, oldest first; ``warn`` says why one is skipped."""
    return each_record(root, read_listed, warn)
