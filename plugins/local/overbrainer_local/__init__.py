"""The ``local`` target: training on this machine, natively or in a container.

Runs live in the project's ``runs/`` directory itself unless ``workdir`` says otherwise,
so nothing is copied and the job's files are home as soon as they are written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from overbrainer.plugin import (
    HostExecutor,
    HostTarget,
    LocalHost,
    Project,
    RemotePath,
    RunRecord,
    hookimpl,
)


class LocalTarget(HostTarget):
    """``[targets.NAME]`` with ``kind = "local"``. ``workdir``: where run directories
    live on this machine (default: the project's ``runs/``)."""

    kind: Literal["local"]
    workdir: RemotePath | None = None


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("local", LocalTarget)


@hookimpl
def create_executor(
    name: str, target: BaseModel, project: Project, run: RunRecord | None
) -> HostExecutor | None:
    if not isinstance(target, LocalTarget):
        return None
    workdir = target.workdir or str(project.runs_dir.resolve())
    return HostExecutor(
        name,
        target,
        LocalHost(project.env),
        workdir,
        setup_dir=str(project.dir.resolve()),
        env=project.env,
    )
