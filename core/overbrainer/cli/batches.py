"""``overbrainer batches``: the project's batches, and where each live one stands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from overbrainer.cli.context import current_app

if TYPE_CHECKING:
    from overbrainer.pipeline.batch_status import BatchView

HEADER = ("BATCH", "STATE", "PROVIDER", "QUESTIONS", "AGE", "PAID", "AT MOST", "STATUS")


@click.command()
@click.option("--offline", is_flag=True, help="The ledger only: ask no provider.")
@click.option("--json", "as_json", is_flag=True, help="A JSON list, one object a batch.")
def batches(offline: bool, as_json: bool) -> None:
    """List the project's batches: live and past, with their provider's progress.

    From .overbrainer/batches.jsonl, oldest first: each batch's id (or its key while it
    has none), its state there, its provider and model, its questions, its age, what its
    results collected so far cost and what it can cost at most. A live batch's provider is
    asked where it stands (one read-only request: nothing is collected, cancelled or
    paid); a past one's end is the ledger's. --offline asks nothing.

    \b
    --json: a list of {batch, key, state, provider, model, questions, age_s, paid_usd,
    projected_usd, failed, held, provider_status: null | {status, done, failed, total},
    problem: null | why the provider's word is missing}.

    Example: overbrainer batches --offline
    """
    import asyncio

    from overbrainer.pipeline.batch_status import look
    from overbrainer.redact import escape_controls

    app = current_app()
    views = asyncio.run(look(app.settings, app.env.merged, app.project_dir, offline=offline))
    if as_json:
        from overbrainer.cli.strictjson import dumps

        click.echo(dumps([view_json(view) for view in views]))
        return
    if not views:
        click.echo(
            "no batch: `answers --batch` sends one (or `answers` with [roles.parent] batch = true)"
        )
        return
    rows = [HEADER, *(row(view) for view in views)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    for cells in rows:
        line = "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=False))
        click.echo(escape_controls(f"{line}  {cells[-1]}"))


def row(view: BatchView) -> tuple[str, ...]:
    """One batch's cells, in ``HEADER``'s order."""
    from overbrainer.duration import duration
    from overbrainer.pipeline.batch_watch import progress

    batch = view.batch
    return (
        batch.name,
        batch.state.value,
        f"{batch.provider}/{batch.model}",
        str(len(batch.questions)),
        duration(view.age_s),
        f"${view.paid_usd:.4f}",
        f"${batch.projected_usd:.4f}" if batch.projected_usd else "-",
        status_of(view) if view.status is None else progress(view.status),
    )


def status_of(view: BatchView) -> str:
    """What the ledger says of a batch the provider was not asked about."""
    batch = view.batch
    if view.problem is not None:
        return view.problem
    if batch.held:
        return f"held: {batch.held}"
    if batch.state.value == "ended":
        return f"ended, {len(batch.failed)} item(s) without an answer"
    return batch.state.value


def view_json(view: BatchView) -> dict[str, Any]:
    batch, status = view.batch, view.status
    counts = status.counts if status is not None else None
    return {
        "batch": batch.name,
        "key": batch.key,
        "state": batch.state.value,
        "provider": batch.provider,
        "model": batch.model,
        "questions": len(batch.questions),
        "age_s": round(view.age_s, 1),
        "paid_usd": round(view.paid_usd, 6),
        "projected_usd": round(batch.projected_usd, 6),
        "failed": len(batch.failed),
        "held": batch.held,
        "provider_status": None if status is None else {
            "status": status.status,
            "done": counts.done if counts else None,
            "failed": counts.failed if counts else None,
            "total": counts.total if counts else None,
        },
        "problem": view.problem,
    }
