"""The executor template: a target that is not a shell host, every hook written out.

``kind = "spool"`` runs each job on this machine from a spool directory, with plain Python
(files and a process), the way a scheduler plugin talks to its API: it copies the job
directory where jobs live, starts the one command of the job (``JobSpec.command()``, the
stdlib runner), finds the job again from what ``launch_job`` returned, and reads its files
to answer the other hooks. Replace the file and process calls with your scheduler's calls
(submit, status, logs, stop) and keep the rest. It imports only ``overbrainer.plugin``.

    [targets.queue]
    kind = "spool"
    directory = "/var/spool/overbrainer"
    python = "~/axolotl-venv/bin/python"
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from overbrainer.plugin import (
    CANCELLED,
    LOST,
    RUNNING,
    ArtifactSpec,
    JobHandle,
    JobPoll,
    JobSpec,
    JobState,
    JobStatus,
    LogChunk,
    Project,
    RemotePath,
    RunRecord,
    SecretsChannel,
    TargetBase,
    TargetInfo,
    UserError,
    collect_directory,
    complete_lines,
    hookimpl,
    layout,
)

CAP = 1 << 20
"""The most bytes of metrics or log one call reads."""
KILL_WAIT_S = 10.0


class SpoolTarget(TargetBase):
    """``[targets.NAME]`` with ``kind = "spool"``: where jobs live, and the Python that runs
    them (its ``bin/`` holds ``axolotl``)."""

    kind: Literal["spool"]
    directory: RemotePath
    python: RemotePath = "python3"


class SpoolJob(BaseModel):
    """What ``launch_job`` records to find the job again: kept in ``JobHandle.data``."""

    pid: int
    directory: str


@dataclass
class SpoolExecutor:
    """The target ``name``: its settings and what it read of each job so far."""

    name: str
    target: SpoolTarget
    env: Mapping[str, str]
    offsets: dict[str, int] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        return Path(self.target.directory).expanduser()

    def job_dir(self, run: RunRecord) -> Path:
        if run.job is None:
            raise UserError(f"run {run.id} has no job on target `{self.name}`")
        return Path(run.job.data_as(SpoolJob).directory)


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("spool", SpoolTarget)


@hookimpl
def create_executor(
    name: str, target: BaseModel, project: Project, run: RunRecord | None
) -> SpoolExecutor | None:
    if not isinstance(target, SpoolTarget):
        return None  # another plugin's kind
    return SpoolExecutor(name, target, project.env)


@hookimpl
def describe_target(executor: object) -> TargetInfo | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    # A real scheduler says what its nodes have; this one trains on this machine's CPU.
    # Secrets travel as a 0600 file the runner deletes: nothing lands in a process table.
    return TargetInfo(device="cpu", local_paths=True, secrets=SecretsChannel.FILE)


@hookimpl
def claim_run_dir(executor: object, run_id: str) -> str | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    executor.root.mkdir(parents=True, exist_ok=True)
    try:
        (executor.root / run_id).mkdir()  # exclusive: a second owner gets FileExistsError
    except FileExistsError:
        return ""
    return str(executor.root / run_id)


@hookimpl
def launch_job(executor: object, run: RunRecord, job: JobSpec) -> JobHandle | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    where = Path(run.remote_dir)
    shutil.copytree(
        job.local_dir, where, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*layout.HOME_ONLY)
    )
    if job.secrets:
        secrets = where / layout.SECRETS_FILE
        descriptor = os.open(secrets, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "wb") as file:
            file.write(job.secrets_file())
    python = os.path.expanduser(executor.target.python)
    with open(where / layout.JOB_LOG, "ab") as log:
        process = subprocess.Popen(
            [python, *job.command()[1:]],
            cwd=where,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={"PATH": executor.env.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home())},
            start_new_session=True,  # its own process group; it outlives this process
        )
    threading.Thread(target=process.wait, daemon=True).start()  # reap it if it ends here
    return JobHandle().with_data(SpoolJob(pid=process.pid, directory=str(where)))


def _alive(executor: SpoolExecutor, run: RunRecord) -> bool:
    """The job's process still runs, and is the job's (a recycled pid runs elsewhere)."""
    job = run.job.data_as(SpoolJob) if run.job else None
    if job is None:
        return False
    try:
        state = Path(f"/proc/{job.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        cwd = os.readlink(f"/proc/{job.pid}/cwd")
    except (OSError, IndexError):
        return False
    return state != "Z" and cwd == job.directory


def _status(executor: SpoolExecutor, run: RunRecord) -> JobStatus:
    where = executor.job_dir(run)
    if (where / layout.CANCELLED).exists():
        return CANCELLED
    if (where / layout.EXIT_CODE).exists():
        return JobStatus.exited(int((where / layout.EXIT_CODE).read_text().strip()))
    return RUNNING if _alive(executor, run) else LOST


def _read(path: Path, offset: int, length: int = CAP) -> bytes:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(length)
    except FileNotFoundError:
        return b""


@hookimpl
def poll_job(executor: object, run: RunRecord) -> JobPoll | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    where = executor.job_dir(run)
    status = _status(executor, run)
    offset = executor.offsets.get(run.id, 0)
    chunk = _read(where / layout.METRICS_FILE, offset)
    lines, used = complete_lines(chunk, capped=len(chunk) >= CAP)
    executor.offsets[run.id] = offset + used
    request = _read(where / layout.SNAPSHOT_REQUEST, 0, 64).decode("ascii", "replace").strip()
    snapshot = _read(where / layout.SNAPSHOT_FILE, 0, (64 << 10) + 1)
    return JobPoll(
        status,
        tuple(lines),
        snapshot_request=request or None,
        snapshot=snapshot.decode("utf-8", "replace") if snapshot else None,
    )


@hookimpl
def request_snapshot(executor: object, run: RunRecord, reason: str) -> bool | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    # A scheduler that cannot write into the job directory sends its graceful stop
    # (SIGTERM) instead: the runner turns it into this same request.
    request = executor.job_dir(run) / layout.SNAPSHOT_REQUEST
    temporary = request.with_name(request.name + ".tmp")
    temporary.write_text(reason + "\n", encoding="utf-8")
    temporary.replace(request)
    return True


@hookimpl
def cancel_job(executor: object, run: RunRecord) -> JobStatus | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    status = _status(executor, run)
    if status.state in (JobState.EXITED, JobState.CANCELLED):
        return status  # a finished job is never signalled
    if _alive(executor, run) and run.job is not None:
        pid = run.job.data_as(SpoolJob).pid
        os.killpg(pid, signal.SIGKILL)  # the runner leads the job's process group
        deadline = time.monotonic() + KILL_WAIT_S
        while _alive(executor, run):
            if time.monotonic() > deadline:
                raise UserError(f"the job of run {run.id} survived KILL")
            time.sleep(0.05)
    (executor.job_dir(run) / layout.CANCELLED).touch()
    return CANCELLED


@hookimpl
def collect_artifacts(
    executor: object, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    where = executor.job_dir(run)
    return collect_directory(where, dest, artifacts)


@hookimpl
def read_job_log(executor: object, run: RunRecord, offset: int) -> LogChunk | None:
    if not isinstance(executor, SpoolExecutor):
        return None
    data = _read(executor.job_dir(run) / layout.JOB_LOG, offset)
    return LogChunk(data, offset + len(data))


@hookimpl
def release_executor(executor: object, run: RunRecord | None, outcome: str | None) -> None:
    if isinstance(executor, SpoolExecutor):
        executor.offsets.clear()  # nothing held: a scheduler client would close here

