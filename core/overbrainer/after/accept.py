"""Which runs export and push accept, and where their model is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loguru import logger

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import CONFIG_FILE, OUTPUT_DIR
from overbrainer.job.record import RunRecord, RunState
from overbrainer.project import RUNS_DIR
from overbrainer.runs.store import RunStore

MODEL_FILES = ("adapter_config.json", "config.json")


@dataclass(frozen=True)
class AcceptedRun:
    """A run whose model can be exported or pushed: ``model`` is relative to its directory
    (``output``, or the snapshot's checkpoint of a stopped run that has no final model)."""

    record: RunRecord
    dir: Path
    model: str


def _has_model(directory: Path) -> bool:
    return any((directory / name).is_file() for name in MODEL_FILES)


def accept_run(store: RunStore, run_id: str, verb: str) -> AcceptedRun:
    """The run ``run_id`` if ``verb`` (export, push) may use it, else a ``UserError``."""
    done = {"export": "exported", "push": "pushed"}.get(verb, verb)
    record = store.load(run_id)
    directory = store.run_dir(run_id)
    if record.state not in (RunState.SUCCEEDED, RunState.STOPPED):
        raise UserError(
            f"run {run_id} is {record.state.value}: only a succeeded or stopped run can be {done}"
        )
    checkpoint = record.snapshot.checkpoint if record.snapshot else None
    files.check_dir(directory / OUTPUT_DIR, f"{RUNS_DIR}/{run_id}/{OUTPUT_DIR}")
    if checkpoint is not None:  # a record's path: the run's own directory, not a link
        files.own_path(checkpoint, directory, f"the snapshot of run {run_id}")
        files.check_dir(directory / checkpoint, f"{RUNS_DIR}/{run_id}/{checkpoint}")
    retrieved = (directory / OUTPUT_DIR).is_dir() or (
        checkpoint is not None and (directory / checkpoint).is_dir()
    )
    if not retrieved:
        raise UserError(
            f"the results of run {run_id} were not retrieved: retrieve them with "
            f"`overbrainer train attach {run_id}`, then {verb}"
        )
    if not (directory / CONFIG_FILE).is_file():
        raise UserError(f"{RUNS_DIR}/{run_id}/{CONFIG_FILE} is missing: the {verb} needs it")
    if _has_model(directory / OUTPUT_DIR):
        model = OUTPUT_DIR
    elif record.state is RunState.STOPPED and checkpoint and _has_model(directory / checkpoint):
        model = checkpoint
    else:
        raise UserError(f"{RUNS_DIR}/{run_id}/{OUTPUT_DIR} holds no model: nothing to {verb}")
    if record.state is RunState.STOPPED and record.snapshot is not None:
        logger.warning(
            f"run {run_id} stopped at step {record.snapshot.step}: its {verb} holds the partial "
            "model of that step"
        )
    return AcceptedRun(record, directory, model)
