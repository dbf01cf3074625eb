"""What ``train`` does after a run when ``[export]`` or ``[hub]`` ask for it."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click
from loguru import logger

from overbrainer.errors import UserError
from overbrainer.job.record import RunRecord, RunState

if TYPE_CHECKING:
    from overbrainer.cli.context import App


def warn_before_training(app: App) -> None:
    """``hub.after_training`` without a token: say so before the run, not after it."""
    settings = app.settings
    if settings.hub.after_training and settings.hf_token is None:
        logger.warning(
            "hub.after_training is set but OVERBRAINER_HF_TOKEN is not: the run will not be pushed"
        )


def _exported(app: App, record: RunRecord, quantize: str) -> bool:
    """Whether the run has a GGUF of type ``quantize`` already (``run`` ends with a run that
    was up to date as often as with a new one)."""
    run_dir = app.runs.run_dir(record.id)
    for path in run_dir.glob("exports/*/export.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("quantize") == quantize:
            file = data.get("file")
            if isinstance(file, str) and (run_dir / file).is_file():
                return True
    return False


def after_training(app: App, record: RunRecord) -> None:
    """Export (``export.after_training``, unless the run has that GGUF), then push
    (``hub.after_training``, once per run) a run that succeeded; failures only warn."""
    settings = app.settings
    if record.state is not RunState.SUCCEEDED:
        return
    from overbrainer.redact import escape_controls

    def echo(line: str) -> None:
        click.echo(escape_controls(line))

    if settings.export.after_training and not _exported(app, record, settings.export.quantize):
        from overbrainer.after.export import export_run

        try:
            export_run(app.project, app.plugins.hook, app.runs, record.id, echo=echo, label="train")
        except UserError as error:
            logger.warning(f"{error.message}; run it again with: overbrainer export {record.id}")
    pushed = app.runs.run_dir(record.id) / "hub" / "push.json"
    if settings.hub.after_training and not pushed.exists():
        from overbrainer.after.push import push_run

        try:
            push_run(app.project, app.runs, record.id, echo=echo, warn=logger.warning)
        except UserError as error:
            logger.warning(
                f"push failed: {error.message}; run it again with: overbrainer push {record.id}"
            )
