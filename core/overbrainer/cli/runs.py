"""``overbrainer runs``: the project's training runs, read from disk only."""

from __future__ import annotations

import click

from overbrainer.cli.complete import complete_run_id
from overbrainer.cli.context import current_app


@click.group()
@click.pass_context
def runs(ctx: click.Context) -> None:
    """List training runs and read their logs."""
    if ctx.invoked_subcommand != "ls":  # `ls` configures it only to warn
        from overbrainer.logs import configure_logging

        configure_logging()


@runs.command("ls")
def list_runs() -> None:
    """List the runs, oldest first: id, state, target, creation time, snapshot."""
    from overbrainer.project import runs_dir
    from overbrainer.runs.listing import run_lines

    for line in run_lines(runs_dir(current_app().project_dir)):
        click.echo(line)


@runs.command()
@click.argument("before", metavar="RUN_A", shell_complete=complete_run_id)
@click.argument("after", metavar="RUN_B", shell_complete=complete_run_id)
def diff(before: str, after: str) -> None:
    """Which inputs of training differ between RUN_A and RUN_B: data, settings, base
    model, device."""
    from overbrainer.train.inputs import differences, recorded

    store = current_app().runs
    a = recorded(store.run_dir(before), before)
    b = recorded(store.run_dir(after), after)
    lines = differences(a, b)
    if not lines:
        click.echo(f"runs: {before} and {after} were trained from the same inputs")
    for line in lines:
        click.echo(line)


@runs.command()
@click.argument("run_id", shell_complete=complete_run_id)
@click.option("--tail", type=click.IntRange(min=1), help="Only the last N lines.")
@click.option(
    "--follow", "-f", "keep_following", is_flag=True, help="Keep printing until the job ends."
)
def logs(run_id: str, tail: int | None, keep_following: bool) -> None:
    """Print the job log of RUN_ID, redacted; a running job's is read from its target."""
    from overbrainer.train.joblog import log_lines

    app = current_app()
    try:
        for line in log_lines(app.runs, run_id, tail, keep_following, app.workspace):
            click.echo(line)
    except KeyboardInterrupt:
        return  # Ctrl-C only stops following
