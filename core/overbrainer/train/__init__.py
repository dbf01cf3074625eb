"""Training: the Axolotl configuration, the run directory, the commands' logic."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overbrainer.cli.context import App


def after_run(app: App) -> None:
    """Train after ``overbrainer run``'s stages, with the settings ``app`` holds now (the
    caller reloads them when they changed and holds the project lock)."""
    from loguru import logger

    from overbrainer.train.session import train

    if app.settings.training is None:
        logger.info("no [training] section in overbrainer.toml: run stops after split")
        return
    train(app)
