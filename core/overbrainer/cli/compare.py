"""``overbrainer compare``: the child against its base model and its parent, judged."""

from __future__ import annotations

import click

from overbrainer.cli.complete import complete_run_id
from overbrainer.cli.context import current_app


@click.command()
@click.option(
    "--run",
    "run_id",
    metavar="RUN_ID",
    shell_complete=complete_run_id,
    help="The run whose GGUF to compare: an id, a prefix, `latest` (default: the newest with one).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="Ask only the first N questions of each eval set.",
)
@click.option(
    "--eval",
    "eval_set",
    metavar="NAME",
    help="Ask only this eval set: `split` (the eval split) or a file of [eval] files, by its "
    "name without .jsonl (default: the eval split, then every [eval] files set).",
)
@click.option(
    "--rejudge",
    metavar="COMPARE_ID",
    help="Judge this compare again (resumes its verdicts); serves nothing.",
)
@click.option(
    "--keep-machine",
    "--keep-pod",
    "keep_machine",
    is_flag=True,
    help="Keep a machine made for this compare, such as a pod (a later command reuses it); "
    "--keep-pod is the same.",
)
@click.option(
    "--against",
    metavar="base|parent|RUN_ID",
    help="Judge the child against its untrained base model (served as the child is), its "
    "parent, or another run's child (default: the base, when it can be served, and the parent).",
)
def compare(  # noqa: PLR0917 - click passes each option
    run_id: str | None,
    limit: int | None,
    eval_set: str | None,
    rejudge: str | None,
    keep_machine: bool,
    against: str | None,
) -> None:
    """Compare the child (its GGUF, served on the run's target) with its parent.

    With no --against, the child is judged against its untrained base model too (its
    GGUF made and its answers kept for later compares), and a line says whether
    distillation helped. Prints each win-or-tie rate with its 95% interval and its
    length-controlled rate, latency and costs, then the path of compare.md.

    Example: overbrainer compare --run latest --against base --limit 20 --eval split
    """
    from overbrainer.after.compare import compare as run_compare
    from overbrainer.redact import escape_controls

    if rejudge is not None and any(
        option is not None for option in (run_id, limit, eval_set, against)
    ):
        raise click.UsageError("--rejudge takes none of --run, --limit, --eval and --against")
    if rejudge is not None and keep_machine:
        raise click.UsageError("--rejudge makes no machine: --keep-machine does not apply")
    app = current_app()
    if run_id is not None:
        run_id = app.runs.resolve(run_id)
    if against is not None and against not in ("base", "parent"):
        against = app.runs.resolve(against)
    with app.lock():
        report = run_compare(
            app.project,
            app.plugins.hook,
            app.runs,
            run_id=run_id,
            limit=limit,
            eval_set=eval_set,
            rejudge=rejudge,
            keep_machine=keep_machine,
            against=against,
            echo=lambda line: click.echo(escape_controls(line)),
        )
    click.echo(
        report.relative_to(app.project_dir) if report.is_relative_to(app.project_dir) else report
    )
