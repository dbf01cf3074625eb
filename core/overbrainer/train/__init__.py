"""Training: the Axolotl configuration, the job directory, the commands' logic."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overbrainer.train.workspace import Workspace


def after_run(ws: Workspace) -> None:
    """Train after ``overbrainer run``'s stages, with the settings ``ws`` holds (the caller
    reloads them when they changed and holds the project lock)."""
    from loguru import logger

    from overbrainer.train.session import train

    if ws.settings.training is None:
        logger.info("no [training] section in overbrainer.toml: run stops after split")
        return
    train(ws)
