"""``overbrainer run``: every stage in order, then training when ``[training]`` exists."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from overbrainer.cli.context import current_app
from overbrainer.cli.money import DOLLARS

if TYPE_CHECKING:
    from overbrainer.cli.context import App
    from overbrainer.plan.run_cost import CostPlan
    from overbrainer.providers.prices import PriceBook


@click.command()
@click.option(
    "--retrain",
    is_flag=True,
    help="Train even when a succeeded run was made from the same inputs.",
)
@click.option(
    "--max-usd",
    type=DOLLARS,
    help="The budget of the project, in place of [budget] max_usd.",
)
def run(retrain: bool, max_usd: float | None) -> None:
    """Run subtopics, questions, answers and split, then train when [training] exists.

    Each stage does only the work not done yet, and training is skipped when a succeeded
    run was made from the same inputs (data, settings, base model, device). A stage with
    failed items stops the chain. Changes to overbrainer.toml and .env are picked up
    between stages and before training; the running stage keeps its settings.

    The first line is the plan's total (`overbrainer plan` shows it whole). With a budget
    no request starts that would take the project's spend past it.

    Example: overbrainer run --max-usd 20
    """
    from overbrainer.config.reload import Reloader
    from overbrainer.cycles import CycleSummary
    from overbrainer.providers.prices import PriceBook
    from overbrainer.watch.cycle import Cycle

    app = current_app()
    with (
        app.lock(),
        Reloader(
            app.project_dir, app.env, app.plugins.kinds, app.settings, app.plugins.sections
        ) as reloader,
    ):
        prices = PriceBook()
        click.echo(plan_total(app, prices, max_usd))
        cycle = Cycle(
            reloader, app.plugins.hook, app.runs, app.workspace().echo, prices, max_usd=max_usd
        )
        summary = cycle.run(
            CycleSummary(1, ("start",)),
            on_stage=lambda outcome: click.echo(outcome.summary),
            retrain=retrain,
        )
        if summary.run is not None:
            from overbrainer.after.chain import after_training

            after_training(cycle.workspace().project, app.plugins.hook, app.runs, summary.run)


def plan_total(app: App, prices: PriceBook, max_usd: float | None) -> str:
    """``plan: …``, the plan's total line; what the plan could not learn makes it unknown."""
    from overbrainer.cli.planlines import total_line
    from overbrainer.errors import TransientError, UserError
    from overbrainer.plan.run_cost import build_plan, stale_lines
    from overbrainer.redact import escape_controls, redact

    try:
        found = build_plan(app.project, app.plugins.hook, prices, max_usd, price_compare=False)
    except (UserError, TransientError) as error:
        line = f"plan: cost unknown ({error})"
        return escape_controls(redact(line))
    lines = [f"plan: {total_line(found)} (`overbrainer plan` shows how)"]
    if found.max_usd is not None and found.prior:
        lines.append(prior_line(found))
    lines += stale_lines(found.stale)
    return "\n".join(escape_controls(redact(line)) for line in lines)


def prior_line(found: CostPlan) -> str:
    """What a plan with a budget and no measurement yet assumes, said before it is spent."""
    said = ", ".join(
        f"{stage.stage} {round(stage.tokens_out / stage.requests)} tokens out a request"
        for stage in found.prior
    )
    return (
        f"plan: nothing measured yet, so it assumes {said} (a prior); the budget reserves "
        "each request in flight at its max_tokens and holds whatever they take "
        "(`overbrainer plan --pilot 50` measures first)"
    )
