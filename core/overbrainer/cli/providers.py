"""``overbrainer providers check``: one cheap request per role, before anything is paid."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.group()
def providers() -> None:
    """Try the providers the roles use."""


@providers.command()
def check() -> None:
    """Send each role one cheap request and show what came back.

    Per role: its provider and model, the time the reply took, the model's price (or why
    none is known) and the kind of reasoning the reply carried. Exits 1 when a role got
    no reply. The requests cost a few tokens each, counted in the last line.

    Example: overbrainer providers check
    """
    import asyncio

    from overbrainer.errors import UserError
    from overbrainer.providers.probe import probe_all
    from overbrainer.redact import escape_controls

    app = current_app()
    probes = asyncio.run(probe_all(app.settings, app.env.merged))
    width = max(len(p.role) for p in probes)
    total, unknown = 0.0, False
    for probe in probes:
        head = f"{probe.role:<{width}}  {probe.provider}/{probe.model}"
        if probe.error is not None:
            click.echo(escape_controls(f"{head}  failed after {probe.seconds:.2f} s: "
                                       f"{probe.error}"))
            continue
        if probe.price is None:
            price = (f"no price (the provider lists none: set "
                     f"[providers.{probe.provider}.prices])")
        else:
            price = (f"${probe.price.prompt * 1e6:.2f} in, ${probe.price.completion * 1e6:.2f} "
                     "out per million tokens")
        reasoning = f"; reasoning: {probe.reasoning}" if probe.reasoning is not None else ""
        click.echo(escape_controls(f"{head}  ok in {probe.seconds:.2f} s; {price}{reasoning}"))
        cost = probe.cost
        total += cost or 0.0
        unknown = unknown or cost is None
    spent = f"${total:.6f}" + (" + unknown" if unknown else "")
    tokens_in = sum(p.input_tokens for p in probes)
    tokens_out = sum(p.output_tokens for p in probes)
    click.echo(f"providers check: tokens {tokens_in} in, {tokens_out} out; {spent}")
    failed = [p.role for p in probes if p.error is not None]
    if failed:
        raise UserError(f"no reply for {', '.join(failed)}: fix the provider, then check again")
