"""``overbrainer migrate``: bring a project's files to the current format."""

from __future__ import annotations

import click

from overbrainer.cli.context import current_app


@click.command()
@click.option("--dry-run", is_flag=True, help="Say what would change; change nothing.")
def migrate(dry_run: bool) -> None:
    """Bring the project's files to the format this overbrainer writes.

    Projects of older versions, and of the reference tool, are read as they are; this
    rewrites what differs (rejected.jsonl, history split lines, the deprecated
    training.hub_model_id, .gitignore, the format version). Running it again changes
    nothing.

    Example: overbrainer migrate
    """
    from overbrainer.pipeline.migrate import migrate as run

    app = current_app()
    if dry_run:  # reads only: no lock, nothing written
        lines = run(app.project_dir, dry_run)
    else:
        with app.lock(metrics=False):
            lines = run(app.project_dir, dry_run)
    for line in lines:
        click.echo(line)
