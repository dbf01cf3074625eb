"""The project a command works on: its directory, settings and environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overbrainer.config.model import Settings


@dataclass(frozen=True)
class Project:
    """A loaded project. ``env`` is the process environment layered with the project's
    ``.env``: what jobs inherit and what secrets are resolved from."""

    dir: Path
    settings: Settings
    env: Mapping[str, str]

    @property
    def runs_dir(self) -> Path:
        return runs_dir(self.dir)

    @property
    def state_dir(self) -> Path:
        return self.dir / ".overbrainer"


RUNS_DIR = "runs"


def runs_dir(project_dir: Path) -> Path:
    """``runs/`` of the project, refused when it is a symbolic link leading out of the
    project (as ``.overbrainer`` is): run records, job files and outputs would be read and
    written wherever a project someone else made points it."""
    from overbrainer.errors import UserError

    path = project_dir / RUNS_DIR
    if path.is_symlink() and not path.resolve().is_relative_to(project_dir.resolve()):
        raise UserError(
            f"{RUNS_DIR} is a symbolic link leading out of the project: refusing to use it"
        )
    return path
