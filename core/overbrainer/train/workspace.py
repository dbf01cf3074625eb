"""What the training commands work on, without knowing which command line drives them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overbrainer.config.model import Settings
    from overbrainer.hookcalls import Hooks
    from overbrainer.project import Project
    from overbrainer.runs.store import RunStore


@dataclass(frozen=True)
class Workspace:
    """The project, its plugins' hooks, its runs, and where the final report goes.

    ``echo`` prints a line of the report on stdout; progress and warnings go to loguru.
    """

    project: Project
    hook: Hooks
    runs: RunStore
    echo: Callable[[str], None]

    @property
    def settings(self) -> Settings:
        return self.project.settings

    @property
    def project_dir(self) -> Path:
        return self.project.dir
