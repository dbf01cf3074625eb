"""Where a project keeps its runs, apart from ``project``: ``runs ls`` finds ``runs/``
without importing ``dataclasses`` for the ``Project`` it does not need."""

from __future__ import annotations

from pathlib import Path

from overbrainer.errors import UserError

RUNS_DIR = "runs"


def runs_dir(project_dir: Path) -> Path:
    """``runs/`` of the project, refused when it is a symbolic link leading out of the
    project (as ``.overbrainer`` is): run records, job files and outputs would be read and
    written wherever a project someone else made points it."""
    path = project_dir / RUNS_DIR
    if path.is_symlink() and not path.resolve().is_relative_to(project_dir.resolve()):
        raise UserError(
            f"{RUNS_DIR} is a symbolic link leading out of the project: refusing to use it"
        )
    return path
