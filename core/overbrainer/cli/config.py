"""``overbrainer config check``: the resolved configuration, secrets masked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import click

from overbrainer.cli.context import current_app

if TYPE_CHECKING:
    from pathlib import Path

    from overbrainer.config.model import Settings


@click.group()
def config() -> None:
    """Inspect the configuration."""


@config.command()
@click.option("--resolve", is_flag=True, help="Resolve every secret (vault references too).")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout (keys below).")
def check(resolve: bool, as_json: bool) -> None:
    """Print the configuration as loaded, environment included, secrets masked.

    Exits 1 with every problem listed when the configuration cannot be used: invalid
    settings, a provider a role uses with no URL (or no key, unless it is on this
    machine), a parent whose reasoning would never be raw while reasoning = true.

    \b
    --json: {settings: {KEY: VALUE as printed, secrets masked}, problems: [str],
    secrets: {KEY: "resolved" | why not} (with --resolve, else {}), ok: bool}; the exit
    status is the same. Settings that cannot be loaded are an error on stderr, as without.

    Example: overbrainer config check --resolve
    """
    from overbrainer.config.describe import describe_settings, secret_fields
    from overbrainer.config.secrets import resolve_secret
    from overbrainer.errors import UserError
    from overbrainer.pipeline.preflight import problems
    from overbrainer.redact import escape_controls

    app = current_app()
    settings = app.settings
    if as_json:
        _check_json(settings, resolve, app.env.merged, app.project_dir)
        return
    for line in describe_settings(settings):
        click.echo(escape_controls(line))
    found = problems(settings) + _eval_files_problems(app.project_dir, settings)
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


def _eval_files_problems(project_dir: Path, settings: Settings) -> list[str]:
    """``[eval] files`` that ``split`` and ``compare`` would refuse (two files of one set
    name, one named ``split``), said by ``config check`` in the same words."""
    from overbrainer.errors import UserError
    from overbrainer.pipeline.decontaminate import EVAL_FILES, named_files

    try:
        named_files(project_dir, settings.eval.files, EVAL_FILES)
    except UserError as error:
        return [str(error)]
    return []


def _check_json(
    settings: Settings, resolve: bool, env: Mapping[str, str], project_dir: Path
) -> None:
    """``config check --json``: what the lines say, then the same exit status."""
    import json

    from overbrainer.config.describe import describe_settings, secret_fields
    from overbrainer.config.secrets import resolve_secret
    from overbrainer.errors import UserError
    from overbrainer.pipeline.preflight import problems
    from overbrainer.redact import redact

    found = problems(settings) + _eval_files_problems(project_dir, settings)
    secrets: dict[str, str] = {}
    for key, secret in secret_fields(settings) if resolve else ():
        if secret is None:
            continue
        try:
            resolve_secret(secret, key, env)
        except UserError as error:
            secrets[key] = redact(str(error))
        else:
            secrets[key] = "resolved"
    failed = sum(value != "resolved" for value in secrets.values())
    pairs = (line.partition(" = ") for line in describe_settings(settings))
    shown = {
        "settings": {key: value for key, _, value in pairs},
        "problems": found,
        "secrets": secrets,
        "ok": not found and not failed,
    }
    click.echo(json.dumps(shown, indent=2))
    if failed:
        raise UserError(f"{failed} secret(s) could not be resolved")
    if found:
        raise UserError(f"{len(found)} problem(s): the configuration cannot run as it is")
