"""From what following saw to the run's final state, with its files brought home."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from loguru import logger

from overbrainer import files
from overbrainer.errors import MissingArtifact, UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.interface import Executor
from overbrainer.job.layout import (
    CHECKPOINTS,
    CONFIG_FILE,
    JOB_LOG,
    METRICS_FILE,
    OUTPUT_DIR,
    SNAPSHOT_FILE,
)
from overbrainer.job.record import (
    ARTIFACTS_NOT_RETRIEVED,
    RunRecord,
    RunState,
    Snapshot,
    SnapshotReason,
)
from overbrainer.job.spec import ArtifactSpec, JobState
from overbrainer.redact import LineRedactor, printable
from overbrainer.runs.follow import Followed
from overbrainer.runs.store import RUNS_DIR, RunStore

OUTPUT = OUTPUT_DIR
RESULTS = ArtifactSpec(
    paths=(OUTPUT, METRICS_FILE, JOB_LOG), required=(OUTPUT,), exclude=(CHECKPOINTS,)
)
BEST_EFFORT = ArtifactSpec(paths=RESULTS.paths, exclude=RESULTS.exclude)
SNAPSHOT_CAP = 64 << 10
_CHECKPOINT = re.compile(r"^output/checkpoint-(\d+)$")


class RetrievalError(UserError):
    """The results of an ended job could not be brought home; the run stays running so
    that ``train attach`` tries again."""


def parse_snapshot(text: str | None) -> Snapshot | str | None:
    """The snapshot ``snapshot.json`` describes; None when there is none; a string saying
    why it is invalid."""
    if text is None:
        return None
    if len(text.encode("utf-8")) > SNAPSHOT_CAP:
        return "snapshot.json is larger than 64 KiB"
    try:
        data = json.loads(text)
    except ValueError:
        return "snapshot.json is not valid JSON"
    if not isinstance(data, dict):
        return "snapshot.json is not a JSON object"
    checkpoint, step = data.get("checkpoint"), data.get("step")
    match = _CHECKPOINT.match(checkpoint) if isinstance(checkpoint, str) else None
    if match is None or not isinstance(step, int) or int(match[1]) != step:
        return "snapshot.json names an invalid checkpoint path"
    assert isinstance(checkpoint, str)  # matched above
    reason = data.get("reason")
    return Snapshot(
        checkpoint=checkpoint,
        step=step,
        reason=SnapshotReason.parse(reason if isinstance(reason, str) else ""),
    )


def settle(
    hook: Hooks,
    executor: Executor,
    store: RunStore,
    run: RunRecord,
    seen: Followed,
    *,
    on_phase: Callable[[str], None] | None = None,
) -> RunRecord:
    """Record how the job of ``run`` ended, retrieving its files; the saved record.

    Raises ``RetrievalError`` (the record stays ``running``) when the results of a
    succeeded or stopped job could not be brought home, so ``train attach`` can try again.
    """

    def collect(spec: ArtifactSpec) -> None:
        if on_phase is not None:
            on_phase("retrieving")
        hook.collect_artifacts(
            executor=executor, run=run, artifacts=spec, dest=store.run_dir(run.id)
        )

    status = seen.status
    snapshot = (
        parse_snapshot(seen.snapshot)
        if status.state is JobState.CANCELLED or status == status.exited(0)
        else None
    )
    if isinstance(snapshot, Snapshot):
        saved = ArtifactSpec(
            paths=(snapshot.checkpoint, SNAPSHOT_FILE), required=(snapshot.checkpoint,)
        )
        try:
            # A job stopped before it saved its final model has only the checkpoint.
            collect(BEST_EFFORT)
            collect(saved)
        except Exception as error:
            raise RetrievalError(
                f"cannot retrieve the snapshot of run {run.id}: {error}"
            ) from error
        return _save(store, run, RunState.STOPPED, None, snapshot=snapshot)
    if isinstance(snapshot, str) and status.state is JobState.CANCELLED:
        logger.warning(f"run {run.id}: {snapshot}; the run stays cancelled")
    ending = _ending(seen, snapshot)
    if ending.state is not RunState.SUCCEEDED:
        return _best_effort(collect, store, run, ending)
    try:
        collect(RESULTS)
    except MissingArtifact as error:
        if error.path != OUTPUT:
            raise RetrievalError(f"cannot retrieve the results of run {run.id}: {error}") from error
        no_output = Ending(RunState.FAILED, "the job succeeded but left no output", see_log=True)
        return _best_effort(collect, store, run, no_output)
    except Exception as error:
        raise RetrievalError(f"cannot retrieve the results of run {run.id}: {error}") from error
    return _save(store, run, RunState.SUCCEEDED, None)


class Ending(NamedTuple):
    """How a job ended without a usable snapshot: the run's state, what its message says,
    and whether the message sends the reader to the job's log (the log's last error line
    then goes before that pointer)."""

    state: RunState
    what: str | None = None
    see_log: bool = False

    def message(self, run: RunRecord, cause: str | None = None) -> str | None:
        """The run's message, with ``cause`` (from the job's log) after what ended it."""
        if self.what is None:
            return None
        text = self.what if cause is None else f"{self.what}: {cause}"
        return f"{text} (see {RUNS_DIR}/{run.id}/{JOB_LOG})" if self.see_log else text


def _ending(seen: Followed, snapshot: str | None) -> Ending:
    """How a job that ended without a usable snapshot ended."""
    status = seen.status
    if status.state is JobState.CANCELLED:
        return Ending(RunState.CANCELLED)
    if status.state is JobState.LOST:
        return Ending(RunState.FAILED, "the job stopped without an exit code", see_log=True)
    if status.exit_code != 0:
        return Ending(RunState.FAILED, f"the job exited with code {status.exit_code}", True)
    if snapshot is not None:
        return Ending(RunState.FAILED, snapshot)
    if seen.plugin_lines == 0:
        return Ending(
            RunState.FAILED,
            "the job wrote no metrics: the overbrainer metrics plugin was not loaded",
            see_log=True,
        )
    return Ending(RunState.SUCCEEDED)


def _best_effort(
    collect: Callable[[ArtifactSpec], None], store: RunStore, run: RunRecord, ending: Ending
) -> RunRecord:
    try:
        collect(BEST_EFFORT)
    except Exception as error:  # noqa: BLE001 - the state stands; the message says what is missing
        note = f"{ARTIFACTS_NOT_RETRIEVED}: {error}"
        message = ending.message(run)
        message = f"{message} ({note})" if message else note
        return _save(store, run, ending.state, message, artifacts_missing=True)
    failed = ending.state is RunState.FAILED
    cause = last_error_line(store.run_dir(run.id) / JOB_LOG) if failed else None
    return _save(store, run, ending.state, ending.message(run, cause))


_ERROR_LINE = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt)(?:: .+)?$"
)
ERROR_TAIL = 64 << 10
ERROR_SHOWN = 300


def last_error_line(path: Path) -> str | None:
    """The last line of a job log that names an exception (a traceback's last line, such
    as ``OSError: Can't load the configuration of 'models/nope'``), redacted and printable;
    None when there is none, or no log."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            return None
        size = os.fstat(file.fileno()).st_size
        file.seek(max(size - ERROR_TAIL, 0))
        text = file.read(ERROR_TAIL).decode("utf-8", "replace")
    redactor = LineRedactor()
    found = None
    for raw in text.splitlines():
        line = printable(redactor.line(raw)).strip()
        if _ERROR_LINE.match(line):
            found = line
    if found is None:
        return None
    return found if len(found) <= ERROR_SHOWN else found[: ERROR_SHOWN - 1] + "…"


def _save(
    store: RunStore,
    run: RunRecord,
    state: RunState,
    message: str | None,
    *,
    artifacts_missing: bool = False,
    **changes: Any,
) -> RunRecord:
    """The run settled: ``message`` and ``artifacts_missing`` replace what an earlier
    settling said (a later ``train attach`` that brings the artifacts home clears it)."""
    record = run.evolve(
        state=state, message=message, artifacts_missing=artifacts_missing, **changes
    )
    store.save(record)
    return record


def output_lines(store: RunStore, record: RunRecord) -> list[str]:
    """Where a succeeded run's model is, read from the run's own files."""
    directory = store.run_dir(record.id)
    output = f"{RUNS_DIR}/{record.id}/{OUTPUT}"
    lines: list[str] = []
    try:
        yaml_text = files.read_text(directory / CONFIG_FILE, CONFIG_FILE)
    except UserError:
        return lines
    if yaml_text is None:
        return lines
    adapter = re.search(r"^adapter:", yaml_text, re.M) is not None
    lines.append(f"train: {'adapter' if adapter else 'model'} in {output}")
    if (directory / OUTPUT / "merged").is_dir():
        lines.append(f"train: merged model in {output}/merged")
    return lines


def stopped_lines(record: RunRecord) -> list[str]:
    """Where a stopped run's snapshot is, how to resume, and that ``output/`` is partial."""
    snapshot = record.snapshot
    if snapshot is None:
        return []
    run_id = record.id
    return [
        f"train: run {run_id} stopped at step {snapshot.step} ({snapshot.reason}): snapshot in "
        f"{RUNS_DIR}/{run_id}/{snapshot.checkpoint}; resume with "
        f"`overbrainer train --resume-from {run_id}`",
        f"train: {RUNS_DIR}/{run_id}/{OUTPUT} also holds the partial model at step "
        f"{snapshot.step}, not a finished one",
    ]
