"""For a plugin's own commands (``register_commands``): ``current_project`` (the project of
the running command), ``ProjectLock`` (the project's writer lock, a context manager),
``check_run_id`` (refuses an id that is not a run id), ``resolve_run_id`` (``latest`` or a
unique prefix to the run id, as the core's commands take them), ``read_run`` (a run's
record, ``runs/<id>/run.json``), ``quiet_end`` (Ctrl-C and a closed standard output end a
printing command quietly). The one tier that reaches the commands' code."""

from __future__ import annotations

from contextlib import AbstractContextManager

from overbrainer.cli.context import current_app
from overbrainer.cli.machinelog import quiet_end as ending
from overbrainer.job.record import RunRecord
from overbrainer.project import Project
from overbrainer.runs.ids import check_run_id
from overbrainer.runs.lock import ProjectLock
from overbrainer.runs.resolve import resolve_run_id
from overbrainer.runs.store import RunStore

__all__ = [
    "ProjectLock",
    "check_run_id",
    "current_project",
    "quiet_end",
    "read_run",
    "resolve_run_id",
]


def current_project() -> Project:
    """The project of the command being run, for a command a plugin registered."""
    return current_app().project


def read_run(project: Project, run_id: str) -> RunRecord:
    """The record of run ``run_id`` of ``project``, read and checked as the core reads it
    (for a plugin's command about one run: which target it ran on); ``UserError`` when
    there is no such run or its record is not valid."""
    return RunStore(project.dir).load(run_id)


def quiet_end() -> AbstractContextManager[None]:
    """For a command that prints until stopped: Ctrl-C and a closed standard output
    (``| head``) end it quietly, exit status 0, as they end ``runs logs``."""
    return ending()
