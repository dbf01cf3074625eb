"""A ``run.json``: the reading, decoding and wording of a bad one that ``RunStore`` and
``runs ls`` share, and the walk over ``runs/`` both list from. Each brings only its own
check of the fields (pydantic's whole record for the store; the printed fields alone for
the listing, which must stay as cheap as ``--help``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import RECORD
from overbrainer.project_paths import RUNS_DIR
from overbrainer.runs.ids import is_valid_id

if TYPE_CHECKING:
    from collections.abc import Callable


class Dated(Protocol):
    """What both readings of a record give: its id and creation time (the listing order)."""

    @property
    def id(self) -> str: ...

    @property
    def created(self) -> str: ...


R = TypeVar("R", bound=Dated)


class NotARecord(Exception):
    """Raised by a record's check: ``field: what is wrong with it``."""


def record_data(path: Path, shown: str, missing: str) -> dict[str, Any]:
    """The JSON object of the record at ``path`` (``shown`` in messages); a ``UserError``
    saying ``missing`` when there is no file, or why the text is no record."""
    raw = files.read_regular(path, shown, files.RECORD_LIMIT, follow=False)
    if raw is None:
        raise UserError(missing)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise invalid(shown, f"line {error.lineno}, column {error.colno}") from None
    except UnicodeDecodeError:
        raise invalid(shown, "not UTF-8") from None
    if not isinstance(data, dict):
        raise invalid(shown, "record: not an object")
    return data


def invalid(shown: str, why: str) -> UserError:
    """The error for a record that is no run record, and why."""
    return UserError(f"{shown} is not a valid run record ({why})")


def load_record(
    directory: Path | str, run_id: str, missing: str, check: Callable[[dict[str, Any]], R]
) -> R:
    """The record of ``run_id`` in ``directory`` as ``check`` makes it of the decoded
    JSON (raising ``NotARecord`` for a field that is wrong), its id checked; else a
    ``UserError`` saying ``missing`` (no file) or why it is no record."""
    shown = f"{RUNS_DIR}/{run_id}/{RECORD}"
    data = record_data(Path(directory, RECORD), shown, missing)
    try:
        record = check(data)
    except NotARecord as why:
        raise invalid(shown, str(why)) from None
    if record.id != run_id:
        raise invalid(shown, "id: names another run")
    return record


def each_record(
    root: Path, load: Callable[[str, str], R], warn: Callable[[str], None]
) -> list[R]:
    """``load(directory, run_id)`` of every run directory under ``root`` (a valid id, not a
    link, holding a ``run.json``), oldest first; ``warn`` says why one is skipped."""
    if not root.is_dir():
        return []
    records = []
    for entry in os.scandir(root):
        if not is_valid_id(entry.name) or not entry.is_dir(follow_symlinks=False):
            continue
        if not os.path.exists(os.path.join(entry.path, RECORD)):
            continue
        try:
            records.append(load(entry.path, entry.name))
        except UserError as error:
            warn(f"skipping run {entry.name}: {error}")
    return sorted(records, key=lambda record: (record.created, record.id))
