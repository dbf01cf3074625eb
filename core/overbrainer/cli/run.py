"""``overbrainer run``: every stage in order, then training when ``[training]`` exists."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
def run() -> None:
    """Run subtopics, questions, answers and split, then train when [training] exists.

    A stage with failed items stops the chain. Changes to overbrainer.toml and .env are
    picked up between stages and before training; the running stage keeps its settings.
    """
    from overbrainer.config.reload import Reloader
    from overbrainer.pipeline.runner import STAGES, run_stage
    from overbrainer.providers.prices import PriceBook

    app = current_app()
    prices = PriceBook()
    with (
        app.lock(),
        Reloader(app.project_dir, app.env, app.plugins.kinds, app.settings) as reloader,
    ):
        for stage in STAGES:
            reloader.changed()
            outcome = run_stage(stage, app.project_dir, reloader.settings, reloader.env, prices)
            click.echo(outcome.summary)
            outcome.check()
        reloader.changed()
        # The training side reads the configuration from the app: give it what is current.
        app.env, app.settings = reloader.env, reloader.settings
        from overbrainer.train import after_run

        after_run(app.workspace())
