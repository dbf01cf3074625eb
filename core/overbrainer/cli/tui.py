"""``overbrainer tui``: the terminal UI."""

from __future__ import annotations

import sys

import click

from overbrainer.cli.context import current_app


@click.command()
def tui() -> None:
    """Browse the project, its dataset, pipeline, runs and logs in a terminal UI.

    Example: overbrainer tui
    """
    from overbrainer.errors import UserError

    if not sys.stdout.isatty():
        raise UserError("tui: needs a terminal (stdout is not one)")
    try:
        from overbrainer.tui.app import OverbrainerApp
    except ImportError:
        raise UserError("tui needs textual: pip install 'overbrainer[tui]'") from None
    from loguru import logger

    app = OverbrainerApp(current_app().project_dir)
    # Log lines would tear the screen: the TUI's own go to its Logs view.
    logger.remove()
    logger.add(
        lambda message: app.log_sink(
            message.record["level"].name.lower(), message.rstrip("\n")
        ),
        level="DEBUG",
        format="{message}",
    )
    app.run()
