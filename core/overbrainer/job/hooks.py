"""The built-in dispatcher: the operation hooks of every ``Executor``, answered last.

Registered by the core like any plugin, each hook here calls the method of the same
purpose on any :class:`~overbrainer.job.interface.Executor` (a subclass too): one call,
no routing by class; anything else (a raw caller's object) gets None. It answers after
every other plugin (``trylast``), so a plugin's own hook implementation still wins where
it wants: a first-answer hook stops at its answer.

An optional operation is called only when the executor's class declares it in
``capabilities``. Otherwise ``wait_for_job``, ``open_shell`` and the serve hooks answer
None ("cannot tell", "no shell", "cannot serve"), and ``prepare_target`` and
``release_executor`` do nothing, so a plugin that handles those in raw hooks is not called twice.

This module imports only the ``Executor`` class: a command that runs no job does not
load the job code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overbrainer import hookimpl
from overbrainer.job.interface import Executor

if TYPE_CHECKING:
    from pathlib import Path

    from overbrainer.job.record import JobHandle, RunRecord, RunState
    from overbrainer.job.serving import ServeHandle, ServeSpec, ServeState
    from overbrainer.job.shell import TargetShell
    from overbrainer.job.spec import ArtifactSpec, JobPoll, JobSpec, JobStatus, LogChunk, TargetInfo

last = hookimpl(trylast=True)


@last
def describe_target(executor: Executor) -> TargetInfo | None:
    return executor.describe() if isinstance(executor, Executor) else None


@last
def prepare_target(executor: Executor) -> None:
    if isinstance(executor, Executor) and "prepare" in executor.capabilities:
        executor.prepare()


@last
def claim_run_dir(executor: Executor, run_id: str) -> str | None:
    return executor.claim(run_id) if isinstance(executor, Executor) else None


@last
def launch_job(executor: Executor, run: RunRecord, job: JobSpec) -> JobHandle | None:
    return executor.launch(run, job) if isinstance(executor, Executor) else None


@last
def poll_job(executor: Executor, run: RunRecord) -> JobPoll | None:
    return executor.poll(run) if isinstance(executor, Executor) else None


@last
def wait_for_job(executor: Executor, run: RunRecord, timeout: float) -> bool | None:
    if isinstance(executor, Executor) and "wait" in executor.capabilities:
        return executor.wait(run, timeout)
    return None


@last
def request_snapshot(executor: Executor, run: RunRecord, reason: str) -> bool | None:
    if not isinstance(executor, Executor):
        return None
    executor.request_snapshot(run, reason)
    return True


@last
def cancel_job(executor: Executor, run: RunRecord) -> JobStatus | None:
    return executor.cancel(run) if isinstance(executor, Executor) else None


@last
def collect_artifacts(
    executor: Executor, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    return executor.collect(run, artifacts, dest) if isinstance(executor, Executor) else None


@last
def read_job_log(executor: Executor, run: RunRecord, offset: int) -> LogChunk | None:
    return executor.read_log(run, offset) if isinstance(executor, Executor) else None


@last
def open_shell(executor: Executor, purpose: str, keep_machine: bool) -> TargetShell | None:
    if isinstance(executor, Executor) and "open_shell" in executor.capabilities:
        return executor.open_shell(purpose, keep_machine)
    return None


@last
def start_serve(executor: Executor, spec: ServeSpec) -> ServeHandle | None:
    if isinstance(executor, Executor) and "serve" in executor.capabilities:
        return executor.serve(spec)
    return None


@last
def reach_serve(executor: Executor, handle: ServeHandle) -> str | None:
    if isinstance(executor, Executor) and "serve" in executor.capabilities:
        return executor.reach(handle)
    return None


@last
def serve_state(executor: Executor, handle: ServeHandle) -> ServeState | None:
    if isinstance(executor, Executor) and "serve" in executor.capabilities:
        return executor.serve_state(handle)
    return None


@last
def stop_serve(executor: Executor, handle: ServeHandle, keep_log: bool) -> bool | None:
    if isinstance(executor, Executor) and "serve" in executor.capabilities:
        return executor.end_serve(handle, keep_log)
    return None


@last
def release_executor(executor: Executor, run: RunRecord | None, outcome: RunState | None) -> None:
    if isinstance(executor, Executor) and "release" in executor.capabilities:
        executor.release(run, outcome)
