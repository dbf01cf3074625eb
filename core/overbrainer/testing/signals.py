"""SIGTERM to a job's runner alone, or to every process of the job, as a scheduler's stop
sends it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from overbrainer.job.layout import RUNNER
from overbrainer.job.record import RunRecord


def runner_pid(pgid: int) -> int | None:
    """The runner process of the job whose process group is ``pgid``, on this machine."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and any(arg.endswith(RUNNER.encode()) for arg in cmdline):
            return int(stat.parent.name)
    return None


def runner_signaller(run: RunRecord) -> None:
    """Send SIGTERM to the runner of ``run``'s job (a POSIX host job on this machine)."""
    assert run.job is not None and run.job.pid is not None, "the run has no process group"
    pid = runner_pid(run.job.pid)
    assert pid is not None, f"no runner in process group {run.job.pid}"
    os.kill(pid, signal.SIGTERM)


def job_signaller(run: RunRecord) -> None:
    """Send SIGTERM to every process of ``run``'s job at once (its process group, a POSIX
    host job on this machine), as Slurm, systemd and Ray's stop_job do."""
    assert run.job is not None and run.job.pid is not None, "the run has no process group"
    os.killpg(run.job.pid, signal.SIGTERM)
