"""A ``run.json``'s text as JSON: the reading and decoding that ``RunStore.load`` and
``runs ls`` share, so a bad record is worded alike by both (the listing then checks only
the fields it prints, without pydantic: it must stay as cheap as ``--help``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError


def record_data(path: Path, shown: str, missing: str) -> dict[str, Any]:
    """The JSON object of the record at ``path`` (``shown`` in messages); a ``UserError``
    saying ``missing`` when there is no file, or why the text is no record."""
    raw = files.read_regular(path, shown, files.RECORD_LIMIT, follow=False)
    if raw is None:
        raise UserError(missing)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UserError(
            f"{shown} is not a valid run record (line {error.lineno}, column {error.colno})"
        ) from None
    except UnicodeDecodeError:
        raise UserError(f"{shown} is not a valid run record (not UTF-8)") from None
    if not isinstance(data, dict):
        raise UserError(f"{shown} is not a valid run record (record: not an object)")
    return data


def not_this_run(shown: str) -> UserError:
    """The error for a record whose ``id`` names another run."""
    return UserError(f"{shown} is not a valid run record (id: names another run)")
