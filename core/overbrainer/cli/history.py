"""``overbrainer history``: what the stages did, read from disk only."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
@click.option("--all", "every", is_flag=True, help="One line per stage execution.")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout (keys below).")
def history(every: bool, as_json: bool) -> None:
    """Runs, items, tokens and cost per stage, and their total.

    \b
    --json: {stages: {STAGE: TOTALS}, total: TOTALS}, TOTALS = {runs, done, skipped,
    failed, excluded, input_tokens, output_tokens, cost: null | dollars, cost_unknown};
    with --all, a list of the history's entries as recorded, oldest first (a cost raised
    to what the spend journal holds; a stage that paid and recorded no end, killed or
    out of disk, as an entry of status "unfinished").

    Example: overbrainer history --all
    """
    from overbrainer.pipeline.history import execution_lines, summary_lines
    from overbrainer.pipeline.spend import project_history
    from overbrainer.redact import escape_controls

    entries = project_history(current_app().project_dir)
    if as_json:
        from overbrainer.cli.strictjson import dumps
        from overbrainer.pipeline.history import summary_json

        click.echo(dumps(entries if every else summary_json(entries)))
        return
    for line in execution_lines(entries) if every else summary_lines(entries):
        click.echo(escape_controls(line))
