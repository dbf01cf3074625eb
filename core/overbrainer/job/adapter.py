"""The adapter from executor classes to hook implementations.

A plugin whose executors subclass :class:`~overbrainer.job.interface.Executor` registers
one :class:`ExecutorHooks` object (its entry point names it) instead of writing hooks:
the object registers the plugin's target kinds, creates an executor for a target of one
of them, and answers every executor hook for an executor of exactly one of its classes by
calling that executor's method. For any other executor each hook answers None, so raw-hook
plugins and adapted ones live side by side.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel

from overbrainer import hookimpl
from overbrainer.job.interface import Executor

if TYPE_CHECKING:  # annotations only: the plugin manager is made before any job is in sight
    from overbrainer.job.record import JobHandle, RunRecord, RunState
    from overbrainer.job.shell import TargetShell
    from overbrainer.job.spec import (
        ArtifactSpec,
        JobPoll,
        JobSpec,
        JobStatus,
        LogChunk,
        TargetInfo,
        TargetPrice,
    )
    from overbrainer.project import Project

T = TypeVar("T", bound=BaseModel)

OPERATIONS = (
    "describe_target",
    "prepare_target",
    "claim_run_dir",
    "launch_job",
    "poll_job",
    "wait_for_job",
    "request_snapshot",
    "cancel_job",
    "collect_artifacts",
    "read_job_log",
    "open_shell",
    "release_executor",
)
"""The hooks an adapter answers for its executors."""

OPTIONAL = {
    "prepare_target": "prepare",
    "wait_for_job": "wait",
    "open_shell": "open_shell",
    "release_executor": "release",
}
"""The hooks whose ``Executor`` method has a default: implemented only where a class
overrides it, so that ``overbrainer plugins`` lists what the plugin really does."""


class ExecutorHooks(Generic[T]):
    """The hook implementations of a plugin written as classes.

    Args:
        executors: the classes whose instances these hooks serve; an instance of a
            subclass is served by the adapter that names that subclass. A class may be
            named ``"module:Class"``: it is looked for only once that module is loaded,
            so a plugin imports its executor's module when it first creates one.
        targets: the target kinds to register, each with its settings model.
        create: builds the executor for a target of one of those kinds (``name``, its
            validated table, the project, and the run record of a later command).
        price: ``estimate_price`` for a target of those kinds.
        trylast: answer after every other plugin (the core's built-in one does).

    Only the hooks given something to do are implemented (an optional method, one the
    classes override), so ``overbrainer plugins`` lists what the plugin really provides.
    ``release_executor`` also takes the ``outcome`` of a raw caller as a plain string and
    hands the executor its ``RunState``.
    """

    def __init__(
        self,
        *executors: type[Executor] | str,
        targets: Mapping[str, type[T]] | None = None,
        create: Callable[[str, T, Project, RunRecord | None], Executor] | None = None,
        price: Callable[[str, T, Project], TargetPrice | None] | None = None,
        trylast: bool = False,
    ) -> None:
        self._executors = executors
        self._targets = dict(targets or {})
        if self._targets and create is None:
            raise TypeError("ExecutorHooks: targets need a create function")
        models = tuple(self._targets.values())

        def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
            for kind, model in self._targets.items():
                register(kind, model)

        def create_executor(
            name: str, target: BaseModel, project: Project, run: RunRecord | None
        ) -> Executor | None:
            if create is None or not isinstance(target, models):
                return None
            return create(name, target, project, run)

        def estimate_price(name: str, target: BaseModel, project: Project) -> TargetPrice | None:
            if price is None or not isinstance(target, models):
                return None
            return price(name, target, project)

        mark = hookimpl(trylast=trylast)
        if self._targets:
            self.register_targets = mark(register_targets)
            self.create_executor = mark(create_executor)
        if price is not None:
            self.estimate_price = mark(estimate_price)
        for name in OPERATIONS if executors else ():
            if name in OPTIONAL and not any(_overrides(cls, OPTIONAL[name]) for cls in executors):
                continue
            setattr(self, name, mark(_function(getattr(self, "_" + name))))

    def _mine(self, executor: object) -> Executor | None:
        kind = type(executor)
        for served in self._executors:
            if served is kind or (isinstance(served, str) and _named(served) is kind):
                return executor  # type: ignore[return-value]
        return None

    def _describe_target(self, executor: object) -> TargetInfo | None:
        return mine.describe() if (mine := self._mine(executor)) else None

    def _prepare_target(self, executor: object) -> None:
        if mine := self._mine(executor):
            mine.prepare()

    def _claim_run_dir(self, executor: object, run_id: str) -> str | None:
        return mine.claim(run_id) if (mine := self._mine(executor)) else None

    def _launch_job(self, executor: object, run: RunRecord, job: JobSpec) -> JobHandle | None:
        return mine.launch(run, job) if (mine := self._mine(executor)) else None

    def _poll_job(self, executor: object, run: RunRecord) -> JobPoll | None:
        return mine.poll(run) if (mine := self._mine(executor)) else None

    def _wait_for_job(self, executor: object, run: RunRecord, timeout: float) -> bool | None:
        return mine.wait(run, timeout) if (mine := self._mine(executor)) else None

    def _request_snapshot(self, executor: object, run: RunRecord, reason: str) -> bool | None:
        if not (mine := self._mine(executor)):
            return None
        mine.request_snapshot(run, reason)
        return True

    def _cancel_job(self, executor: object, run: RunRecord) -> JobStatus | None:
        return mine.cancel(run) if (mine := self._mine(executor)) else None

    def _collect_artifacts(
        self, executor: object, run: RunRecord, artifacts: ArtifactSpec, dest: Path
    ) -> list[str] | None:
        return mine.collect(run, artifacts, dest) if (mine := self._mine(executor)) else None

    def _read_job_log(self, executor: object, run: RunRecord, offset: int) -> LogChunk | None:
        return mine.read_log(run, offset) if (mine := self._mine(executor)) else None

    def _open_shell(self, executor: object, purpose: str, keep_machine: bool) -> TargetShell | None:
        return mine.open_shell(purpose, keep_machine) if (mine := self._mine(executor)) else None

    def _release_executor(
        self, executor: object, run: RunRecord | None, outcome: RunState | str | None
    ) -> None:
        if mine := self._mine(executor):
            from overbrainer.job.record import RunState

            mine.release(run, None if outcome is None else RunState(outcome))

    def __repr__(self) -> str:
        names = ", ".join(
            served if isinstance(served, str) else served.__name__ for served in self._executors
        )
        names = names or "no executor"
        kinds = ", ".join(self._targets) or "no kind"
        return f"ExecutorHooks({names}; {kinds})"


def _overrides(served: type[Executor] | str, method: str) -> bool:
    """Whether ``served`` has its own ``method`` (a class not loaded yet may have)."""
    if isinstance(served, str):
        return True
    return getattr(served, method) is not getattr(Executor, method)


def _named(path: str) -> type | None:
    """The class ``module:Class`` when its module is loaded, else None."""
    module, _, name = path.partition(":")
    loaded = sys.modules.get(module)
    found = getattr(loaded, name, None) if loaded is not None else None
    return found if isinstance(found, type) else None


def _function(method: Callable[..., object]) -> Callable[..., object]:
    """``method`` as a plain function of the same parameters: pluggy marks functions, and
    reads the parameters' names through ``__wrapped__``."""

    @functools.wraps(method)
    def call(*args: object, **kwargs: object) -> object:
        return method(*args, **kwargs)

    return call
