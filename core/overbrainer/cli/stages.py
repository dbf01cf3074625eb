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
FORGOTTEN = (
    "answers: batch {name} forgotten: its {count} question(s) without an answer are free, "
    "and the next `overbrainer answers` sends them again. If the provider made this batch "
    "and runs it, they are paid twice (its answers are never collected), and the "
    "${usd:.4f} it was expected to cost no longer counts against the budget."
)


def execute(
    stage: str,
    topic: str | None,
    force: bool = False,
    *,
    batch: bool | None = None,
    wait: bool = True,
    cancel: bool = False,
    stale: bool = False,
) -> None:
    """Run ``stage`` under the project lock; print its summary; fail as it failed.

    ``questions`` on a topic that has no subtopic yet makes them first, as ``run`` would
    (and as the reference tool does).
    """
    from overbrainer.pipeline.records import SUBTOPICS, DataFiles
    from overbrainer.pipeline.runner import run_stage, select_topics
    from overbrainer.providers.prices import PriceBook

    app = current_app()
    settings = app.settings
    topics = select_topics(settings, topic)  # an unknown topic fails before the lock
    prices = PriceBook()
    with app.lock():
        stages = [stage]
        if stage == "questions":
            have = {record["topic"] for record in DataFiles(app.project_dir).read(SUBTOPICS)}
            if any(t.name not in have for t in topics):
                # A broken questions template fails before any request, subtopics' included.
                from overbrainer.pipeline.prompts import Templates  # jinja2: not for split

                Templates(app.project_dir, "questions.txt")
                stages.insert(0, "subtopics")
        for name in stages:
            outcome = run_stage(
                name,
                app.project_dir,
                settings,
                app.env,
                prices,
                topic=topic,
                force=force and name == stage,
                batch=batch,
                wait=wait,
                cancel=cancel,
                stale=stale and name == stage,
            )
            click.echo(outcome.summary)
            outcome.check()


@click.command()
@_TOPIC
@_FORCE
def subtopics(topic: str | None, force: bool) -> None:
    """Ask the generator for the subtopics each topic is missing.

    Example: overbrainer subtopics --topic ownership
    """
    execute("subtopics", topic, force)


@click.command()
@_TOPIC
@_FORCE
@click.option(
    "--stale",
    is_flag=True,
    help="Make again, too, the questions made with another prompt or generator setting "
    "than now: each subtopic holding some is asked for that many new ones.",
)
def questions(topic: str | None, force: bool, stale: bool) -> None:
    """Ask the generator for the questions each subtopic is missing.

    Example: overbrainer questions --topic ownership
    """
    if stale and force:
        raise click.UsageError("--stale or --force: --force makes every question again")
    execute("questions", topic, force, stale=stale)


@click.command()
@_TOPIC
@_FORCE
@click.option(
    "--batch/--no-batch",
    default=None,
    help="Send the questions through the provider's batch API (half price, within 24 h), "
    "or not, whatever [roles.parent] batch says.",
)
@click.option(
    "--no-wait",
    is_flag=True,
    help="Submit the batches and return; a later `answers` or `run` collects them.",
)
@click.option(
    "--cancel",
    is_flag=True,
    help="Cancel the batches sent and not yet ended; what they finished is kept.",
)
@click.option(
    "--stale",
    is_flag=True,
    help="Answer again, too, the answers made with another prompt, model or parent "
    "setting than now (`overbrainer plan` counts them); only those are paid for.",
)
@click.option(
    "--forget-batch",
    "forget",
    metavar="ID",
    help="Give up a batch the provider does not list or give (its id or key, as `answers` "
    "names it): its questions are sent again by the next `answers`, paid twice if it ran.",
)
def answers(  # noqa: PLR0917 - click passes each option
    topic: str | None,
    force: bool,
    batch: bool | None,
    no_wait: bool,
    cancel: bool,
    stale: bool,
    forget: str | None,
) -> None:
    """Ask the parent to answer every question that has no answer yet.

    Batches already sent are collected first, online or not: a question in one is never
    sent again.

    Example: overbrainer answers --batch --no-wait
    """
    if forget is not None:
        if topic or force or batch is not None or no_wait or cancel or stale:
            raise click.UsageError("--forget-batch goes alone: it gives up a batch, nothing more")
        forget_batch(forget)
        return
    if stale and force:
        raise click.UsageError("--stale or --force: --force redoes every answer already")
    execute("answers", topic, force, batch=batch, wait=not no_wait, cancel=cancel, stale=stale)


def forget_batch(name: str) -> None:
    """Give up the live batch ``name`` in the ledger; nothing is asked of the provider."""
    from overbrainer.pipeline.batch_ledger import Ledger
    from overbrainer.pipeline.records import ANSWERS, DataFiles

    app = current_app()
    with app.lock():
        forgotten = Ledger(app.project_dir).forget(name)
        answered = {record["id"] for record in DataFiles(app.project_dir).read(ANSWERS)}
    count = len([q for q in forgotten.questions if q not in answered])
    click.echo(FORGOTTEN.format(name=name, count=count, usd=forgotten.projected_usd))


@click.command()
@_TOPIC
def split(topic: str | None) -> None:
    """Split the usable answers into data/train.jsonl and data/eval.jsonl.

    Example: overbrainer split
    """
    execute("split", topic)
