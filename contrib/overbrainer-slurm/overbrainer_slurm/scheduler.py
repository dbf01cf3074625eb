"""Slurm's commands as the executor uses them: submit, show one job, cancel it.

No accounting database is needed: a job is followed with ``scontrol show job`` while the
controller remembers it (``MinJobAge``, five minutes by default, after its end), and by the
runner's own files in the spool afterwards.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from overbrainer.plugin import TransientError, UserError
from overbrainer_slurm.transport import Commands, Completed

ACTIVE = frozenset(
    {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
     "SIGNALING", "STAGE_OUT", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "STOPPED"}
)  # fmt: skip
"""Job states in which the job may still run (or start): everything else is an end."""

JOB_ID = re.compile(r"^\d+(_\d+)?$")
FIELD = re.compile(r"(?:^|\s)(JobState|Reason|ExitCode|JobName)=(\S*)")


@dataclass(frozen=True)
class SlurmState:
    """What ``scontrol show job`` says of one job."""

    state: str
    reason: str = "None"
    exit_code: int = 0
    signal: int = 0
    name: str = ""
    """The job's name (``overbrainer-<run id>`` for a run's)."""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

    def describe(self) -> str:
        """The state as ``squeue`` users read it, with its reason when there is one."""
        if self.reason and self.reason != "None":
            return f"{self.state} ({self.reason})"
        return self.state


def _last_line(done: Completed) -> str:
    lines = [line.strip() for line in (done.err or done.out).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.code}"


@dataclass
class Slurm:
    """The cluster of the target ``name``, reached through ``commands``."""

    name: str
    commands: Commands

    def submit(self, options: list[str], script: str) -> str:
        """Submit ``script`` (read by sbatch from its input); the job's id."""
        done = self.commands.run(["sbatch", "--parsable", *options], input=script)
        if done.code != 0:
            raise UserError(f"target `{self.name}`: sbatch refused the job: {_last_line(done)}")
        job_id = done.out.strip().split(";", 1)[0]
        if not JOB_ID.match(job_id):
            raise UserError(
                f"target `{self.name}`: sbatch answered no job id: {done.out.strip()[:200]!r}"
            )
        return job_id

    def show(self, job_id: str) -> SlurmState | None:
        """The job's state, or None when the controller no longer knows it."""
        done = self.commands.run(["scontrol", "show", "job", "-o", job_id])
        if done.code != 0:
            if "Invalid job id" in done.err:
                return None
            raise TransientError(
                f"target `{self.name}`: scontrol on {self.commands.where}: {_last_line(done)}"
            )
        fields = dict(FIELD.findall(done.out))
        if "JobState" not in fields:
            return None
        code, _, signal = fields.get("ExitCode", "0:0").partition(":")
        return SlurmState(
            state=fields["JobState"],
            reason=fields.get("Reason", "None"),
            exit_code=int(code) if code.isdigit() else 0,
            signal=int(signal) if signal.isdigit() else 0,
            name=fields.get("JobName", ""),
        )

    def kill(self, job_id: str, name: str) -> None:
        """SIGKILL to every process of every step of a running job, batch shell included:
        Slurm's plain cancel would send TERM and wait ``KillWait`` before its KILL. Only a
        job of this user named ``name`` (scancel's filters: another job is left alone)."""
        self.commands.run(["scancel", "--signal=KILL", "--full", "--me", f"--name={name}", job_id])

    def cancel(self, job_id: str, name: str) -> None:
        """Slurm's cancel: a queued job is removed before it starts; a running one ends.
        Only a job of this user named ``name``."""
        done = self.commands.run(["scancel", "--me", f"--name={name}", job_id])
        if done.code != 0 and "Invalid job id" not in done.err:
            raise TransientError(
                f"target `{self.name}`: scancel on {self.commands.where}: {_last_line(done)}"
            )
