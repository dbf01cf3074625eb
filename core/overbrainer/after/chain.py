"""What ``train``, ``run`` and ``watch`` do after a run, as ``[export]`` and ``[hub]`` ask."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import click
from loguru import logger

from overbrainer import files
from overbrainer.after.export import export_run
from overbrainer.config.model import Settings
from overbrainer.errors import Interrupted, UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.record import RunRecord, RunState
from overbrainer.project import Project
from overbrainer.redact import escape_controls
from overbrainer.runs.store import RunStore


def warn_before_training(settings: Settings) -> None:
    """``hub.after_training`` without a token: say so before the run, not after it."""
    if not settings.hub.after_training or settings.hf_token is not None:
        return
    # push brings the model card's tomlkit and yaml: only where a push is asked for.
    from overbrainer.after.push import (  # noqa: PLC0415
        DEFAULT_BASE_URL,
        hf_tools_token,
        tools_token_goes_to,
    )

    if tools_token_goes_to(settings.hub.base_url or DEFAULT_BASE_URL) and hf_tools_token(
        os.environ
    ):
        return  # push takes the Hugging Face tools' token
    logger.warning(
        "hub.after_training is set but OVERBRAINER_HF_TOKEN is not (nor HF_TOKEN, nor a token "
        "of `hf auth login`): the run will not be pushed"
    )


def _exported(runs: RunStore, record: RunRecord, quantize: str) -> bool:
    """Whether the run has a GGUF of type ``quantize`` already (``run`` ends with a run that
    was up to date as often as with a new one)."""
    run_dir = runs.run_dir(record.id)
    for path in run_dir.glob("exports/*/export.json"):
        try:
            data = json.loads(files.read_text(path, path.name, files.RECORD_LIMIT) or "")
        except (UserError, ValueError):
            continue
        if isinstance(data, dict) and data.get("quantize") == quantize:
            file = data.get("file")
            if isinstance(file, str) and (run_dir / file).is_file():
                return True
    return False


def after_training(
    project: Project,
    hook: Hooks,
    runs: RunStore,
    record: RunRecord,
    *,
    echo: Callable[[str], None] | None = None,
    label: str = "train",
) -> list[str]:
    """Export (``export.after_training``, unless the run has that GGUF), then push
    (``hub.after_training``, once per run) a run that succeeded; failures only warn.
    Returns what was done, a few words each (``watch`` puts them in its cycle's summary)."""
    settings = project.settings
    done: list[str] = []
    if record.state is not RunState.SUCCEEDED:
        return done

    def say(line: str) -> None:
        (echo or click.echo)(escape_controls(line))

    quantize = settings.export.quantize
    if settings.export.after_training and not _exported(runs, record, quantize):
        try:
            export_run(project, hook, runs, record.id, echo=say, label=label)
            done.append(f"export run {record.id} {quantize}")
        except Interrupted:
            raise  # Ctrl-C stops the command, not just this step
        except UserError as error:
            logger.warning(f"{error.message}; run it again with: overbrainer export {record.id}")
    pushed = runs.run_dir(record.id) / "hub" / "push.json"
    if settings.hub.after_training and not pushed.exists():
        from overbrainer.after.push import push_run  # noqa: PLC0415 - tomlkit, yaml

        try:
            push_run(project, runs, record.id, echo=say, warn=logger.warning)
            done.append(f"push run {record.id}")
        except Interrupted:
            raise
        except UserError as error:
            logger.warning(
                f"push failed: {error.message}; run it again with: overbrainer push {record.id}"
            )
    return done
