"""The hook implementations for every ``HostExecutor``: a built-in plugin.

Registered by the core like any plugin, so a POSIX-host target plugin implements only
``register_targets`` and ``create_executor``. Each hook answers None for other executors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overbrainer import hookimpl
from overbrainer.job.executor import HostExecutor
from overbrainer.job.record import JobHandle, RunRecord
from overbrainer.job.shell import TargetShell
from overbrainer.job.spec import ArtifactSpec, JobPoll, JobSpec, JobStatus, LogChunk, TargetInfo


@hookimpl(trylast=True)
def describe_target(executor: Any) -> TargetInfo | None:
    return executor.describe() if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def prepare_target(executor: Any) -> None:
    if isinstance(executor, HostExecutor):
        executor.prepare()


@hookimpl(trylast=True)
def claim_run_dir(executor: Any, run_id: str) -> str | None:
    return executor.claim(run_id) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def launch_job(executor: Any, run: RunRecord, job: JobSpec) -> JobHandle | None:
    return executor.launch(run, job) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def poll_job(executor: Any, run: RunRecord) -> JobPoll | None:
    return executor.poll(run) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def wait_for_job(executor: Any, run: RunRecord, timeout: float) -> bool | None:
    return executor.wait(run, timeout) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def request_snapshot(executor: Any, run: RunRecord, reason: str) -> bool | None:
    if not isinstance(executor, HostExecutor):
        return None
    executor.request_snapshot(run, reason)
    return True


@hookimpl(trylast=True)
def cancel_job(executor: Any, run: RunRecord) -> JobStatus | None:
    return executor.cancel(run) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def collect_artifacts(
    executor: Any, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    return executor.collect(run, artifacts, dest) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def read_job_log(executor: Any, run: RunRecord, offset: int) -> LogChunk | None:
    return executor.read_log(run, offset) if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def open_shell(executor: Any) -> TargetShell | None:
    return executor.shell() if isinstance(executor, HostExecutor) else None


@hookimpl(trylast=True)
def release_executor(executor: Any, run: RunRecord | None, outcome: str | None) -> None:
    if isinstance(executor, HostExecutor):
        executor.close()
