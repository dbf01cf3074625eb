"""``overbrainer push``: a run's model to the Hugging Face Hub."""

from __future__ import annotations

import click

from overbrainer.cli.complete import complete_run_id
from overbrainer.cli.context import current_app


@click.command()
@click.argument("run_id", required=False, shell_complete=complete_run_id)
@click.option(
    "--repo", metavar="NS/NAME", help="The repo (default: hub.repo, else <you>/<project>)."
)
@click.option("--public", is_flag=True, help="Create the repo public (default: private).")
@click.option(
    "--overwrite-card", is_flag=True, help="Replace a README.md that overbrainer did not write."
)
@click.option("--dry-run", is_flag=True, help="Say what would be sent; send nothing.")
@click.option(
    "--require-win-rate",
    type=click.FloatRange(0, 1),
    metavar="R",
    help="Push only if the newest compare's win-or-tie rate against the parent is at least R "
    "(0 to 1) at the lower bound of its 95% interval.",
)
def push(  # noqa: PLR0917 - click passes each option
    run_id: str | None,
    repo: str | None,
    public: bool,
    overwrite_card: bool,
    dry_run: bool,
    require_win_rate: float | None,
) -> None:
    """Push RUN_ID's output/ (and its GGUF) to the Hugging Face Hub with a model card.

    RUN_ID may be `latest` (the default, as in export) or any unique prefix of an id.

    Example: overbrainer push latest --repo me/my-child --dry-run
    """
    from loguru import logger

    from overbrainer.after.push import push_run
    from overbrainer.redact import escape_controls

    app = current_app()
    resolved = app.runs.resolve(run_id)
    with app.lock():
        push_run(
            app.project,
            app.runs,
            resolved,
            repo=repo,
            public=public,
            overwrite_card=overwrite_card,
            dry_run=dry_run,
            require_win_rate=require_win_rate,
            echo=lambda line: click.echo(escape_controls(line)),
            warn=logger.warning,
        )
