"""The project a command works on: its directory, settings and environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from overbrainer.project_paths import RUNS_DIR, runs_dir

__all__ = ["RUNS_DIR", "Project", "runs_dir"]

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
