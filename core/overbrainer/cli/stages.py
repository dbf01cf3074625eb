"""The dataset stages as commands: ``subtopics``, ``questions``, ``answers``, ``split``."""

from __future__ import annotations

import click

from overbrainer.cli.complete import complete_topic
from overbrainer.cli.context import current_app

_TOPIC = click.option(
    "--topic", metavar="NAME", shell_complete=complete_topic, help="Only this topic."
)
_FORCE = click.option(
    "--force", is_flag=True, help="Redo the selected topics' output of this stage from scratch."
)


def execute(stage: str, topic: str | None, force: bool = False) -> None:
    """Run ``stage`` under the project lock; print its summary; fail as it failed."""
    from overbrainer.pipeline.runner import run_stage, select_topics
    from overbrainer.providers.prices import PriceBook

    app = current_app()
    settings = app.settings
    select_topics(settings, topic)  # an unknown topic fails before the lock and any request
    with app.lock():
        outcome = run_stage(
            stage, app.project_dir, settings, app.env, PriceBook(), topic=topic, force=force
        )
    click.echo(outcome.summary)
    outcome.check()


@click.command()
@_TOPIC
@_FORCE
def subtopics(topic: str | None, force: bool) -> None:
    """Ask the generator for the subtopics each topic is missing."""
    execute("subtopics", topic, force)


@click.command()
@_TOPIC
@_FORCE
def questions(topic: str | None, force: bool) -> None:
    """Ask the generator for the questions each subtopic is missing."""
    execute("questions", topic, force)


@click.command()
@_TOPIC
@_FORCE
def answers(topic: str | None, force: bool) -> None:
    """Ask the parent to answer every question that has no answer yet."""
    execute("answers", topic, force)


@click.command()
@_TOPIC
def split(topic: str | None) -> None:
    """Split the usable answers into data/train.jsonl and data/eval.jsonl."""
    execute("split", topic)
