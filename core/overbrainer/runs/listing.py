"""``runs ls``: one line a run, from the run directories alone (no network).

A listing reads of each ``run.json`` only the fields it prints (id, state, target,
creation time, snapshot) and checks only those: no pydantic, no full validation of a
thousand records, and nothing cached, so a state is never stale. What a target adds (a
pod's state) it keeps in a one-line note beside the record: listing loads no plugin.

The line starts as the reference tool's (``id  state  target  created{snapshot}{pod}``,
fixed by the spec); what this version adds (``runs.figures``: duration, losses, exports,
compares) follows it, each field labelled, and a header names the fixed columns.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import OUTPUT_DIR, RECORD, TARGET_NOTE
from overbrainer.redact import escape_controls
from overbrainer.runs.ids import is_valid_id
from overbrainer.runs.record_file import not_this_run, record_data

if TYPE_CHECKING:
    from overbrainer.job.record import RunRecord
    from overbrainer.runs.store import RunStore

STATES = ("preparing", "running", "succeeded", "failed", "cancelled", "stopped")
"""``RunState``'s values (a test holds them equal), without importing pydantic."""
REASONS = ("requested", "deadline", "cost", "disk")
"""``SnapshotReason``'s values."""


@dataclass(frozen=True, slots=True)
class Listed:
    """What ``runs ls`` prints of a run."""

    id: str
    state: str
    target: str
    created: str
    step: int | None = None
    reason: str = "requested"


def run_line(record: RunRecord | Listed, width: int, extra: str = "") -> str:
    """``id  state  target  created``, then the snapshot of a stopped run and ``extra``;
    what the record holds is escaped (it is a file anyone may have written)."""
    if isinstance(record, Listed):
        state, step, reason = record.state, record.step, record.reason
    else:
        state = record.state.value
        step = record.snapshot.step if record.snapshot is not None else None
        reason = record.snapshot.reason if record.snapshot is not None else ""
    snapshot = ""
    if step is not None:
        snapshot = f"  step {step} ({reason}): partial model in {OUTPUT_DIR}/"
    return escape_controls(
        f"{record.id:<{width}}  {state:<9}  {record.target}  {record.created}{snapshot}{extra}"
    )


def read_listed(directory: str, run_id: str) -> Listed:
    """The printed fields of ``directory``'s ``run.json``; ``UserError`` saying why they
    cannot be read, worded as ``RunStore.load`` words it."""
    shown = f"runs/{run_id}/{RECORD}"
    missing = f"cannot read {shown}: {os.strerror(errno.ENOENT)}"
    data = record_data(Path(directory, RECORD), shown, missing)
    problem = _problem(data)
    if problem is not None:
        raise UserError(f"{shown} is not a valid run record ({problem})")
    if data["id"] != run_id:
        raise not_this_run(shown)
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
    if not root.is_dir():
        return []
    runs = []
    for entry in os.scandir(root):
        if not is_valid_id(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        if not os.path.exists(os.path.join(entry.path, RECORD)):
            continue
        try:
            runs.append(read_listed(entry.path, entry.name))
        except UserError as error:
            warn(f"skipping run {entry.name}: {error}")
    return sorted(runs, key=lambda run: (run.created, run.id))


def _warner() -> Callable[[str], None]:
    """``logger.warning``, with logging configured at the first warning: the CLI
    deferred it, so that a listing with nothing to warn about never imports loguru."""
    ready = False

    def warn(message: str) -> None:
        nonlocal ready
        from loguru import logger

        if not ready:
            from overbrainer.logs import configure_logging

            configure_logging()
            ready = True
        logger.warning(message)

    return warn


def run_lines(store: RunStore | Path, header: bool = False) -> Iterator[str]:
    """The lines of ``runs ls`` for a ``RunStore`` or a ``runs/`` directory, each with the
    note its target keeps (``layout.TARGET_NOTE``: a pod's state and spend) and its
    figures; with ``header``, a line naming the columns first (when there is a run)."""
    from overbrainer.runs.figures import figures_of

    root = store if isinstance(store, Path) else store.root
    runs = listed_runs(root, _warner())
    width = max((len(run.id) for run in runs), default=0)
    if header and runs:
        yield f"{'RUN':<{width}}  {'STATE':<9}  TARGET  CREATED"
    for run in runs:
        directory = os.path.join(root, run.id)  # a str: pathlib costs a thousand runs
        note = target_note(directory)
        figures = figures_of(directory, run.created)
        yield run_line(run, width, (f"  {note}" if note else "") + figures.text())


def runs_json(root: Path) -> list[dict[str, Any]]:
    """``runs ls --json``: a dict a run, oldest first (its keys: ``runs ls --help``)."""
    from overbrainer.redact import redact
    from overbrainer.runs.figures import figures_of

    listed = []
    for run in listed_runs(root, _warner()):
        snapshot = None if run.step is None else {"step": run.step, "reason": run.reason}
        note = target_note(root / run.id)
        listed.append(
            {
                "id": run.id,
                "state": run.state,
                "target": run.target,
                "created": run.created,
                "snapshot": snapshot,
                "note": redact(note) if note else None,
                **figures_of(str(root / run.id), run.created).to_json(),
            }
        )
    return listed


def target_note(directory: Path | str) -> str:
    """The first line of the run's target note, or "" (none, a link, unreadable)."""
    try:
        fd = files.open_regular(Path(directory) / TARGET_NOTE, TARGET_NOTE, follow=False)
    except UserError:  # a link, a FIFO: no note
        return ""
    if fd is None:
        return ""
    try:
        head = os.read(fd, 512)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return head.decode("utf-8", "replace").split("\n", 1)[0].strip()
