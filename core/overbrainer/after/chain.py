"""What ``train`` does after a run when ``[export]`` or ``[hub]`` ask for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from loguru import logger

from overbrainer.errors import UserError
from overbrainer.job.record import RunRecord, RunState

if TYPE_CHECKING:
    from overbrainer.cli.context import App


def after_training(app: App, record: RunRecord) -> None:
    """Export (``export.after_training``) a run that succeeded; failures only warn, the run
    stands."""
    settings = app.settings
    if record.state is not RunState.SUCCEEDED or not settings.export.after_training:
        return
    from overbrainer.after.export import export_run
    from overbrainer.redact import escape_controls

    try:
        export_run(
            app.project,
            app.plugins.hook,
            app.runs,
            record.id,
            echo=lambda line: click.echo(escape_controls(line)),
            label="train",
        )
    except UserError as error:
        logger.warning(f"{error.message}; run it again with: overbrainer export {record.id}")
