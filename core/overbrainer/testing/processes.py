"""The processes of a job that the conformance kit can see on this machine, found by pid.

A process is named by its pid and its start time, so that a pid the system reused for
another process is never taken for the job's; a zombie (killed, waiting to be reaped) no
longer runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
ANNOUNCED = re.compile(rb"fake axolotl: (child|worker) pid (\d+)")
"""How the fake trainer names the processes it starts, in the job's log."""


@dataclass(frozen=True, order=True)
class Process:
    """One process: ``started`` is its start time in clock ticks since boot."""

    pid: int
    started: int

    @classmethod
    def of(cls, pid: int) -> Process | None:
        """The process ``pid`` while it runs (not a zombie); None otherwise."""
        fields = _stat(pid)
        if fields is None or fields[0] == "Z":
            return None
        return cls(pid, int(fields[19]))

    def running(self) -> bool:
        """Whether this very process still runs."""
        now = Process.of(self.pid)
        return now is not None and now.started == self.started

    def parent(self) -> int | None:
        fields = _stat(self.pid)
        return int(fields[1]) if fields is not None else None

    def cwd(self) -> str | None:
        try:
            return str((PROC / str(self.pid) / "cwd").readlink())
        except OSError:
            return None


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first)."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def carrying(variable: str) -> set[Process]:
    """The running processes whose environment holds ``variable`` (``NAME=value``)."""
    wanted = variable.encode()
    found = set()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in environ and (process := Process.of(int(entry.name))) is not None:
            found.add(process)
    return found


def with_their_runners(processes: set[Process]) -> set[Process]:
    """``processes`` and their ancestors that run in the same directory as they do: the job's
    runner and the wrapper that started it, which run in the job's directory too."""
    family = set(processes)
    for process in processes:
        where, current = process.cwd(), process
        while where is not None:
            pid = current.parent()
            ancestor = Process.of(pid) if pid and pid > 1 else None
            if ancestor is None or ancestor.cwd() != where:
                break
            family.add(ancestor)
            current = ancestor
    return family


def announced(log: bytes) -> dict[str, list[int]]:
    """The pids the fake trainer says it started, by kind (``child``, ``worker``)."""
    found: dict[str, list[int]] = {}
    for kind, pid in ANNOUNCED.findall(log):
        found.setdefault(kind.decode(), []).append(int(pid))
    return found
