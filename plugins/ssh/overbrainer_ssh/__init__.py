"""The ``ssh`` target: training on a machine reached over SSH, with fabric.

fabric (and paramiko) are imported only when a target of this kind is used: the
transport lives in :mod:`overbrainer_ssh.host`, loaded by ``create_executor``. Another
plugin reaches a machine over SSH through :func:`open_host` only (its public face; the
import contracts forbid the rest of this package to other plugins).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from overbrainer.plugin import ExecutorHooks, Project, RemotePath, RunRecord, UserError
from overbrainer.plugin.host import Host, HostExecutor, HostTarget

DEFAULT_WORKDIR = "overbrainer"


class SshTarget(HostTarget):
    """``[targets.NAME]`` with ``kind = "ssh"``. ``host`` comes from the environment only."""

    kind: Literal["ssh"]
    host: str | None = None
    workdir: RemotePath = DEFAULT_WORKDIR
    ssh_client: Literal["openssh", "builtin"] = "openssh"
    """The reference tool's choice of client; here fabric serves both."""


def open_host(
    name: str, address: str, *, ssh_config: Path | None = None, connect: bool = True
) -> Host:
    """The machine ``address`` (an SSH config alias, ``user@host[:port]``) as a ``Host`` of
    the target ``name``, read with ``ssh_config`` instead of the user's SSH config when
    given (a machine made for one run); connected now when ``connect``, raising
    ``HostError`` with the reason when it cannot be. fabric is imported here."""
    from overbrainer_ssh.host import SshHost

    host = SshHost(name, address, ssh_config=ssh_config)
    if connect:
        host.open()
    return host


def create_executor(
    name: str, target: SshTarget, project: Project, run: RunRecord | None
) -> HostExecutor:
    """A ``HostExecutor`` over SSH: the core's built-in dispatcher serves its hooks."""
    if not target.host:
        raise UserError(
            f"targets.{name}.host is not set: set OVERBRAINER_TARGETS__{name.upper()}__HOST"
        )
    from overbrainer_ssh.host import SshHost

    host = SshHost(name, target.host)
    host.connect()
    return HostExecutor(name, target.host_runtime(), host, target.workdir, env=project.env)


plugin = ExecutorHooks(HostExecutor, targets={"ssh": SshTarget}, create=create_executor)
"""What the entry point names: the ``ssh`` kind and its executors."""
