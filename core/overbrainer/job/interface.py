"""The executor as an object: the operations a target implements, one method each.

A plugin subclasses :class:`Executor` and returns its instances from ``create_executor``;
the core's built-in dispatcher (:mod:`overbrainer.job.hooks`) answers every operation hook
of :mod:`overbrainer.hookspecs` for any ``Executor`` by calling its method, so no plugin
writes a hook that must first ask whose executor it got.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from overbrainer.job.serving import ServeState

if TYPE_CHECKING:
    from pathlib import Path

    from overbrainer.job.record import JobHandle, RunRecord, RunState
    from overbrainer.job.serving import ServeHandle, ServeSpec, ServeState
    from overbrainer.job.shell import TargetShell
    from overbrainer.job.spec import ArtifactSpec, JobPoll, JobSpec, JobStatus, LogChunk, TargetInfo


OPTIONAL = frozenset({"prepare", "wait", "open_shell", "release", "serve"})
"""The methods an executor offers only by declaring them in its ``capabilities``."""


class Executor(ABC):
    """One target reached for one command: each method is the hook of the same purpose
    (``docs/plugins.md`` gives what each must guarantee).

    The abstract methods are the job's life. The optional ones (:data:`OPTIONAL`) are
    called only when the class names them in ``capabilities``; a class that overrides one
    declares it, and declares only what it overrides (checked when the class is made), so
    the declaration is what ``overbrainer plugins`` shows and what the core relies on.
    """

    capabilities: ClassVar[frozenset[str]] = frozenset()
    """The optional operations this class offers (``"prepare"``, ``"wait"``,
    ``"open_shell"``, ``"release"``, ``"serve"``: ``serve``, ``reach`` and ``end_serve``);
    a subclass inherits its parent's."""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        unknown = sorted(cls.capabilities - OPTIONAL)
        if unknown:
            raise TypeError(
                f"{cls.__qualname__}.capabilities: unknown operation {', '.join(unknown)} "
                f"(the optional ones are {', '.join(sorted(OPTIONAL))})"
            )
        own = {
            "prepare": cls.prepare is not Executor.prepare,
            "wait": cls.wait is not Executor.wait,
            "open_shell": cls.open_shell is not Executor.open_shell,
            "release": cls.release is not Executor.release,
            "serve": cls.serve is not Executor.serve
            and cls.reach is not Executor.reach
            and cls.end_serve is not Executor.end_serve,
        }
        for name, overridden in sorted(own.items()):
            if overridden and name not in cls.capabilities:
                raise TypeError(
                    f"{cls.__qualname__} overrides {name}() without declaring it: add "
                    f"{name!r} to its capabilities, or the core never calls it"
                )
            if name in cls.capabilities and not overridden:
                raise TypeError(
                    f"{cls.__qualname__}.capabilities declares {name!r} but the class has "
                    f"no {name}() of its own"
                )

    @abstractmethod
    def describe(self) -> TargetInfo:
        """``describe_target``: the device, whether the job sees this machine's files,
        whether the machine is made for one run, the secrets' channel."""

    def prepare(self) -> None:
        """``prepare_target``: make the target ready for a new run (install, set up).
        Optional: capability ``"prepare"``."""
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
        False at the timeout, None when this target cannot tell (the core then sleeps).
        Optional: capability ``"wait"``."""
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
        cannot give one. Optional: capability ``"open_shell"``."""
        return None

    def serve(self, spec: ServeSpec) -> ServeHandle:
        """``start_serve``: start ``spec.argv`` detached under its idle watchdog, listening
        on the target's loopback. Optional: capability ``"serve"`` (with ``reach`` and
        ``end_serve``)."""
        raise NotImplementedError

    def reach(self, handle: ServeHandle) -> str:
        """``reach_serve``: a local base URL reaching the served port; ``""`` when the
        process is gone. Optional: capability ``"serve"``."""
        raise NotImplementedError

    def serve_state(self, handle: ServeHandle) -> ServeState:
        """``serve_state``: whether the served process runs, and under its watchdog. This
        default knows no watchdog apart: ``UP`` while ``reach`` gives a URL."""
        return ServeState.UP if self.reach(handle) else ServeState.GONE

    def end_serve(self, handle: ServeHandle, keep_log: bool) -> bool:
        """``stop_serve``: end the served process and its watchdog, remove its files (its
        log kept when ``keep_log``); whether it was running. Optional: capability
        ``"serve"``."""
        raise NotImplementedError

    def release(self, run: RunRecord | None, outcome: RunState | None) -> None:
        """``release_executor``: close what this executor holds. Optional: capability
        ``"release"``."""
        return
