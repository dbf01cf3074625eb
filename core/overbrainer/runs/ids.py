"""Run ids: ``<slug>_<YYYYMMDD>-<HHMMSS>`` (UTC), with ``_2`` … ``_99`` on a collision."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from overbrainer.errors import UserError

if TYPE_CHECKING:  # not imported at run time: `runs ls` checks ids and makes none
    from collections.abc import Iterator
    from datetime import datetime

MAX_SUFFIX = 99
# Runs made before slugs were trimmed may start with `_`; `.` and `-` may not start an id.
_VALID = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def slug(project_name: str) -> str:
    """The project name lowercased, each run of other characters one ``_``, at most 40,
    without ``_`` at either end (as the reference tool makes them: its ids start with a
    letter or a digit); ``run`` when nothing is left."""
    text = re.sub(r"[^a-z0-9]+", "_", project_name.lower()).strip("_")[:40].strip("_")
    return text or "run"


def base_id(project_name: str, now: datetime) -> str:
    return f"{slug(project_name)}_{now:%Y%m%d-%H%M%S}"


def candidates(base: str) -> Iterator[str]:
    """``base``, then ``base_2`` up to ``base_99``."""
    yield base
    for suffix in range(2, MAX_SUFFIX + 1):
        yield f"{base}_{suffix}"


def is_valid_id(run_id: str) -> bool:
    """Whether ``run_id`` can only name a directory directly inside ``runs/``."""
    return bool(_VALID.match(run_id)) and ".." not in run_id


def check_run_id(run_id: str) -> str:
    """``run_id`` itself, or a ``UserError`` when it could escape ``runs/``."""
    if not is_valid_id(run_id):
        shown = run_id.encode("unicode_escape").decode("ascii")[:80]
        raise UserError(f"invalid run id `{shown}`: a run id names a directory in runs/")
    return run_id
