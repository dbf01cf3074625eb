"""How Axolotl runs on a POSIX host: what ``HostExecutor`` reads of its target's settings.

A ``HostTarget`` (``local``, ``ssh``, a third party's machine) carries these keys itself.
A target with settings of its own that drives the job protocol on a machine it makes for
the run gives a ``HostRuntime`` instead, so that no target builds another kind's settings
to reuse the host executor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class HostRuntime:
    """The runtime keys of a ``HostTarget``, with its defaults; ``device`` is what the
    machine is known to have (``gpu`` for a pod made with one)."""

    runtime: Literal["native", "docker"] = "native"
    engine: Literal["docker", "podman"] | None = None
    image: str | None = None
    venv: str | None = None
    device: Literal["auto", "gpu", "cpu"] = "auto"
    install: str | None = None
    setup: str | None = None
    pass_env: tuple[str, ...] = ()
