"""``overbrainer config check``: the resolved configuration, secrets masked."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.group()
def config() -> None:
    """Inspect the configuration."""


@config.command()
@click.option("--resolve", is_flag=True, help="Resolve every secret (vault references too).")
def check(resolve: bool) -> None:
    """Print the configuration as loaded, environment included, secrets masked.

    Exits 1 with every problem listed when the configuration cannot be used: invalid
    settings, a provider a role uses with no URL (or no key, unless it is on this
    machine), a parent whose reasoning would never be raw while reasoning = true.
    """
    from overbrainer.config.describe import describe_settings, secret_fields
    from overbrainer.config.secrets import resolve_secret
    from overbrainer.errors import UserError
    from overbrainer.pipeline.preflight import problems
    from overbrainer.redact import escape_controls

    app = current_app()
    settings = app.settings
    for line in describe_settings(settings):
        click.echo(escape_controls(line))
    found = problems(settings)
    for problem in found:
        click.echo(f"problem: {escape_controls(problem)}", err=True)
    if not resolve:
        if found:
            raise UserError(f"{len(found)} problem(s): the configuration cannot run as it is")
        return
    failed = len(found)
    for key, secret in secret_fields(settings):
        if secret is None:
            continue
        try:
            resolve_secret(secret, key, app.env.merged)
        except UserError as error:
            failed += 1
            click.echo(escape_controls(str(error)), err=True)
        else:
            click.echo(f"{key}: resolved")
    if failed > len(found):
        raise UserError(
            f"{failed - len(found)} secret(s) could not be resolved"
            + (f"; {len(found)} other problem(s)" if found else "")
        )
    if found:
        raise UserError(f"{len(found)} problem(s): the configuration cannot run as it is")
