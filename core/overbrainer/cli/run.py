"""``overbrainer run``: every stage in order, then training when ``[training]`` exists."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
@click.option(
    "--retrain",
    is_flag=True,
    help="Train even when a succeeded run was made from the same inputs.",
)
def run(retrain: bool) -> None:
    """Run subtopics, questions, answers and split, then train when [training] exists.

    Each stage does only the work not done yet, and training is skipped when a succeeded
    run was made from the same inputs (data, settings, base model, device). A stage with
    failed items stops the chain. Changes to overbrainer.toml and .env are picked up
    between stages and before training; the running stage keeps its settings.
    """
    from overbrainer.config.reload import Reloader
    from overbrainer.watch.cycle import Cycle
    from overbrainer.watch.summary import CycleSummary

    app = current_app()
    with (
        app.lock(),
        Reloader(app.project_dir, app.env, app.plugins.kinds, app.settings) as reloader,
    ):
        cycle = Cycle(reloader, app.plugins.hook, app.runs, app.workspace().echo)
        summary = cycle.run(
            CycleSummary(1, ("start",)),
            on_stage=lambda outcome: click.echo(outcome.summary),
            retrain=retrain,
        )
        if summary.run is not None:
            from overbrainer.after.chain import after_training

            after_training(cycle.workspace().project, app.plugins.hook, app.runs, summary.run)
