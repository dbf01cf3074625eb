"""A long-lived process served on a target (an engine), as the executor contract sees it.

The core asks an executor with the capability ``"serve"`` to start a command (an engine's
argv, made once the port is known) beside a watchdog (:mod:`overbrainer.job.target.serve_watchdog`)
that ends it after ``idle_seconds`` without a connection; it records the handle, reaches
the port through the target's transport, and ends it. The scripts here serve any POSIX
host (``HostExecutor``): ``sh``, ``python3`` and ``/proc``.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from importlib import resources
from typing import Any

from overbrainer.job.layout import TRAVELS

q = shlex.quote

WATCHDOG = "watchdog.py"
PID_FILE = "watchdog.pid"
LOG_FILE = "serve.log"
GRACE_S = 10
"""How long TERM has before KILL, for the engine to free its GPUs."""

@dataclass(frozen=True)
class ServedModel:
    """What a serve loads and the GPUs it asks for: what a target that makes a machine per
    serve (a Runpod pod) sizes it by, and ``estimate_price`` prices it by."""

    model: str
    """The served model (``serve.model``): a Hugging Face name, a local path, a GGUF file."""
    gpus: int | None = None
    """``serve.gpus``; None: the target's own count."""


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
    gpus: int | None = None
    """The GPUs the engine asks for (``serve.gpus``): a target that makes a machine per
    serve (a Runpod pod) makes one with as many; None: the target's own count."""
    model: str | None = None
    """The served model (``serve.model``), for a target that sizes the machine it makes
    for the serve by it; None: not said (an executor that needs no size)."""
    probe: Callable[[str], str] | None = None
    """A shell line, for the runtime's program directory, that fails where the engine is not
    installed: run on the target before the start, so a missing engine is said at once
    rather than found in its log (on a pod made for it, once paid for); None: no check."""
    install: str = ""
    """What to install where it is missing (the engine's pip requirement), for that message."""

    @property
    def served(self) -> ServedModel | None:
        """The model and GPUs of the serve, when the model is said."""
        return None if self.model is None else ServedModel(self.model, self.gpus)


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
    price_per_hour: float | None = None
    """What a machine made for this serve costs an hour (a pod's price, USD), for its
    history line and the budget; None: the target's ``price_per_hour`` setting."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.price_per_hour is None:
            del data["price_per_hour"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ServeHandle:
        """The handle a record holds; ``ValueError`` for one that is not valid."""
        try:
            price = data.get("price_per_hour")
            handle = cls(
                serve_id=str(data["serve_id"]), dir=str(data["dir"]), pid=int(data["pid"]),
                port=int(data["port"]), price_per_hour=None if price is None else float(price),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"not a serve handle: {error}") from None
        if handle.pid <= 1 or not 0 < handle.port < 65536 or not handle.dir.startswith("/"):
            raise ValueError("not a serve handle: pid, port or directory out of range")
        price = handle.price_per_hour
        if price is not None and not (math.isfinite(price) and price >= 0):
            raise ValueError("not a serve handle: price_per_hour is not a price")
        return handle


def watchdog_source() -> bytes:
    """The watchdog that travels to the target beside the engine."""
    return resources.files(TRAVELS).joinpath("serve_watchdog.py").read_bytes()


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


class ServeState(StrEnum):
    """Where a serve stands on its target, as ``state_script`` prints it."""

    UP = "up"
    """Its watchdog runs (and, under it, the engine)."""
    UNWATCHED = "unwatched"
    """Its watchdog is gone (``kill -9``) but its engine runs on: no idle limit ends it."""
    GONE = "gone"


_STATE = """\
import os, sys
pid, where, mark = int(sys.argv[1]), os.path.realpath(sys.argv[2]), sys.argv[3].encode()
def member(p):
    try:
        fields = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
        live = fields[0] != "Z" and int(fields[2]) == pid
        return live and os.readlink("/proc/%s/cwd" % p) == where
    except (OSError, IndexError, ValueError):
        return False
try:
    watchdog = mark in open("/proc/%d/cmdline" % pid, "rb").read().replace(b"\\0", b" ")
except OSError:
    watchdog = False
if watchdog and member(pid):
    print("up")
elif any(member(p) for p in os.listdir("/proc") if p.isdigit()):
    print("unwatched")
else:
    print("gone")
"""
"""The serve's state: its watchdog's pid running its script, else a live process of its
group (the pid stays its group's while one lives) working in its directory (the engine)."""


def _state(handle: ServeHandle) -> str:
    """The shell words that print ``handle``'s ``ServeState``."""
    mark = f"{handle.dir}/{WATCHDOG}"
    return f"python3 -c {q(_STATE)} {handle.pid} {q(handle.dir)} {q(mark)}"


def state_script(handle: ServeHandle) -> str:
    """Print the ``ServeState`` of ``handle``."""
    return f"exec {_state(handle)}\n"


def stop_script(handle: ServeHandle, keep_log: bool) -> str:
    """TERM the serve's process group (its watchdog and engine, or the engine alone when
    the watchdog was killed), KILL what is left after ``GRACE_S``, then remove its
    directory (all but its log when ``keep_log``); print ``stopped`` or ``gone``. A group
    that is not this serve's is never signalled (``state_script``)."""
    pid, state, where = handle.pid, _state(handle), q(handle.dir)
    keep = q(f"{handle.dir}/{LOG_FILE}")
    tidy = (
        f"find {where} -mindepth 1 ! -path {keep} -exec rm -rf {{}} + 2>/dev/null\n"
        if keep_log
        else f"rm -rf {where}\n"
    )
    return f"""\
state() {{ {state}; }}
if [ "$(state)" = {ServeState.GONE} ]; then
  {tidy}  echo gone; exit 0
fi
kill -TERM -{pid} 2>/dev/null
i=0
while [ "$(state)" != {ServeState.GONE} ] && [ $i -lt {GRACE_S * 10} ]; do
  sleep 0.1; i=$((i+1))
done
kill -KILL -{pid} 2>/dev/null
i=0
while [ "$(state)" != {ServeState.GONE} ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
{tidy}echo stopped
"""
