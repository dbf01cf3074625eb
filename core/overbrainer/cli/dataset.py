"""``overbrainer dataset``: changing the dataset by hand (the TUI's Dataset view uses it)."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.group()
def dataset() -> None:
    """Change the dataset by hand."""


@dataset.command("rm")
@click.argument("item_id", metavar="ID")
@click.option("--answer-only", is_flag=True, help="Delete only the answer of question ID.")
def remove(item_id: str, answer_only: bool) -> None:
    """Delete subtopic or question ID with what depends on it, for good (it goes to
    data/rejected.jsonl, so no stage makes it again); then split again.

    Example: overbrainer dataset rm 3f2a9c1e0b7d4e55 --answer-only
    """
    from loguru import logger

    from overbrainer.pipeline.remove import remove_item
    from overbrainer.pipeline.runner import run_stage
    from overbrainer.providers.prices import PriceBook

    app = current_app()
    settings = app.settings
    with app.lock():
        removed = remove_item(app.project_dir, item_id, answer_only=answer_only)
        click.echo(f"dataset: deleted {removed.describe()}")
        outcome = run_stage("split", app.project_dir, settings, app.env, PriceBook())
        click.echo(outcome.summary)
        if outcome.signum is not None:
            outcome.check()  # interrupted: exit as the signal says
        if outcome.error is not None:
            # The deletion stands; what split could not do is the next thing to look at.
            logger.warning(f"dataset: {outcome.error}")
