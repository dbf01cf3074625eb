"""The ``local`` target: training on this machine, natively or in a container.

Runs live in the project's ``runs/`` directory itself unless ``workdir`` says otherwise,
so nothing is copied and the job's files are home as soon as they are written.
"""

from __future__ import annotations

from typing import Literal

from overbrainer.plugin import ExecutorHooks, Project, RemotePath, RunRecord
from overbrainer.plugin.host import HostExecutor, HostTarget, LocalHost


class LocalTarget(HostTarget):
    """``[targets.NAME]`` with ``kind = "local"``. ``workdir``: where run directories
    live on this machine (default: the project's ``runs/``)."""

    kind: Literal["local"]
    workdir: RemotePath | None = None


def create_executor(
    name: str, target: LocalTarget, project: Project, run: RunRecord | None
) -> HostExecutor:
    """A ``HostExecutor`` on this machine: the core's built-in dispatcher serves its hooks."""
    workdir = target.workdir or str(project.runs_dir.resolve())
    return HostExecutor(
        name,
        target.host_runtime(),
        LocalHost(project.env),
        workdir,
        setup_dir=str(project.dir.resolve()),
        env=project.env,
    )


plugin = ExecutorHooks(HostExecutor, targets={"local": LocalTarget}, create=create_executor)
"""What the entry point names: the ``local`` kind and its executors."""
