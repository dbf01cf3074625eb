"""``overbrainer runs``: the project's training runs, read from disk only."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from overbrainer.cli.complete import complete_run_id
from overbrainer.cli.context import current_app
from overbrainer.job.layout import METRICS_FILE

TAIL_MAX = 1_000_000
"""The most lines ``--tail`` keeps: a bound, so a huge N is an option error, not a crash."""


@click.group()
@click.pass_context
def runs(ctx: click.Context) -> None:
    """List training runs and read their logs."""
    if ctx.invoked_subcommand != "ls":  # `ls` configures it only to warn
        from overbrainer.logs import configure_logging

        configure_logging()


@runs.command("ls")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object a run.")
def list_runs(as_json: bool) -> None:
    """List the runs, oldest first: id, state, target, creation time, snapshot, a pod's
    note, then how long it took (to its last metric), its last loss and eval_loss, and
    `exported` / `compared` when it was.

    \b
    --json: a list of {id, state, target, created, snapshot: null | {step, reason},
    note: null | str, duration_s, loss, eval_loss: null | number, exports, compares: int,
    loss_kind: "ce" | "kd" (the KD trainer's weighted sum; its losses are marked (KD))}.

    Example: overbrainer runs ls --json
    """
    from overbrainer.project_paths import runs_dir

    root = runs_dir(current_app().project_dir)
    if as_json:
        import json

        from overbrainer.runs.listing import runs_json

        click.echo(json.dumps(runs_json(root), indent=2))
        return
    from overbrainer.runs.listing import run_lines

    lines = list(run_lines(root, header=True))
    if lines:  # one write: a thousand echoes are a thousand flushes
        click.echo("\n".join(lines))


@runs.command()
@click.argument("before", metavar="RUN_A", shell_complete=complete_run_id)
@click.argument("after", metavar="RUN_B", shell_complete=complete_run_id)
def diff(before: str, after: str) -> None:
    """Which inputs of training differ between RUN_A and RUN_B: data, settings, base
    model, device. Each may be `latest` or any unique prefix of an id.

    Example: overbrainer runs diff latest demo_2026
    """
    from overbrainer.train.inputs import differences, recorded

    store = current_app().runs
    before, after = store.resolve(before), store.resolve(after)
    a = recorded(store.run_dir(before), before)
    b = recorded(store.run_dir(after), after)
    lines = differences(a, b)
    if not lines:
        click.echo(f"runs: {before} and {after} were trained from the same inputs")
    for line in lines:
        click.echo(line)


@runs.command()
@click.argument("run_id", required=False, shell_complete=complete_run_id)
@click.option(
    "--tail",
    type=click.IntRange(min=1, max=TAIL_MAX),
    help=f"Only the last N lines (at most {TAIL_MAX:,}).",
)
@click.option(
    "--follow",
    "-f",
    "keep_following",
    is_flag=True,
    help="Keep printing until the job ends (with --pod, until the machine is gone).",
)
@click.option(
    "--pod",
    is_flag=True,
    help="The own logs of the machine a target made for the run (e.g. a Runpod pod), kept "
    "and live, not job.log.",
)
@click.option(
    "--source",
    type=click.Choice(["container", "system"]),
    help="With --pod: only the container's lines, or only the provider's system lines.",
)
def logs(
    run_id: str | None, tail: int | None, keep_following: bool, pod: bool, source: str | None
) -> None:
    """Print the job log of RUN_ID, redacted; a running job's is read from its target.
    With --pod, the own logs of the machine a target made for the run, from the target's
    plugin. RUN_ID may be `latest` (the default) or any unique prefix of an id.

    Example: overbrainer runs logs latest --tail 50 --follow
    """
    if source is not None and not pod:
        raise click.UsageError("--source applies only to --pod")
    run_id = current_app().runs.resolve(run_id)
    if pod:
        from overbrainer.cli.machinelog import print_machine_log
        from overbrainer.job.spec import MachineLogQuery

        query = MachineLogQuery(source=source, tail=tail, follow=keep_following)
        print_machine_log(current_app(), run_id, query)
        return
    from overbrainer.train.joblog import log_lines

    app = current_app()
    try:
        for line in log_lines(app.runs, run_id, tail, keep_following, app.workspace):
            click.echo(line)
    except KeyboardInterrupt:
        return  # Ctrl-C only stops following


@runs.command()
@click.argument("run_ids", metavar="[RUN_ID]...", nargs=-1, shell_complete=complete_run_id)
@click.option(
    "--plot",
    "plot",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[PATH]",
    help="Also write a PNG loss chart (default runs/<id>/loss.png).",
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object a run.")
def show(run_ids: tuple[str, ...], plot: str | None, as_json: bool) -> None:
    """Show a run: record, settings, outcome, snapshot, timings, exports, compares and
    curves; with two or more, overlay them (a resumed run continues its parent). A RUN_ID
    may be `latest` (the default) or any unique prefix of an id.

    \b
    --json: a list of {record: run.json, duration_s, step, max_steps, epoch, loss,
    eval_loss: null | number, loss_kind: "ce" | "kd" (the KD trainer's weighted sum),
    kd_loss, ce_loss, eval_kd_loss, eval_ce_loss: null | number (its two terms), exports,
    compares: [id], machine: null | {time, cpu, memory, disks, gpus}: the latest sample of
    its machine's gauges}.

    Example: overbrainer runs show latest --plot
    """
    from overbrainer.charts.describe import chain, show_lines

    app = current_app()
    store = app.runs
    records = [store.load(store.resolve(run_id)) for run_id in run_ids or (None,)]
    if as_json:
        import json

        from overbrainer.charts.describe import show_json

        click.echo(json.dumps([show_json(store, record) for record in records], indent=2))
        return
    width = max(min(shutil.get_terminal_size().columns - 16, 100), 20)
    for record in records:
        for line in show_lines(store, record, width):
            click.echo(line)
    if plot is None:
        return
    from overbrainer.charts.png import write_png
    from overbrainer.errors import UserError

    drawn = [curves for curves in chain(store, records) if curves.has_loss]
    if not drawn:
        from overbrainer.charts.series import metrics_path

        missing = [r.id for r in records if not metrics_path(store.run_dir(r.id)).exists()]
        if missing:
            raise UserError(f"runs: no {METRICS_FILE} for run {missing[0]} yet")
        raise UserError(f"runs: run {records[0].id} has no loss to plot")
    path = Path(plot) if plot else store.run_dir(records[-1].id) / "loss.png"
    write_png(drawn, path)
    click.echo(f"runs: loss chart written to {path}")
