"""The executor as an object: the operations a target implements, one method each.

A plugin subclasses :class:`Executor` and hands the class to
:class:`~overbrainer.job.adapter.ExecutorHooks`, which turns it into the hook
implementations of :mod:`overbrainer.hookspecs`: the core calls the hooks, the hooks call
these methods, and no plugin writes a hook that must first ask whose executor it got.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from overbrainer.job.record import JobHandle, RunRecord, RunState
    from overbrainer.job.shell import TargetShell
    from overbrainer.job.spec import ArtifactSpec, JobPoll, JobSpec, JobStatus, LogChunk, TargetInfo


class Executor(ABC):
    """One target reached for one command: each method is the hook of the same purpose
    (``docs/plugins.md`` gives what each must guarantee).

    The abstract methods are the job's life; the others have a default that does nothing.
    """

    @abstractmethod
    def describe(self) -> TargetInfo:
        """``describe_target``: the device, whether the job sees this machine's files,
        whether the machine is made for one run, the secrets' channel."""

    def prepare(self) -> None:
        """``prepare_target``: make the target ready for a new run (install, set up)."""
        return

    @abstractmethod
    def claim(self, run_id: str) -> str:
        """``claim_run_dir``: reserve ``run_id`` and say where its job lives; ``""`` when
        another owner holds that id."""

    @abstractmethod
    def launch(self, run: RunRecord, job: JobSpec) -> JobHandle:
        """``launch_job``: copy the job directory and start ``job.command()``, detached."""

    @abstractmethod
    def poll(self, run: RunRecord) -> JobPoll:
        """``poll_job``: the job's status and what it wrote since the previous poll."""

    def wait(self, run: RunRecord, timeout: float) -> bool | None:
        """``wait_for_job``: True when the job changed state within ``timeout`` seconds,
        False at the timeout, None when this target cannot tell (the core then sleeps)."""
        return None

    @abstractmethod
    def request_snapshot(self, run: RunRecord, reason: str) -> None:
        """``request_snapshot``: ask the job to save a checkpoint and stop."""

    @abstractmethod
    def cancel(self, run: RunRecord) -> JobStatus:
        """``cancel_job``: stop the job now; the status it ended with."""

    @abstractmethod
    def collect(self, run: RunRecord, artifacts: ArtifactSpec, dest: Path) -> list[str]:
        """``collect_artifacts``: bring ``artifacts`` home into ``dest``, verified."""

    @abstractmethod
    def read_log(self, run: RunRecord, offset: int) -> LogChunk:
        """``read_job_log``: the job's log from byte ``offset``."""

    def open_shell(self, purpose: str, keep_machine: bool) -> TargetShell | None:
        """``open_shell``: a shell for the commands after training; None when the target
        cannot give one."""
        return None

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        """``release_executor``: close what this executor holds."""
        return
