"""``overbrainer history``: what the stages did, read from disk only."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
@click.option("--all", "every", is_flag=True, help="One line per stage execution.")
def history(every: bool) -> None:
    """Runs, items, tokens and cost per stage, and their total."""
    from overbrainer.pipeline.history import execution_lines, read_history, summary_lines
    from overbrainer.redact import escape_controls

    entries = read_history(current_app().project_dir)
    for line in execution_lines(entries) if every else summary_lines(entries):
        click.echo(escape_controls(line))
