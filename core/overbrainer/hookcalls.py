"""Typed calls of the plugins' hooks: the only place the core touches pluggy's relay.

pluggy's relay takes and returns ``Any``, so a call site there is unchecked. Each method
here calls one hook with typed keyword arguments and gives its result its type, so mypy
checks every call the core makes (this module is checked with ``disallow_any_expr``:
the relay's untyped results are cast here and nowhere else).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

from overbrainer.errors import UserError
from overbrainer.job.interface import Executor

if TYPE_CHECKING:
    import pluggy
    from pydantic import BaseModel

    from overbrainer.config.model import Settings
    from overbrainer.config.sections import RegisterSection
    from overbrainer.cycles import CycleSummary
    from overbrainer.engines import Engine
    from overbrainer.job.record import JobHandle, RunRecord, RunState
    from overbrainer.job.serving import ServedModel, ServeHandle, ServeSpec, ServeState
    from overbrainer.job.shell import TargetShell
    from overbrainer.job.spec import (
        ArtifactSpec,
        JobPoll,
        JobSpec,
        JobStatus,
        LogChunk,
        MachineLogQuery,
        TargetInfo,
        TargetPrice,
    )
    from overbrainer.project import Project


class Hooks:
    """The hooks of one plugin manager, one typed method each (the hooks' own names and
    keywords: ``hookspecs`` documents them). An executor is an
    :class:`~overbrainer.job.interface.Executor`: ``create_executor`` refuses anything
    else, and the core's built-in dispatcher calls its methods."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._relay = pm.hook

    def register_targets(
        self, *, plugin: str, register: Callable[[str, type[BaseModel]], None]
    ) -> None:
        """The ``register_targets`` of the plugin named ``plugin`` alone, called as it is
        added, so that what it registers is known to be its own."""
        for impl in self._relay.register_targets.get_hookimpls():
            if impl.plugin_name == plugin:
                impl.function(register=register)

    def register_settings(self, *, plugin: str, register: RegisterSection) -> None:
        """The ``register_settings`` of the plugin named ``plugin`` alone (as above)."""
        for impl in self._relay.register_settings.get_hookimpls():
            if impl.plugin_name == plugin:
                impl.function(register=register)

    def register_engines(self, *, plugin: str, register: Callable[[Engine], None]) -> None:
        """The ``register_engines`` of the plugin named ``plugin`` alone (as above)."""
        for impl in self._relay.register_engines.get_hookimpls():
            if impl.plugin_name == plugin:
                impl.function(register=register)

    def create_executor(
        self, *, name: str, target: BaseModel, project: Project, run: RunRecord | None
    ) -> Executor | None:
        """The executor of the target ``name``; a ``UserError`` naming the target when its
        plugin made something that is not an ``Executor`` (a plugin older than this core)."""
        made = cast(
            "object",
            self._relay.create_executor(name=name, target=target, project=project, run=run),
        )
        if made is None or isinstance(made, Executor):
            return made
        raise UserError(
            f"target `{name}`: its plugin made a {type(made).__name__}, not an executor "
            "(overbrainer.plugin.Executor): update the plugin"
        )

    def describe_target(self, *, executor: Executor) -> TargetInfo | None:
        return cast("TargetInfo | None", self._relay.describe_target(executor=executor))

    def estimate_price(
        self, *, name: str, target: BaseModel, project: Project, serve: ServedModel | None = None
    ) -> TargetPrice | None:
        """The price of a run's machine on ``name``, or of a serve's (``serve``)."""
        return cast(
            "TargetPrice | None",
            self._relay.estimate_price(name=name, target=target, project=project, serve=serve),
        )

    def prepare_target(self, *, executor: Executor) -> None:
        self._relay.prepare_target(executor=executor)

    def claim_run_dir(self, *, executor: Executor, run_id: str) -> str | None:
        return cast("str | None", self._relay.claim_run_dir(executor=executor, run_id=run_id))

    def launch_job(self, *, executor: Executor, run: RunRecord, job: JobSpec) -> JobHandle | None:
        return cast("JobHandle | None", self._relay.launch_job(executor=executor, run=run, job=job))

    def poll_job(self, *, executor: Executor, run: RunRecord) -> JobPoll | None:
        return cast("JobPoll | None", self._relay.poll_job(executor=executor, run=run))

    def wait_for_job(self, *, executor: Executor, run: RunRecord, timeout: float) -> bool | None:
        return cast(
            "bool | None", self._relay.wait_for_job(executor=executor, run=run, timeout=timeout)
        )

    def request_snapshot(self, *, executor: Executor, run: RunRecord, reason: str) -> bool:
        """True once the job was asked; False when no plugin took the request."""
        asked = cast(
            "bool | None",
            self._relay.request_snapshot(executor=executor, run=run, reason=reason),
        )
        return asked is True

    def cancel_job(self, *, executor: Executor, run: RunRecord) -> JobStatus | None:
        return cast("JobStatus | None", self._relay.cancel_job(executor=executor, run=run))

    def collect_artifacts(
        self, *, executor: Executor, run: RunRecord, artifacts: ArtifactSpec, dest: Path
    ) -> list[str] | None:
        return cast(
            "list[str] | None",
            self._relay.collect_artifacts(
                executor=executor, run=run, artifacts=artifacts, dest=dest
            ),
        )

    def read_job_log(self, *, executor: Executor, run: RunRecord, offset: int) -> LogChunk | None:
        return cast(
            "LogChunk | None", self._relay.read_job_log(executor=executor, run=run, offset=offset)
        )

    def open_shell(
        self, *, executor: Executor, purpose: str, keep_machine: bool
    ) -> TargetShell | None:
        return cast(
            "TargetShell | None",
            self._relay.open_shell(executor=executor, purpose=purpose, keep_machine=keep_machine),
        )

    def start_serve(self, *, executor: Executor, spec: ServeSpec) -> ServeHandle | None:
        return cast("ServeHandle | None", self._relay.start_serve(executor=executor, spec=spec))

    def reach_serve(self, *, executor: Executor, handle: ServeHandle) -> str | None:
        return cast("str | None", self._relay.reach_serve(executor=executor, handle=handle))

    def serve_state(self, *, executor: Executor, handle: ServeHandle) -> ServeState | None:
        return cast("ServeState | None", self._relay.serve_state(executor=executor, handle=handle))

    def stop_serve(
        self, *, executor: Executor, handle: ServeHandle, keep_log: bool
    ) -> bool | None:
        return cast(
            "bool | None",
            self._relay.stop_serve(executor=executor, handle=handle, keep_log=keep_log),
        )

    def release_executor(
        self, *, executor: Executor, run: RunRecord | None, outcome: RunState | None
    ) -> None:
        self._relay.release_executor(executor=executor, run=run, outcome=outcome)

    def on_config_change(self, *, old: Settings, new: Settings, changed_keys: list[str]) -> None:
        self._relay.on_config_change(old=old, new=new, changed_keys=changed_keys)

    def on_cycle_end(self, *, summary: CycleSummary) -> None:
        self._relay.on_cycle_end(summary=summary)

    def register_commands(self, *, register: Callable[[object], None]) -> None:
        self._relay.register_commands(register=register)

    def show_machine_log(
        self, *, project: Project, run: RunRecord, query: MachineLogQuery
    ) -> bool:
        """Whether a plugin printed the log: it answered True (no other answer counts)."""
        answer = cast(object, self._relay.show_machine_log(project=project, run=run, query=query))
        return answer is True
