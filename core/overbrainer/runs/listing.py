"""``runs ls``: one line a run, from the run directories alone (no network).

A listing reads of each ``run.json`` only the fields it prints (id, state, target,
creation time, snapshot) and checks only those: no pydantic, no full validation of a
thousand records. What a finished run's files gave is kept in ``runs/.listing.json``
(``runs.listing_cache``), used only while the files are unchanged: a state is never stale.
What a target adds (a pod's state) it keeps in a one-line note beside the record: listing
loads no plugin.

The line starts as the reference tool's (``id  state  target  created{snapshot}{pod}``,
fixed by the spec); what this version adds (``runs.figures``: duration, losses, exports,
compares) follows it. Every field is a column, padded to the widest of its runs, and the
header names each column at its start; a column no run has a value in is left out.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from overbrainer import files
from overbrainer.duration import duration
from overbrainer.errors import UserError
from overbrainer.job.layout import OUTPUT_DIR, RECORD, TARGET_NOTE
from overbrainer.logs import configure_logging
from overbrainer.redact import escape_controls, redact
from overbrainer.runs.figures import Figures, figures_of
from overbrainer.runs.ids import is_valid_id
from overbrainer.runs.listed import STATES, Listed, read_listed
from overbrainer.runs.listing_cache import (
    FIELDS,
    FINISHED,
    NO_METRICS,
    ListingCache,
    metrics_key,
    settled,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from overbrainer.job.record import RunRecord
    from overbrainer.runs.listing_cache import Key
    from overbrainer.runs.store import RunStore


def run_line(record: RunRecord | Listed, width: int, extra: str = "") -> str:
    """``id  state  target  created``, then the snapshot of a stopped run and ``extra``;
    what the record holds is escaped (it is a file anyone may have written)."""
    return f"{record.id:<{width}}{line_tail(record, extra)}"


def line_tail(record: RunRecord | Listed, extra: str = "") -> str:
    """What follows the id in ``run_line``, escaped."""
    if isinstance(record, Listed):
        state, step, reason = record.state, record.step, record.reason
    else:
        state = record.state.value
        step = record.snapshot.step if record.snapshot is not None else None
        reason = record.snapshot.reason if record.snapshot is not None else ""
    snapshot = ""
    if step is not None:
        snapshot = f"  step {step} ({reason}): partial model in {OUTPUT_DIR}/"
    return escape_controls(f"  {state:<9}  {record.target}  {record.created}{snapshot}{extra}")


class Row:
    """A run as ``runs ls`` shows it: its id, and the fields the listing cache keeps of it
    (``listing_cache.FIELDS``: its record's, its target's note, its figures, and its line
    after the id, made once). A plain slotted class, made for ``--json`` only."""

    __slots__ = ("fields", "id")

    def __init__(self, run_id: str, fields: list[Any]) -> None:
        self.id = run_id
        self.fields = fields

    @staticmethod
    def fields_of(listed: Listed, note: str, figures: Figures) -> list[Any]:
        """What the cache keeps of a run, in ``FIELDS``' order."""
        extra = (f"  {note}" if note else "") + figures.text()
        figured = [getattr(figures, name) for name in figures.__slots__]
        return [*listed[1:], note, *figured, line_tail(listed, extra)]

    @property
    def listed(self) -> Listed:
        return Listed(self.id, *self.fields[:5])

    @property
    def note(self) -> str:
        note: str = self.fields[5]
        return note

    @property
    def figures(self) -> Figures:
        return Figures(*self.fields[6:12])

    @property
    def tail(self) -> str:
        tail: str = self.fields[12]
        return tail


def listed_rows(root: Path, warn: Callable[[str], None]) -> list[Row]:
    """Every readable run under ``root`` with its note and figures, oldest first (read
    from the listing cache where the run's files are as they were); ``warn`` says why one
    is skipped."""
    return [Row(run_id, fields[-FIELDS:]) for _, run_id, fields in _listed(root, warn)]


