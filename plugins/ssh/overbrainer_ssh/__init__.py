"""The ``ssh`` target: training on a machine reached over SSH, with fabric.

fabric (and paramiko) are imported only when a target of this kind is used.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from overbrainer import hookimpl
from overbrainer.config.model import HostTarget, RemotePath

DEFAULT_WORKDIR = "overbrainer"


class SshTarget(HostTarget):
    """``[targets.NAME]`` with ``kind = "ssh"``. ``host`` comes from the environment only."""

    kind: Literal["ssh"]
    host: str | None = None
    workdir: RemotePath = DEFAULT_WORKDIR


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("ssh", SshTarget)
