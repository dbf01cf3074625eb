"""``overbrainer plan``: what the rest of the run will cost, before anything is spent."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app
from overbrainer.cli.money import DOLLARS


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--max-usd", type=DOLLARS, help="The budget to show it against.")
def plan(as_json: bool, max_usd: float | None) -> None:
    """What each stage still to run, training, export and compare will cost.

    Requests, tokens in and out and dollars per stage, measured from this project's
    requests so far or assumed from the settings (max_tokens), then training's tokens,
    GPU hours and dollars on a target with a price. Nothing is spent: only the providers'
    price lists (and the target's) are asked.

    Example: overbrainer plan --json
    """
    import json

    from overbrainer.cli.planlines import plan_lines
    from overbrainer.providers.prices import PriceBook
    from overbrainer.redact import escape_controls, redact
    from overbrainer.train.costplan import build_plan

    app = current_app()
    found = build_plan(app.project, app.plugins.hook, PriceBook(), max_usd)
    if as_json:
        click.echo(redact(json.dumps(found.as_json(), indent=2)))
        return
    for line in plan_lines(found):
        # A price's error may quote what a provider said, and a target's name a file's text.
        click.echo(escape_controls(redact(line)))
