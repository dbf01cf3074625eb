"""``overbrainer plugins``: what is installed, with versions, target kinds, executors (with
the optional operations each declares) and hooks."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
def plugins(as_json: bool) -> None:
    """List the installed overbrainer plugins.

    Example: overbrainer plugins --json
    """
    import dataclasses
    import json

    infos = current_app().plugins.info()
    if as_json:
        click.echo(json.dumps([dataclasses.asdict(info) for info in infos], indent=2))
        return
    if not infos:
        click.echo("no plugins installed: install overbrainer-local, -ssh or -runpod")
        return
    for info in infos:
        source = f"{info.distribution} {info.version}" if info.distribution else "(not installed)"
        kinds = ", ".join(info.kinds) or "none"
        executors = "".join(
            f"  executor: {name} ({', '.join(can) or 'no optional operation'})"
            for name, can in info.executors.items()
        )
        click.echo(
            f"{info.name}  {source}  kinds: {kinds}{executors}  hooks: {', '.join(info.hooks)}"
        )
