"""Following a started job to its end (``train``, ``train attach``), or until detached."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NoReturn

from loguru import logger

from overbrainer import files
from overbrainer.errors import DetachedRun, InterruptedBeforeJob, UserError
from overbrainer.events import TrainEnd, TrainEvent, TrainMachine, TrainPhase, publish
from overbrainer.job.interface import Executor
from overbrainer.job.layout import FOLLOWED_METRICS
from overbrainer.job.record import RunRecord
from overbrainer.runs import follow
from overbrainer.runs.follow import Follower, FollowLost
from overbrainer.runs.machine import keep_machine, parse_sample
from overbrainer.runs.outcome import settle
from overbrainer.train.executors import Held, held_executor
from overbrainer.train.progress import TrainingProgress
from overbrainer.train.report import reattach, report
from overbrainer.train.teacher import end_handed
from overbrainer.train.workspace import Workspace


def follow_to_end(
    ws: Workspace,
    executor: Executor,
    record: RunRecord,
    asked_at: float | None = None,
    stop_when: Callable[[], str | None] | None = None,
) -> RunRecord:
    """Follow the job of ``record`` until it ends, then settle and save its state."""
    progress = TrainingProgress()
    mirror = _followed_metrics(ws, record)

    def on_event(event: dict[str, Any]) -> None:
        progress.event(event)
        if mirror is not None:
            mirror.write(json.dumps(event) + "\n")
            mirror.flush()
        publish(TrainEvent(record.id, event, progress.current_phase))

    def on_phase(name: str) -> None:
        progress.phase(name)
        publish(TrainPhase(record.id, progress.current_phase))

    publish(TrainPhase(record.id, progress.current_phase))
    on_machine = _machine_keeper(ws, record)
    try:
        follower = Follower(
            ws.hook,
            executor,
            record,
            on_event=on_event,
            asked_at=asked_at,
            poll_s=follow.POLL_S,
            limits=follow.STOP_LIMITS,
            stop_when=stop_when,
            on_machine=on_machine,
        )
        seen = follower.follow()
        progress.status(seen.status.describe())
        return settle(ws.hook, executor, ws.runs, record, seen, on_phase=on_phase)
    except FollowLost as error:
        raise UserError(str(error)) from None
    finally:
        progress.close()
        if mirror is not None:
            mirror.close()
        publish(TrainEnd(record.id))


def _followed_metrics(ws: Workspace, record: RunRecord) -> IO[str] | None:
    """For a job running away from its run directory, the file at home its metrics lines
    are copied to as they come (``runs show`` and the TUI chart them live); started afresh
    by each follower, which reads the job's lines from the first."""
    run_dir = ws.runs.run_dir(record.id)
    if Path(record.remote_dir) == run_dir or Path(record.remote_dir) == run_dir.resolve():
        return None  # the job writes metrics.jsonl right here
    path = run_dir / FOLLOWED_METRICS
    try:
        path.unlink(missing_ok=True)  # afresh, and a link there is removed, never followed
        return os.fdopen(files.open_append(path, FOLLOWED_METRICS), "w", encoding="utf-8")
    except (OSError, UserError) as error:
        logger.debug(f"no live copy of the metrics of run {record.id}: {error}")
        return None


def _machine_keeper(ws: Workspace, record: RunRecord) -> Callable[[str], None]:
    """What takes each new sample of the job's machine: published (the Prometheus gauges,
    the TUI) and, for a job running away from its run directory, kept there as
    ``machine.json`` (``runs show``)."""
    run_dir = ws.runs.run_dir(record.id)
    here = Path(record.remote_dir) in (run_dir, run_dir.resolve())

    def on_machine(text: str) -> None:
        sample = parse_sample(text)
        if sample is None:
            return
        if not here:
            keep_machine(run_dir, text)
        publish(TrainMachine(record.id, sample))

    return on_machine


def attach(ws: Workspace, run_id: str) -> None:
    """``train attach``: follow a run again (or report an ended one from its files)."""
    record = ws.runs.load(run_id)
    if not record.state.ended:
        with held_executor(ws.project, ws.hook, record) as held:
            record = follow_held(ws, held, record)
    end_handed(ws, record)
    report(ws, record)


def follow_held(
    ws: Workspace, held: Held, record: RunRecord, asked_at: float | None = None
) -> RunRecord:
    """Follow a started run to its end with the executor ``held``; the run as saved.
    Ctrl-C detaches (``DetachedRun``)."""
    try:
        return held.note(follow_to_end(ws, held.executor, record, asked_at=asked_at))
    except KeyboardInterrupt:
        interrupted(ws, held, record)


def interrupted(ws: Workspace, held: Held, record: RunRecord | None) -> NoReturn:
    """Ctrl-C while following. The run may have ended between the follower's last look
    and the key (its outcome saved, the record in hand not): read back, so that the
    release gets that outcome (a machine made for the run is ended, not left running) and
    nothing says the run keeps running; otherwise a detach."""
    if record is not None and record.job is not None:
        with contextlib.suppress(UserError):  # unreadable: the record as last seen here
            record = held.note(ws.runs.load(record.id))
        if record.state.ended:
            raise KeyboardInterrupt
    detached(record)


def detached(record: RunRecord | None) -> NoReturn:
    """After Ctrl-C while following: a detach, which says how to follow again (on stdout,
    exit 0: the reference exited 1, but nothing failed); before the job, an error."""
    if record is None:
        raise InterruptedBeforeJob("interrupted before the run started")
    if record.job is None:
        raise InterruptedBeforeJob(f"interrupted: run {record.id} has no job")
    raise DetachedRun(
        f"interrupted: run {record.id} keeps running on target `{record.target}`; "
        f"{reattach(record.id)}"
    )
