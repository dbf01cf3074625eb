"""Naming a run on the command line: ``latest``, an exact id, or a unique prefix of one.

Resolved from the directory names alone (and the creation times for ``latest``), so a
command pays no more than ``runs ls`` for it. An exact name that exists is returned as it
is, so what the command says about a broken record stays the command's own.
"""

from __future__ import annotations

import os
from pathlib import Path

from overbrainer.errors import UserError
from overbrainer.job.layout import RECORD
from overbrainer.project import RUNS_DIR
from overbrainer.runs.ids import check_run_id, is_valid_id
from overbrainer.runs.listed import listed_runs

LATEST = "latest"
"""The name of the newest run (by creation time, then id)."""
SHOWN = 5
"""How many candidates an ambiguous prefix lists."""


def resolve_run_id(root: Path, text: str, *, known_only: bool = True) -> str:
    """The id ``text`` names under ``root`` (``runs/``): the newest run for ``latest``,
    ``text`` itself when that run exists, else the one run whose id starts with it.

    An ambiguous prefix lists the candidates; an unknown one says ``no run X in runs/``,
    unless ``known_only`` is false (a command for runs of no record: ``text`` itself).
    """
    if text != LATEST:
        check_run_id(text)
        if os.path.lexists(root / text):
            return text
    names = _run_names(root)
    if text == LATEST:
        return _newest(root, names)
    matches = sorted(name for name in names if name.startswith(text))
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = ", ".join(matches[:SHOWN])
        more = f" and {len(matches) - SHOWN} more" if len(matches) > SHOWN else ""
        raise UserError(f"`{text}` names more than one run ({listed}{more}): give more of the id")
    if not known_only:
        return text
    raise UserError(f"no run {text} in {RUNS_DIR}/")


def _run_names(root: Path) -> list[str]:
    """The valid ids of ``root``'s directories that hold a record."""
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    return [
        entry.name
        for entry in entries
        if is_valid_id(entry.name)
        and entry.is_dir(follow_symlinks=False)
        and os.path.exists(os.path.join(entry.path, RECORD))
    ]


def _newest(root: Path, names: list[str]) -> str:
    """The last run ``runs ls`` lists (unreadable records skipped, as it skips them)."""
    if not names:
        raise UserError(f"no run in {RUNS_DIR}/ yet: `latest` names none")
    runs = listed_runs(root, lambda message: None)
    if not runs:
        raise UserError(f"no readable run in {RUNS_DIR}/: `latest` names none")
    return runs[-1].id
