"""The executor template: ``kind = "spool"`` runs each job on this machine from a spool
directory with files and a process, the way a scheduler plugin talks to its API (submit,
status, logs, stop): replace those calls with your scheduler's and keep the rest. It
imports only ``overbrainer.plugin``; its entry point names ``plugin``, at the end.
"""

from __future__ import annotations

import os
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
    ArtifactSpec, Executor, ExecutorHooks, JobDirectory, JobHandle, JobPoll, JobSpec, JobState,
    JobStatus, LogChunk, Project, RemotePath, RunRecord, SecretsChannel, TargetBase, TargetInfo,
    UserError, layout,
)  # fmt: skip
# isort: on

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

    def files(self, run: RunRecord) -> JobDirectory:
        """The job's directory: the files the runner and the core exchange."""
        return JobDirectory(Path(self.job(run).directory))

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
        JobDirectory(where).fill(job)  # the job's files, its secrets as a 0600 file
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

    def _status(self, run: RunRecord) -> JobStatus:
        # The runner's files first (cancelled, its exit code), then your scheduler's word.
        ended = self.files(run).ended()
        if ended is not None:
            return ended
        return JobStatus(JobState.RUNNING if self._alive(run) else JobState.LOST)

    def poll(self, run: RunRecord) -> JobPoll:
        status = self._status(run)  # before the metrics: no line is missed at the end
        found, self.offsets[run.id] = self.files(run).poll(status, self.offsets.get(run.id, 0))
        return found

    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        # Or send the runner SIGTERM (a scheduler's graceful stop): it writes this request.
        self.files(run).request_snapshot(reason)

    def cancel(self, run: RunRecord) -> JobStatus:
        status = self._status(run)
        if status.state in (JobState.EXITED, JobState.CANCELLED):
            return status  # a finished job is never signalled
        if self._alive(run):
            os.killpg(self.job(run).pid, signal.SIGKILL)  # the runner leads its group
            deadline = time.monotonic() + KILL_WAIT_S
            while self._alive(run):
                if time.monotonic() > deadline:
                    raise UserError(f"the job of run {run.id} survived KILL")
                time.sleep(0.05)
        self.files(run).mark(layout.CANCELLED)
        return JobStatus(JobState.CANCELLED)

    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        return self.files(run).collect(dest, artifacts)

    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        return self.files(run).read_log(offset)


def create(name: str, target: SpoolTarget, project: Project, run: RunRecord | None) -> Executor:
    return SpoolExecutor(name, target, project.env)


plugin = ExecutorHooks(SpoolExecutor, targets={"spool": SpoolTarget}, create=create)
