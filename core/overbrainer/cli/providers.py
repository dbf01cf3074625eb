"""``overbrainer providers check``: one cheap request per role, before anything is paid."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from overbrainer.cli.context import current_app

if TYPE_CHECKING:
    from overbrainer.config.model import Settings
    from overbrainer.providers.probe import Probe


@click.group()
def providers() -> None:
    """Try the providers the roles use."""


@providers.command()
def check() -> None:
    """Send each role one cheap request and show what came back.

    Per role: its provider and model, the time the reply took, the model's price (or why
    none is known) and the kind of reasoning the reply carried; a 429 is waited out. Exits
    1 when a role got no reply, when `config check` finds a problem (listed first), or when
    the parent has reasoning = true and its reply carried no raw reasoning. The requests
    cost a few tokens each, counted in the last line.

    Example: overbrainer providers check
    """
    import asyncio

    from overbrainer.errors import UserError
    from overbrainer.pipeline.kd_preflight import probe_problem
    from overbrainer.pipeline.preflight import problems
    from overbrainer.providers.probe import logprobs_asked, probe_all
    from overbrainer.redact import escape_controls

    app = current_app()
    found = problems(app.settings)  # what config check finds, before anything is sent
    for problem in found:
        click.echo(f"problem: {escape_controls(problem)}", err=True)
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
    for probe in probes:
        flags = [reasoning_shown(probe, app.settings)]
        if probe.role == "parent" and probe.completion is not None:
            logits = probe_problem(app.settings, probe.completion)
            flags.append(logits)
            top_k = logprobs_asked(app.settings)
            if logits is None and top_k is not None:
                click.echo(
                    f"parent: logprobs ok: {top_k} candidates per token, every one named by "
                    "the child's vocabulary (training.distill = \"logits\")"
                )
        for flagged in flags:
            if flagged is not None and flagged not in found:
                click.echo(f"problem: {escape_controls(flagged)}", err=True)
                found.append(flagged)
    failed = [p.role for p in probes if p.error is not None]
    if failed:
        raise UserError(f"no reply for {', '.join(failed)}: fix the provider, then check again")
    if found:
        raise UserError(f"{len(found)} problem(s): the configuration cannot run as it is")


def reasoning_shown(probe: Probe, settings: Settings) -> str | None:
    """Why the parent's probe says its answers would all be excluded: ``reasoning = true``
    and a reply that carried no raw reasoning; None when it did (or nothing is asked)."""
    from overbrainer.pipeline.preflight import reasoning_problem

    role = settings.roles.parent
    if probe.role != "parent" or probe.error is not None or not role.reasoning:
        return None
    if reasoning_problem(settings) is not None:  # said already, by name
        return None
    if probe.reasoning == "raw":
        return None
    return (
        f"roles.parent: reasoning = true, but the probe's reply from {probe.provider}/"
        f"{probe.model} carried no raw reasoning (reasoning: {probe.reasoning}): every answer "
        "would be paid for, then excluded (no_raw_reasoning); set roles.parent.reasoning = "
        "false, or make the parent a model that returns its raw reasoning"
    )
