"""A job directory this machine can read and write (a spool, shared storage): the files the
runner and the core exchange through it, read and written the same way by every target
that keeps its jobs in one (the spool template, Ray, Slurm), so that a fix to how a torn
metrics line or a secrets file is handled lands in one place."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from overbrainer.job import layout
from overbrainer.job.manifest import collect_directory
from overbrainer.job.metrics import complete_lines
from overbrainer.job.spec import CANCELLED, ArtifactSpec, JobPoll, JobSpec, JobStatus, LogChunk

CAP = 1 << 20
"""The most bytes of metrics or log one call reads."""
SNAPSHOT_CAP = (64 << 10) + 1  # one byte past the runner's cap: a larger file is refused
MACHINE_CAP = 64 << 10


@dataclass
class JobDirectory:
    """The job directory ``path`` (the run's ``remote_dir``)."""

    path: Path

    def fill(self, job: JobSpec) -> Path:
        """The job's files copied in (what stays at home left out), its secrets as a 0600
        file when it has any; the secrets file's path, for a launch that fails to remove."""
        ignore = shutil.ignore_patterns(*layout.HOME_ONLY)
        shutil.copytree(job.local_dir, self.path, dirs_exist_ok=True, ignore=ignore)
        secrets = self.path / layout.SECRETS_FILE
        if job.secrets:
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            with os.fdopen(os.open(secrets, flags, 0o600), "wb") as file:
                file.write(job.secrets_file())
        return secrets

    def read(self, name: str, offset: int = 0, length: int = CAP) -> bytes:
        """Up to ``length`` bytes of the file ``name`` from ``offset``; none when absent."""
        try:
            with (self.path / name).open("rb") as file:
                file.seek(offset)
                return file.read(length)
        except FileNotFoundError:
            return b""

    def exit_code(self) -> int | None:
        """The runner's exit code, once it wrote one (a torn or odd file: none yet)."""
        text = self.read(layout.EXIT_CODE, 0, 64).decode("ascii", "replace").strip()
        try:
            return int(text) if text else None
        except ValueError:
            return None

    def ended(self) -> JobStatus | None:
        """The job's end as its files tell it (cancelled, or the runner's exit code); None
        while they tell nothing, for the scheduler to say."""
        if (self.path / layout.CANCELLED).exists():
            return CANCELLED
        code = self.exit_code()
        return JobStatus.exited(code) if code is not None else None

    def mark(self, name: str) -> None:
        """A marker file (``layout.CANCELLED``, ``layout.CANCELLING``)."""
        (self.path / name).touch()

    def poll(self, status: JobStatus, offset: int) -> tuple[JobPoll, int]:
        """What the runner wrote, its metrics from ``offset`` (complete lines only), with
        ``status`` (found by the caller before reading: no line is missed at the end); and
        the offset the next poll goes on from."""
        chunk = self.read(layout.METRICS_FILE, offset)
        lines, used = complete_lines(chunk, capped=len(chunk) >= CAP)
        request = self.read(layout.SNAPSHOT_REQUEST, 0, 64).decode("ascii", "replace").strip()
        snapshot = self.read(layout.SNAPSHOT_FILE, 0, SNAPSHOT_CAP)
        machine = self.read(layout.MACHINE_FILE, 0, MACHINE_CAP)  # the runner's gauges
        found = JobPoll(
            status,
            tuple(lines),
            snapshot_request=request or None,
            snapshot=snapshot.decode("utf-8", "replace") if snapshot else None,
            machine=machine.decode("utf-8", "replace") if machine else None,
        )
        return found, offset + used

    def request_snapshot(self, reason: str) -> None:
        """The request the runner reads at its next step, written whole or not at all."""
        request = self.path / layout.SNAPSHOT_REQUEST
        temporary = request.with_name(f"{request.name}.tmp.{os.getpid()}")
        temporary.write_text(reason + "\n", encoding="utf-8")
        temporary.replace(request)

    def forget_secrets(self) -> None:
        """The secrets file of a job that ended before its runner read (and deleted) it."""
        (self.path / layout.SECRETS_FILE).unlink(missing_ok=True)

    def read_log(self, offset: int) -> LogChunk:
        data = self.read(layout.JOB_LOG, offset)
        return LogChunk(data, offset + len(data))

    def collect(self, dest: Path, artifacts: ArtifactSpec) -> list[str]:
        return collect_directory(self.path, dest, artifacts)
