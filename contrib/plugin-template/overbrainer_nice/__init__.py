"""A template target plugin: train on this machine, the job niced and ioniced.

Copy this package to write a target of your own. A target on a POSIX host needs two hooks:
``register_targets`` (the kind and the model of its ``[targets.NAME]`` table) and
``create_executor`` (a ``HostExecutor`` over a ``Host`` that reaches the machine). The core
does the rest: preparation, claim, spawn of the job's runner, status, snapshot, cancel,
verified retrieval, logs. It imports only ``overbrainer.plugin``. A target that is not a
POSIX host (a Slurm cluster, Kubernetes) implements the other hooks itself instead:
``contrib/executor-template`` shows how.

    [targets.background]
    kind = "nice"
    niceness = 15
    venv = "~/axolotl-venv"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

from overbrainer.plugin import Project, RunRecord, hookimpl
from overbrainer.plugin.host import HostExecutor, HostTarget, LocalHost


class NiceTarget(HostTarget):
    """``[targets.NAME]`` with ``kind = "nice"``: every key of a host target, plus how nice."""

    kind: Literal["nice"]
    niceness: int = Field(default=10, ge=0, le=19)


class NiceHost(LocalHost):
    """This machine, starting jobs under ``nice`` and ``ionice`` (idle class)."""

    def __init__(self, env: Mapping[str, str], niceness: int) -> None:
        super().__init__(env)
        self.niceness = niceness

    def spawn(self, script: str, cwd: str, log: str, secrets: Mapping[str, str]) -> None:
        # The wrapper stays the group leader; everything it starts inherits the priority.
        lowered = f"renice -n {self.niceness} -p $$ >/dev/null; ionice -c 3 -p $$ 2>/dev/null; "
        super().spawn(lowered + script, cwd, log, secrets)


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("nice", NiceTarget)


@hookimpl
def create_executor(
    name: str, target: BaseModel, project: Project, run: RunRecord | None
) -> HostExecutor | None:
    if not isinstance(target, NiceTarget):
        return None  # not ours: another plugin's kind
    host = NiceHost(project.env, target.niceness)
    runs = str(project.runs_dir.resolve())
    return HostExecutor(
        name,
        target.host_runtime(),
        host,
        runs,
        setup_dir=str(project.dir.resolve()),
        env=project.env,
    )
