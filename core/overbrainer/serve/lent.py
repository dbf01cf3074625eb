"""The runs a serve is lent to: an online-KD run's ``runs/ID/teacher.json`` names the serve
its job asks (written before the job starts). A serve that a launched run which has not
ended still asks is nobody's orphan, and no other run's end ends it."""

from __future__ import annotations

import json

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.project import Project
from overbrainer.runs.store import RunStore

LENT_FILE = "teacher.json"
"""In a run's directory: the serve lent to it (``provider``, ``serve_id``)."""


def lent_to(project: Project, run_id: str) -> tuple[str, str] | None:
    """The provider and serve id lent to run ``run_id``, or None (none, or unreadable)."""
    path = RunStore(project.dir).run_dir(run_id) / LENT_FILE
    try:
        data = json.loads(files.read_text(path, f"runs/{run_id}/{LENT_FILE}") or "null")
        return str(data["provider"]), str(data["serve_id"])
    except (UserError, ValueError, KeyError, TypeError):
        return None


def runs_asking(project: Project, serve_id: str) -> list[str]:
    """The runs lent the serve ``serve_id`` that were launched and have not ended, as their
    records say (a run nobody followed to its end still says running: its serve's watchdog
    ends the serve then)."""
    store = RunStore(project.dir)
    found = []
    for path in sorted(store.root.glob(f"*/{LENT_FILE}")):
        run_id = path.parent.name
        lent = lent_to(project, run_id)
        if lent is None or lent[1] != serve_id:
            continue
        try:
            run = store.load(run_id)
        except UserError:
            continue
        if run.job is not None and not run.state.ended:
            found.append(run_id)
    return found
