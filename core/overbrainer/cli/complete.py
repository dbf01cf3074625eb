"""Dynamic shell-completion candidates, read cheaply from the project directory.

Command modules import this one at their top, so what only completion needs (click's
``shell_completion`` included) is imported inside the functions: `overbrainer --help` and
the commands themselves do not pay for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


def _project_dir(ctx: click.Context) -> Path:
    """``-C``'s directory, else the project found upwards (else the current directory)."""
    from overbrainer.cli.project import find_project
    from overbrainer.errors import UserError

    root = ctx.find_root()
    given = root.params.get("project_dir")
    if given and given != ".":
        return Path(given)
    try:
        return find_project(Path("."), explicit=False)
    except UserError:
        return Path(".")


def complete_run_id(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Run ids, with their state and target as help (escaped: run.json is a file), and
    ``latest`` when there is a run."""
    import json

    from click.shell_completion import CompletionItem

    from overbrainer import files
    from overbrainer.errors import UserError
    from overbrainer.job.layout import RECORD
    from overbrainer.project import runs_dir
    from overbrainer.redact import escape_controls

    items = []
    try:
        runs = runs_dir(_project_dir(ctx))
        names = sorted(
            entry.name for entry in os.scandir(runs) if entry.is_dir(follow_symlinks=False)
        )
    except (OSError, UserError):
        return []
    for name in names:
        if not name.startswith(incomplete):
            continue
        try:
            text = files.read_text(runs / name / RECORD, RECORD)  # a FIFO: no hanging shell
            record = json.loads(text or "")
            help_text = escape_controls(f"{record.get('state')} on {record.get('target')}")
        except (UserError, ValueError, AttributeError):
            continue
        items.append(CompletionItem(name, help=help_text))
    if names and "latest".startswith(incomplete):
        items.insert(0, CompletionItem("latest", help="the newest run"))
    return items


def _config(ctx: click.Context) -> dict:
    import tomllib

    from overbrainer import files
    from overbrainer.errors import UserError

    try:
        text = files.read_text(_project_dir(ctx) / "overbrainer.toml", "overbrainer.toml")
        return tomllib.loads(text or "")
    except (UserError, ValueError):
        return {}


def complete_topic(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Topic names from ``overbrainer.toml``."""
    from click.shell_completion import CompletionItem

    topics = _config(ctx).get("topics", [])
    if not isinstance(topics, list):
        return []
    names = [t.get("name") for t in topics if isinstance(t, dict)]
    return [CompletionItem(n) for n in names if isinstance(n, str) and n.startswith(incomplete)]


def complete_target(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Target names from ``overbrainer.toml``, with their kind as help."""
    from click.shell_completion import CompletionItem

    targets = _config(ctx).get("targets", {})
    if not isinstance(targets, dict):
        return []
    return [
        CompletionItem(name, help=str(table.get("kind")) if isinstance(table, dict) else None)
        for name, table in sorted(targets.items())
        if name.startswith(incomplete)
    ]
