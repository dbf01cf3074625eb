"""``train stop`` and ``train cancel``: a snapshot asked for, or the job stopped now."""

from __future__ import annotations

import time

from loguru import logger

from overbrainer.errors import UserError
from overbrainer.job.record import RunRecord, RunState, SnapshotReason
from overbrainer.job.spec import JobState, JobStatus
from overbrainer.runs.follow import Followed
from overbrainer.runs.interrupt import deferred_sigint
from overbrainer.runs.outcome import settle
from overbrainer.train.executors import Held, held_executor
from overbrainer.train.follow import follow_held
from overbrainer.train.report import report
from overbrainer.train.teacher import end_handed
from overbrainer.train.workspace import Workspace


def stoppable(record: RunRecord) -> None:
    """Refuse a snapshot request for a run whose job cannot give one."""
    run_id = record.id
    if record.job is None or record.state is RunState.PREPARING:
        raise UserError(f"run {run_id} has not started: there is no job to snapshot yet")
    if record.state.ended:
        raise UserError(f"run {run_id} already ended: {record.state.value}")
    if not record.snapshots:
        raise UserError(
            f"run {run_id} was started by an overbrainer older than 0.5.0: its job cannot save "
            f"a snapshot; cancel it with `overbrainer train cancel {run_id}`, or let it finish"
        )


def stop_requested(run_id: str) -> str:
    return (
        f"train: snapshot of run {run_id} requested: its job saves a checkpoint at the end of "
        "its current step, then stops"
    )


def ask_snapshot(ws: Workspace, held: Held, record: RunRecord) -> None:
    """Ask the job of ``record`` for a snapshot through the executor ``held``."""
    done = ws.hook.request_snapshot(
        executor=held.executor, run=record, reason=SnapshotReason.REQUESTED.value
    )
    if not done:
        raise UserError(f"no plugin can ask the job of run {record.id} for a snapshot")
    ws.echo(stop_requested(record.id))


def stop(ws: Workspace, run_id: str) -> None:
    """``train stop``: ask for a snapshot, then follow the run to its end with the limits."""
    record = ws.runs.load(run_id)
    stoppable(record)
    with held_executor(ws.project, ws.hook, record) as held:
        ask_snapshot(ws, held, record)
        record = follow_held(ws, held, record, asked_at=time.monotonic())
    end_handed(ws, record)
    report(ws, record)


def stop_for_holder(ws: Workspace, run_id: str, holder: int) -> None:
    """``train stop`` while another process holds the project: only ask for the snapshot."""
    record = ws.runs.load(run_id)
    stoppable(record)
    with held_executor(ws.project, ws.hook, record) as held:
        ask_snapshot(ws, held, record)
    who = f"overbrainer (pid {holder})" if holder else "another overbrainer"
    ws.echo(
        f"train: {who} is using this project: if it follows run {run_id}, it collects the "
        f"snapshot; if not, collect it with `overbrainer train attach {run_id}`"
    )


def cancellable(record: RunRecord) -> None:
    """Refuse to cancel a run with no job, or one already cancelled."""
    if record.state is RunState.CANCELLED:
        raise UserError(f"run {record.id} already ended: cancelled")
    if record.job is None:
        raise UserError(f"run {record.id} has not started")


def cancel_job(ws: Workspace, held: Held, record: RunRecord) -> JobStatus:
    """Stop the job of ``record`` now; how it ended. Called with Ctrl-C deferred."""
    status = ws.hook.cancel_job(executor=held.executor, run=record)
    if status is None:
        raise UserError(f"no plugin can cancel the job of run {record.id}")
    return status


def cancel_for_holder(ws: Workspace, run_id: str, holder: int) -> None:
    """``train cancel`` while another process holds the project (following the run, most
    likely): stop the job now, and leave the record to that process, which sees the job
    cancelled at its next poll, records it and brings the files home."""
    record = ws.runs.load(run_id)
    cancellable(record)
    # Released with no outcome: the holder releases what the run holds.
    with held_executor(ws.project, ws.hook, record) as held, deferred_sigint():
        status = cancel_job(ws, held, record)
    if status.state is not JobState.CANCELLED:
        ws.echo(already_ended(run_id, status))
        return
    who = f"overbrainer (pid {holder})" if holder else "another overbrainer"
    ws.echo(
        f"train: the job of run {run_id} is cancelled; {who} is using this project: if it "
        f"follows run {run_id}, it records the run cancelled; if not, record it with "
        f"`overbrainer train attach {run_id}`"
    )


def cancel(ws: Workspace, run_id: str) -> None:
    """``train cancel``: stop the job of a run, record it cancelled, bring its files home."""
    record = ws.runs.load(run_id)
    cancellable(record)
    if record.state.ended:
        # A container that outlived its wrapper would keep the GPU: stop what is left.
        logger.info(
            f"train: run {run_id} already ended: {record.state.value}; stopping any job left "
            "on the target"
        )
    with held_executor(ws.project, ws.hook, record) as held:
        held.note(record)
        with deferred_sigint():
            status = cancel_job(ws, held, record)
            if status.state is JobState.CANCELLED:
                record = held.note(
                    settle(ws.hook, held.executor, ws.runs, record, Followed(status=status))
                )
    end_handed(ws, record)
    if record.state is not RunState.CANCELLED:
        ws.echo(already_ended(run_id, status))
        return
    suffix = f" ({record.message})" if record.message else ""
    ws.echo(f"train: run {run_id} cancelled{suffix}")


def already_ended(run_id: str, status: JobStatus) -> str:
    return (
        f"train: the job of run {run_id} had already ended ({status.describe()}): collect it "
        f"with `overbrainer train attach {run_id}`"
    )
