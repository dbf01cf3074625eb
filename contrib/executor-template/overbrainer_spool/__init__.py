"""The executor template: ``kind = "spool"`` runs each job on this machine from a spool
directory with files and a process, the way a scheduler plugin talks to its API (submit,
status, logs, stop): replace those calls with your scheduler's and keep the rest. It
imports only ``overbrainer.plugin``; its entry point names ``plugin``, at the end.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

# isort: off
from overbrainer.plugin import (
    CANCELLED, LOST, RUNNING, ArtifactSpec, Executor, ExecutorHooks, JobHandle, JobPoll,
    JobSpec, JobState, JobStatus, LogChunk, Project, RemotePath, RunRecord, SecretsChannel,
    TargetBase, TargetInfo, UserError, collect_directory, complete_lines, layout,
)  # fmt: skip
# isort: on

CAP = 1 << 20  # the most bytes of metrics or log one call reads
KILL_WAIT_S = 10.0


class SpoolTarget(TargetBase):
    """``[targets.NAME]``: where jobs live, the Python that runs them (``bin/axolotl``)."""

    kind: Literal["spool"]
    directory: RemotePath
    python: RemotePath = "python3"


class SpoolJob(BaseModel):
    """What ``launch`` records to find the job again: kept in ``JobHandle.data``."""

    pid: int
    directory: str


def _read(path: Path, offset: int, length: int = CAP) -> bytes:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            return file.read(length)
    except FileNotFoundError:
        return b""


@dataclass
class SpoolExecutor(Executor):
    """The target ``name``: its settings and what it read of each job so far (``release``,
    ``wait``, ``prepare``, ``open_shell``: the defaults). ``env`` (the project's, secrets
    included) stays out of the repr that ``OVERBRAINER_TRACE_PLUGINS`` prints."""

    name: str
    target: SpoolTarget
    env: Mapping[str, str] = field(repr=False)
    offsets: dict[str, int] = field(default_factory=dict)

    def job(self, run: RunRecord) -> SpoolJob:
        if run.job is None:
            raise UserError(f"run {run.id} has no job on target `{self.name}`")
        return run.job.data_as(SpoolJob)

    def describe(self) -> TargetInfo:
        # This machine's CPU; secrets as a 0600 file the runner deletes (no process table).
        return TargetInfo(device="cpu", local_paths=True, secrets=SecretsChannel.FILE)

    def claim(self, run_id: str) -> str:
        where = Path(self.target.directory).expanduser() / run_id
        where.parent.mkdir(parents=True, exist_ok=True)
        try:
            where.mkdir()  # exclusive: a second owner gets FileExistsError
        except FileExistsError:
            return ""
        return str(where)

    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        where = Path(run.remote_dir)
        ignore = shutil.ignore_patterns(*layout.HOME_ONLY)
        shutil.copytree(job.local_dir, where, dirs_exist_ok=True, ignore=ignore)
        if job.secrets:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            descriptor = os.open(where / layout.SECRETS_FILE, flags, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(job.secrets_file())
        env = {"PATH": self.env.get("PATH", "/usr/bin:/bin"), "HOME": str(Path.home())}
        with open(where / layout.JOB_LOG, "ab") as log:
            process = subprocess.Popen(
                [os.path.expanduser(self.target.python), *job.command()[1:]],
                cwd=where, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True,  # its own process group; it outlives us
            )  # fmt: skip
        threading.Thread(target=process.wait, daemon=True).start()  # reap it if it ends here
        return JobHandle().with_data(SpoolJob(pid=process.pid, directory=str(where)))

    def _alive(self, run: RunRecord) -> bool:
        """The job's process still runs, and is the job's (a recycled pid runs elsewhere)."""
        job = self.job(run)
        try:
            state = Path(f"/proc/{job.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cwd = os.readlink(f"/proc/{job.pid}/cwd")
        except (OSError, IndexError):
            return False
        return state != "Z" and cwd == job.directory

    def _status(self, where: Path, run: RunRecord) -> JobStatus:
        if (where / layout.CANCELLED).exists():
            return CANCELLED
        if (where / layout.EXIT_CODE).exists():
            return JobStatus.exited(int((where / layout.EXIT_CODE).read_text().strip()))
        return RUNNING if self._alive(run) else LOST

    def poll(self, run: RunRecord) -> JobPoll:
        where = Path(self.job(run).directory)
        status = self._status(where, run)  # before the metrics: no line is missed at the end
        offset = self.offsets.get(run.id, 0)
        chunk = _read(where / layout.METRICS_FILE, offset)
        lines, used = complete_lines(chunk, capped=len(chunk) >= CAP)
        self.offsets[run.id] = offset + used
        request = _read(where / layout.SNAPSHOT_REQUEST, 0, 64).decode("ascii", "replace")
        snapshot = _read(where / layout.SNAPSHOT_FILE, 0, (64 << 10) + 1)
        text = snapshot.decode("utf-8", "replace") if snapshot else None
        return JobPoll(status, tuple(lines), snapshot_request=request.strip() or None,
                       snapshot=text)  # fmt: skip

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        # Or send the runner SIGTERM (a scheduler's graceful stop): it writes this request.
        request = Path(self.job(run).directory) / layout.SNAPSHOT_REQUEST
        temporary = request.with_name(request.name + ".tmp")
        temporary.write_text(reason + "\n", encoding="utf-8")
        temporary.replace(request)

    def cancel(self, run: RunRecord) -> JobStatus:
        where = Path(self.job(run).directory)
        status = self._status(where, run)
        if status.state in (JobState.EXITED, JobState.CANCELLED):
            return status  # a finished job is never signalled
        if self._alive(run):
            os.killpg(self.job(run).pid, signal.SIGKILL)  # the runner leads its group
            deadline = time.monotonic() + KILL_WAIT_S
            while self._alive(run):
                if time.monotonic() > deadline:
                    raise UserError(f"the job of run {run.id} survived KILL")
                time.sleep(0.05)
        (where / layout.CANCELLED).touch()
        return CANCELLED

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        return collect_directory(Path(self.job(run).directory), dest, artifacts)

    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        data = _read(Path(self.job(run).directory) / layout.JOB_LOG, offset)
        return LogChunk(data, offset + len(data))


def create(name: str, target: SpoolTarget, project: Project, run: RunRecord | None) -> Executor:
    return SpoolExecutor(name, target, project.env)


plugin = ExecutorHooks(SpoolExecutor, targets={"spool": SpoolTarget}, create=create)