def _listed(root: Path, warn: Callable[[str], None]) -> list[tuple[str, str, list[Any]]]:
    """``listed_rows`` as (created, id, a list ending with the fields), sorted: a tuple a
    run, and one ``stat`` of its directory and one of its record where the cache has it
    (the cache's whole entry is the list then)."""
    if not root.is_dir():
        return []
    cache = ListingCache(root)
    rows = []
    kept: set[str] = set()
    stat = os.stat
    for entry in os.scandir(root):
        name = entry.name
        if not is_valid_id(name):  # the cache is a file anyone may write: its names too
            continue
        if not entry.is_dir(follow_symlinks=False):
            continue
        path = entry.path
        try:
            folder = stat(path, follow_symlinks=False)
            record = stat(f"{path}/{RECORD}", follow_symlinks=False)  # not os.path.join
        except OSError:  # no run.json: no run
            continue
        key: Key = [folder.st_mtime_ns, record.st_ino, record.st_size, record.st_mtime_ns]
        kept_entry = cache.get(name, path, key)
        if kept_entry is not None:
            rows.append((kept_entry[8], name, kept_entry))
            kept.add(name)
            continue
        try:
            listed = read_listed(path, name)
        except UserError as error:
            warn(f"skipping run {name}: {error}")
            continue
        fields = Row.fields_of(listed, target_note(path), figures_of(path, listed.created))
        rows.append((listed.created, name, fields))
        key += NO_METRICS if listed.state in FINISHED else metrics_key(path)
        if settled(key) and not _made_since(path):
            cache.put(name, key, fields)
            kept.add(name)
    cache.keep_only(kept)
    cache.save()
    rows.sort()  # by time, then id (ids are unique: the fields are never compared)
    return rows


def _made_since(directory: str) -> bool:
    """Whether the run has directories of exports or compares, whose records can appear
    without the run's own directory changing."""
    return any(os.path.lexists(os.path.join(directory, kind)) for kind in ("exports", "compares"))


def _warner() -> Callable[[str], None]:
    """``logger.warning``, with logging configured at the first warning: the CLI
    deferred it, so that a listing with nothing to warn about never imports loguru."""
    ready = False

    def warn(message: str) -> None:
        nonlocal ready
        # loguru is a third of a listing's start-up: imported only to warn.
        from loguru import logger  # noqa: PLC0415

        if not ready:
            configure_logging()
            ready = True
        logger.warning(message)

    return warn


COLUMNS = (
    "RUN",
    "STATE",
    "TARGET",
    "CREATED",
    "SNAPSHOT",
    "NOTE",
    "TOOK",
    "LOSS",
    "EVAL_LOSS",
    "MADE",
)
"""``runs ls``'s header; a column after CREATED is shown only when a run has a value in it."""
FIXED = 4
"""The reference tool's columns, always shown."""


def run_lines(store: RunStore | Path, header: bool = False) -> Iterator[str]:
    """The lines of ``runs ls`` for a ``RunStore`` or a ``runs/`` directory, each with the
    note its target keeps (``layout.TARGET_NOTE``: a pod's state and spend) and its
    figures, in columns; with ``header``, a line naming each column at its start first
    (when there is a run)."""
    root = store if isinstance(store, Path) else store.root
    rows = _listed(root, _warner())
    if not rows:
        return

    table = [
        [escape_controls(str(cell)) for cell in _cells(run_id, fields[-FIELDS:])]
        for _, run_id, fields in rows
    ]
    shown = [n for n in range(len(COLUMNS)) if n < FIXED or any(row[n] for row in table)]
    if header:
        table.insert(0, list(COLUMNS))
    widths = {n: max(len(row[n]) for row in table) for n in shown}
    widths[1] = max(widths[1], len(max(STATES, key=len)))  # as the reference: always 9
    last = shown[-1]
    for row in table:
        cells = (row[n] if n == last else f"{row[n]:<{widths[n]}}" for n in shown)
        yield "  ".join(cells).rstrip()


def _cells(run_id: str, fields: list[Any]) -> list[Any]:
    """A run's cells in ``COLUMNS``' order, "" where it has no value; read from the fields
    as ``Figures`` orders them."""
    state, target, created, step, reason, note, seconds, loss, eval_loss = fields[:9]
    exports, compares, kd = fields[9:12]
    snapshot = "" if step is None else f"step {step} ({reason}): partial model in {OUTPUT_DIR}/"
    made = " ".join(
        word for word, count in (("exported", exports), ("compared", compares)) if count
    )
    return [
        run_id,
        state,
        target,
        created,
        snapshot,
        note,
        "" if seconds is None else duration(seconds),
        "" if loss is None else f"{loss:.4f}{' (KD)' if kd else ''}",
        "" if eval_loss is None else f"{eval_loss:.4f}{' (KD)' if kd else ''}",
        made,
    ]


def runs_json(root: Path) -> list[dict[str, Any]]:
    """``runs ls --json``: a dict a run, oldest first (its keys: ``runs ls --help``)."""
    listed = []
    for row in listed_rows(root, _warner()):
        run, note = row.listed, row.note
        snapshot = None if run.step is None else {"step": run.step, "reason": run.reason}
        listed.append(
            {
                "id": run.id,
                "state": run.state,
                "target": run.target,
                "created": run.created,
                "snapshot": snapshot,
                "note": redact(note) if note else None,
                **row.figures.to_json(),
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
