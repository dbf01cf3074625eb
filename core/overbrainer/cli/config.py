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

    Exits 1 with every problem listed when the configuration cannot be used. Unset keys
    and secrets are shown, never a failure.
    """
    from overbrainer.config.describe import describe_settings, secret_fields
    from overbrainer.config.secrets import resolve_secret
    from overbrainer.errors import UserError
    from overbrainer.redact import escape_controls

    app = current_app()
    settings = app.settings
    for line in describe_settings(settings):
        click.echo(escape_controls(line))
    if not resolve:
        return
    failed = 0
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
    if failed:
        raise UserError(f"{failed} secret(s) could not be resolved")
