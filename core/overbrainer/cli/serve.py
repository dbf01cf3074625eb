"""``overbrainer serve up|down|status``: a served provider kept up across commands."""

from __future__ import annotations

import time

import click

from overbrainer.cli.context import current_app


@click.group()
def serve() -> None:
    """Keep a served provider up across commands, end it, or see what is up.

    A provider with serve = {target, engine, model} in overbrainer.toml is started on its
    target by the commands that need it and ended when they end; `serve up` keeps it up
    until `serve down` (or its idle_minutes without a request). docs/serving.md.

    Example: overbrainer serve status
    """


def _names(given: str | None) -> list[str]:
    serving = current_app().serving()
    names = [given] if given else serving.served()
    if not names:
        raise click.UsageError("no provider of overbrainer.toml has a serve table")
    return names


@serve.command()
@click.argument("provider", required=False)
def up(provider: str | None) -> None:
    """Start PROVIDER's engine (every served provider's when left out) and keep it up.

    Example: overbrainer serve up big
    """
    serving = current_app().serving()
    for name in _names(provider):
        url = serving.url(name, keep=True)
        click.echo(f"{name}: up at {url}")


@serve.command()
@click.argument("provider", required=False)
def down(provider: str | None) -> None:
    """End PROVIDER's engine (every recorded one when left out).

    Example: overbrainer serve down big
    """
    serving = current_app().serving()
    names = [provider] if provider else serving.records.providers()
    if provider and provider not in serving.records.providers():
        serving.serve_of(provider)  # an unknown or unserved provider is refused
    for name in names:
        record = serving.end(name)
        click.echo(f"{name}: ended" if record is not None else f"{name}: not up")


@serve.command()
@click.argument("provider", required=False)
def status(provider: str | None) -> None:
    """Show what is up: each served provider, its engine and model, where, since when, and
    the URL it is reached at from here.

    Example: overbrainer serve status
    """
    from overbrainer.duration import duration
    from overbrainer.redact import escape_controls

    serving = current_app().serving()
    shown = 0
    for record, state in serving.status():
        if provider and record.provider != provider:
            continue
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.started))
        up_for = duration(time.time() - record.started)
        if record.for_run:
            kept = f"for run {record.for_run} (its online teacher)"
        else:
            kept = "kept (serve up)" if record.kept else f"for command pid {record.owner}"
        click.echo(escape_controls(
            f"{record.provider}: {record.engine} {record.model} on `{record.target}`, since "
            f"{since} ({up_for}), {kept}: {state}"
        ))  # fmt: skip
        shown += 1
    if not shown:
        click.echo("nothing is served")
