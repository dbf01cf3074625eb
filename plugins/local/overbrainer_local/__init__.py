"""The ``local`` target: training on this machine, natively or in a container."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel

from overbrainer import hookimpl
from overbrainer.config.model import HostTarget


class LocalTarget(HostTarget):
    """``[targets.NAME]`` with ``kind = "local"``."""

    kind: Literal["local"]


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("local", LocalTarget)
