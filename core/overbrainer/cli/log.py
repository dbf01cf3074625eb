"""``overbrainer log``: the prompts and replies of the last stages, as kept in
``.overbrainer/exchanges.jsonl``."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app

SHOWN = 300
"""Characters of a prompt or reply shown without ``--full``."""


@click.command()
@click.option("--stage", metavar="NAME", help="Only this stage's exchanges (answers, compare…).")
@click.option("--failed", is_flag=True, help="Only the exchanges whose reply was not used.")
@click.option("-n", "--limit", type=click.IntRange(min=1, max=1_000_000), default=20,
              show_default=True, help="The last N exchanges.")
@click.option("--full", is_flag=True, help="Whole prompts and replies, not their start.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object a line, as kept.")
def log(stage: str | None, failed: bool, limit: int, full: bool, as_json: bool) -> None:
    """Show the prompts and replies of the last stages, newest last.

    Every request a stage sends is kept with its reply, or why there was none (rotated
    past 16 MiB; secrets are never written). A failed exchange is a reply that could not
    be used (not a list, an excluded answer, an unreadable verdict) or no reply at all.

    Example: overbrainer log --failed --stage questions
    """
    import json
    from collections import deque

    from overbrainer.cli.strictjson import finite
    from overbrainer.pipeline.exchanges import read_exchanges
    from overbrainer.redact import escape_controls

    found = deque(
        (
            entry
            for entry in read_exchanges(current_app().project_dir)
            if (stage is None or entry.get("stage") == stage)
            and (not failed or entry.get("failure"))
        ),
        maxlen=limit,
    )
    if not found:
        click.echo("no exchange kept" + (" that failed" if failed else "")
                   + (f" for stage {stage}" if stage else ""))
        return
    for entry in found:
        if as_json:
            click.echo(json.dumps(finite(entry), ensure_ascii=False, allow_nan=False))
            continue
        outcome = f"failed: {entry['failure']}" if entry.get("failure") else "ok"
        head = (f"{entry.get('at', '?')}  {entry['stage']}  {entry.get('item', '?')}  "
                f"{entry.get('model', '?')}  {outcome}")
        click.echo(escape_controls(head))
        users = [m for m in entry.get("messages") or [] if m.get("role") == "user"]
        if users:
            click.echo(escape_controls(f"  > {_shown(str(users[-1].get('content', '')), full)}"))
        reply = entry.get("reply")
        if reply is not None:
            click.echo(escape_controls(f"  < {_shown(str(reply), full)}"))


def _shown(text: str, full: bool) -> str:
    text = text if full else " ".join(text.split())
    return text if full or len(text) <= SHOWN else text[: SHOWN - 1] + "…"
