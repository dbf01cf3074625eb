"""``overbrainer runs``: the project's training runs, read from disk only."""

from __future__ import annotations

import click

from overbrainer.cli.complete import complete_run_id
from overbrainer.cli.context import current_app


@click.group()
def runs() -> None:
    """List training runs and read their logs."""


@runs.command("ls")
def list_runs() -> None:
    """List the runs, oldest first: id, state, target, creation time, snapshot."""
    from overbrainer.runs.listing import run_lines

    for line in run_lines(current_app().runs):
        click.echo(line)


@runs.command()
@click.argument("run_id", shell_complete=complete_run_id)
@click.option("--tail", type=click.IntRange(min=1), help="Only the last N lines.")
def logs(run_id: str, tail: int | None) -> None:
    """Print the job log of RUN_ID, redacted."""
    from overbrainer.runs.logs import read_job_log

    for line in read_job_log(current_app().runs, run_id, tail):
        click.echo(line)
