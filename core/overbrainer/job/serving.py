"""A long-lived process served on a target (an engine), as the executor contract sees it.

The core asks an executor with the capability ``"serve"`` to start a command (an engine's
argv, made once the port is known) beside a watchdog (:mod:`overbrainer.job.serve_watchdog`)
that ends it after ``idle_seconds`` without a connection; it records the handle, reaches
the port through the target's transport, and ends it. The scripts here serve any POSIX
host (``HostExecutor``): ``sh``, ``python3`` and ``/proc``.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

q = shlex.quote

WATCHDOG = "watchdog.py"
PID_FILE = "watchdog.pid"
LOG_FILE = "serve.log"
GRACE_S = 10
"""How long TERM has before KILL, for the engine to free its GPUs."""

NOT_OURS = 3
"""``stop_script``'s exit status when the pid is not this serve's watchdog."""


@dataclass(frozen=True)
class ServeSpec:
    """What ``start_serve`` starts."""

    serve_id: str
    """Unique on the target: names its directory there (``.serve/ID`` of the work directory)."""
    command: Callable[[int, str], list[str]]
    """The argv for a port on the target's loopback and the directory of the target
    runtime's programs (``VENV/bin/``, or ``""`` for PATH)."""
    idle_seconds: int
    """The watchdog ends the process after this long without a connection to its port."""
    port: int | None = None
    """The port on the target; None: a free one, chosen there."""


@dataclass(frozen=True)
class ServeHandle:
    """A started serve, as its record keeps it (the same fields on disk)."""

    serve_id: str
    dir: str
    """Its directory on the target: the watchdog, its pid file and the log."""
    pid: int
    """The watchdog's pid, which is its process group: the engine's too."""
    port: int
    """The port on the target's loopback."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServeHandle:
        """The handle a record holds; ``ValueError`` for one that is not valid."""
        try:
            handle = cls(
                serve_id=str(data["serve_id"]), dir=str(data["dir"]), pid=int(data["pid"]),
                port=int(data["port"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a serve handle: {error}") from None
        if handle.pid <= 1 or not 0 < handle.port < 65536 or not handle.dir.startswith("/"):
            raise ValueError("not a serve handle: pid, port or directory out of range")
        return handle


def watchdog_source() -> bytes:
    """The watchdog that travels to the target beside the engine."""
    return resources.files("overbrainer.job").joinpath("serve_watchdog.py").read_bytes()


def free_port_script() -> str:
    """Print a port free on the host's loopback (the kernel's choice)."""
    code = "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
    return f"exec python3 -c {q(code)}\n"


def launch_script(handle_dir: str, port: int, idle_seconds: int, argv: list[str]) -> str:
    """The watchdog, started in the serve's directory; it runs ``argv`` in its group."""
    words = " ".join(q(arg) for arg in argv)
    return (
        f"exec python3 {q(handle_dir + '/' + WATCHDOG)} --port {port} "
        f"--idle {idle_seconds} --pid-file {q(handle_dir + '/' + PID_FILE)} -- {words}\n"
    )


_OURS = """\
ours() {{
  [ -r "/proc/$1/cmdline" ] && tr '\\0' ' ' < "/proc/$1/cmdline" | grep -qF -- {mark}
}}
"""


def alive_script(handle: ServeHandle) -> str:
    """Print ``up`` when the watchdog of ``handle`` runs (its pid runs its script), else
    ``gone``."""
    mark = q(f"{handle.dir}/{WATCHDOG}")
    return _OURS.format(mark=mark) + f"if ours {handle.pid}; then echo up; else echo gone; fi\n"


def stop_script(handle: ServeHandle) -> str:
    """TERM the group of the watchdog, KILL what is left after ``GRACE_S``; print
    ``stopped`` or ``gone``. A pid that does not run this serve's watchdog is never
    signalled (exit ``NOT_OURS`` when its group is alive anyway)."""
    mark = q(f"{handle.dir}/{WATCHDOG}")
    pid = handle.pid
    return (
        _OURS.format(mark=mark)
        + f"""\
if ! ours {pid}; then echo gone; exit 0; fi
kill -TERM -{pid} 2>/dev/null
i=0
while kill -0 -{pid} 2>/dev/null && [ $i -lt {GRACE_S * 10} ]; do sleep 0.1; i=$((i+1)); done
kill -KILL -{pid} 2>/dev/null
i=0
while kill -0 -{pid} 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
echo stopped
"""
    )
