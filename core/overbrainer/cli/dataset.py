"""``overbrainer dataset``: bringing your own data in, and changing the dataset by hand (the
TUI's Dataset view uses it)."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.group()
def dataset() -> None:
    """Import your own data, or change the dataset by hand."""


@dataset.command("import")
@click.argument("source", metavar="FILE")
@click.option("--topic", help="The topic of rows that name none (needed with several topics).")
@click.option("--subtopic", help="The subtopic of rows that name none (default: imported).")
def import_(source: str, topic: str | None, subtopic: str | None) -> None:
    """Import questions, questions with answers, or conversations from FILE (.jsonl or
    .csv; columns question, answer, reasoning, subtopic, or messages) or from a Hugging
    Face dataset, hf:ORG/NAME[:SPLIT]. Duplicates are skipped; imported answers are
    trained on and never asked for again; then split again.

    Example: overbrainer dataset import seed.jsonl --topic "SQL query optimisation"
    """
    from pathlib import Path

    from loguru import logger

    from overbrainer.pipeline.hub_dataset import PREFIX, read_hub
    from overbrainer.pipeline.import_rows import read_file
    from overbrainer.pipeline.importer import DEFAULT_SUBTOPIC, import_items

    app = current_app()
    settings = app.settings
    if source.startswith(PREFIX):
        read, label = read_hub(source)
    else:
        read, label = read_file(Path(source), source), Path(source).name
    if not read.items:
        logger.warning(f"dataset: {label} holds no row: nothing to import")
    if read.ignored:
        logger.warning(
            f"dataset: {label}: columns not read: {', '.join(sorted(read.ignored))} (none of "
            "the shapes `dataset import` reads has them: see docs/your-own-data.md)"
        )
    with app.lock():
        imported = import_items(
            app.project_dir, settings, read.items, label,
            topic=topic, subtopic=subtopic or DEFAULT_SUBTOPIC,
        )  # fmt: skip
        click.echo(imported.summary(label))
        if imported.answers:
            _split_again()


@dataset.command("rejected")
@click.option(
    "--reason",
    metavar="TEXT",
    help="Only items with a reason starting with TEXT (contaminated, not selected, ...).",
)
@click.option("--json", "as_json", is_flag=True, help="A JSON list of the items.")
def rejected(reason: str | None, as_json: bool) -> None:
    """List what the dataset left out and why: questions the generator repeated, train
    examples dropped for overlapping an eval question, answers `select` did not keep.
    Each line: kind, id, topic, the reasons, and the start of the text.

    Example: overbrainer dataset rejected --reason contaminated
    """
    import json

    from overbrainer.pipeline.rejections import rejections
    from overbrainer.redact import escape_controls

    project_dir = current_app().project_dir
    items = rejections(project_dir, reason)
    if as_json:
        click.echo(json.dumps([item.as_json() for item in items], indent=2, ensure_ascii=False))
        return
    if not items:
        said = "dataset: nothing rejected" + (f" for {reason!r}" if reason else "")
        kinds = sorted(
            {r.split(":", 1)[0] for item in rejections(project_dir) for r in item.reasons}
        )
        if reason and kinds:
            said += f" (the reasons recorded start with: {', '.join(kinds)})"
        click.echo(escape_controls(said))
        return
    for item in items:
        text = " ".join(item.text.split())
        text = text if len(text) <= 60 else text[:59] + "…"
        why = "; ".join(item.reasons) or "(no reason recorded)"
        click.echo(escape_controls(f"{item.kind} {item.id} {item.topic}: {why} | {text}"))
    click.echo(f"dataset: {len(items)} rejected")


@dataset.command("rm")
@click.argument("item_id", metavar="ID")
@click.option("--answer-only", is_flag=True, help="Delete only the answer of question ID.")
def remove(item_id: str, answer_only: bool) -> None:
    """Delete subtopic or question ID with what depends on it, for good (it goes to
    data/rejected.jsonl, so no stage makes it again); then split again.

    Example: overbrainer dataset rm 3f2a9c1e0b7d4e55 --answer-only
    """
    from overbrainer.pipeline.remove import remove_item

    app = current_app()
    with app.lock():
        removed = remove_item(app.project_dir, item_id, answer_only=answer_only)
        click.echo(f"dataset: deleted {removed.describe()}")
        _split_again()


def _split_again() -> None:
    """Run ``split`` after a change of the dataset (the project lock held)."""
    from loguru import logger

    from overbrainer.pipeline.runner import run_stage
    from overbrainer.providers.prices import PriceBook

    app = current_app()
    outcome = run_stage("split", app.project_dir, app.settings, app.env, PriceBook())
    click.echo(outcome.summary)
    if outcome.signum is not None:
        outcome.check()  # interrupted: exit as the signal says
    if outcome.error is not None:
        # The change stands; what split could not do is the next thing to look at.
        logger.warning(f"dataset: {outcome.error}")
