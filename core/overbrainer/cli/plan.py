"""``overbrainer plan``: what the rest of the run will cost, before anything is spent."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from overbrainer.cli.context import current_app

if TYPE_CHECKING:
    from overbrainer.providers.prices import PriceBook
from overbrainer.cli.money import DOLLARS


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--max-usd", type=DOLLARS, help="The budget to show it against.")
@click.option(
    "--pilot",
    type=click.IntRange(min=1),
    metavar="N",
    help="Answer N questions first (paid, within the budget; the answers are kept), then "
    "plan from what they took.",
)
def plan(as_json: bool, max_usd: float | None, pilot: int | None) -> None:
    """What each stage still to run, training, export and compare will cost.

    Requests, tokens in and out and dollars per stage, measured from this project's
    requests so far or assumed from the settings (max_tokens), then training's tokens (from
    the answers' lengths once there are some), its hours (measured on an earlier run of the
    target, else a guess said as one) and dollars on a target with a price. Nothing is
    spent: only the providers' price lists (and the target's) are asked.

    Before a stage's first request its figures are a prior (a few paragraphs an answer,
    and the reasoning when asked for); `--pilot N` pays for N answers to measure instead.
    The `up to` column is what the requests can cost at most, which the budget reserves.
    With `distill = "logits"`, a `logprobs` row counts the answer tokens whose top-k the
    parent returns, their size in data/logprobs.bin and their price (assumed none beyond
    the output tokens, unless the prices table gives the model a `logprobs` price).

    Example: overbrainer plan --pilot 50
    """
    from overbrainer.cli.planlines import plan_lines
    from overbrainer.cli.strictjson import dumps
    from overbrainer.plan.run_cost import build_plan
    from overbrainer.providers.prices import PriceBook
    from overbrainer.redact import escape_controls, redact

    app = current_app()
    prices = PriceBook()
    if pilot is not None:
        _pilot(pilot, max_usd, prices)
    found = build_plan(app.project, app.plugins.hook, prices, max_usd)
    if as_json:
        click.echo(redact(dumps(found.as_json())))
        return
    from overbrainer.plan.serve_hours import served_line

    served = [served_line(app.settings, hours) for hours in found.served]
    for line in [*plan_lines(found), *served]:
        # A price's error may quote what a provider said, and a target's name a file's text.
        click.echo(escape_controls(redact(line)))


def _pilot(count: int, max_usd: float | None, prices: PriceBook) -> None:
    """Answer ``count`` questions, spread over those without an answer (online, under
    the budget), its summary on stderr: the plan then measures instead of assuming."""
    from overbrainer.pipeline.records import ANSWERS, QUESTIONS, DataFiles
    from overbrainer.pipeline.runner import run_stage
    app = current_app()
    data = DataFiles(app.project_dir)
    answered = {record["id"] for record in data.read(ANSWERS)}
    if not any(q["id"] not in answered for q in data.read(QUESTIONS)):
        raise click.UsageError(
            "--pilot answers questions, and there is none without an answer: run "
            "`overbrainer questions` first (`overbrainer plan` shows what it costs)"
        )
    with app.lock():
        outcome = run_stage(
            "answers", app.project_dir, app.settings, app.env, prices,
            max_usd=max_usd, batch=False, limit=count,
        )
    click.echo(f"pilot: {outcome.summary}", err=True)
    outcome.check()
