"""Train on a Slurm cluster: ``kind = "slurm"``.

Each run's job directory is copied to ``spool/<run id>/`` (a directory every node and this
machine see) and submitted with ``sbatch``: a batch script that ``exec``s the runner there.
The job is followed through ``scontrol`` and the runner's files; a time limit ends in a
snapshot (``--signal=B:TERM@N``); ``train cancel`` kills every process of the job at once.
Secrets travel as ``.secrets.json`` in the job directory, never in what Slurm stores or
shows. Slurm's commands run here, or on a login node through ssh (``login``). It imports
only ``overbrainer.plugin``; the hooks below hand each call to :class:`SlurmExecutor`.

    [targets.cluster]
    kind = "slurm"
    spool = "/shared/overbrainer"
    venv = "/shared/axolotl-venv"
    partition = "gpu"
    time_limit = "4:00:00"
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from overbrainer.plugin import (
    ArtifactSpec,
    JobHandle,
    JobPoll,
    JobSpec,
    JobStatus,
    LogChunk,
    Project,
    RunRecord,
    TargetInfo,
    hookimpl,
)
from overbrainer_slurm.executor import SlurmExecutor
from overbrainer_slurm.target import SlurmJob, SlurmTarget

__all__ = ["SlurmExecutor", "SlurmJob", "SlurmTarget"]


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("slurm", SlurmTarget)


@hookimpl
def create_executor(
    name: str, target: BaseModel, project: Project, run: RunRecord | None
) -> SlurmExecutor | None:
    if not isinstance(target, SlurmTarget):
        return None
    return SlurmExecutor.create(name, target, project)


@hookimpl
def describe_target(executor: object) -> TargetInfo | None:
    return executor.describe() if isinstance(executor, SlurmExecutor) else None


@hookimpl
def prepare_target(executor: object) -> None:
    if isinstance(executor, SlurmExecutor):
        executor.prepare()


@hookimpl
def claim_run_dir(executor: object, run_id: str) -> str | None:
    return executor.claim(run_id) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def launch_job(executor: object, run: RunRecord, job: JobSpec) -> JobHandle | None:
    return executor.launch(run, job) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def poll_job(executor: object, run: RunRecord) -> JobPoll | None:
    return executor.poll(run) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def wait_for_job(executor: object, run: RunRecord, timeout: float) -> bool | None:
    return executor.wait(run, timeout) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def request_snapshot(executor: object, run: RunRecord, reason: str) -> bool | None:
    return executor.request_snapshot(run, reason) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def cancel_job(executor: object, run: RunRecord) -> JobStatus | None:
    return executor.cancel(run) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def collect_artifacts(
    executor: object, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    if not isinstance(executor, SlurmExecutor):
        return None
    return executor.collect(run, artifacts, dest)


@hookimpl
def read_job_log(executor: object, run: RunRecord, offset: int) -> LogChunk | None:
    return executor.read_log(run, offset) if isinstance(executor, SlurmExecutor) else None


@hookimpl
def release_executor(executor: object, run: RunRecord | None, outcome: str | None) -> None:
    if isinstance(executor, SlurmExecutor):
        executor.release()
