"""What the benchmark scripts share: a command timed in a fresh process, commands measured
in turns, and the medians they print, computed one way instead of once a script.

A machine shared with other work drifts: commands are measured in turns (each once a round,
after one unmeasured warm-up run that also writes the bytecode caches), so that a slow
minute weighs on all of them, and the medians are compared, never a single run.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Timing:
    """One run of a command: wall seconds, and CPU seconds (user + system) of its process."""

    wall: float
    cpu: float


def run_timed(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Timing:
    """``argv`` run to its end, its output dropped (a failure raises); its CPU is read from
    this process's children's usage, so nothing else may run a child meanwhile."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        list(argv), cwd=cwd, env=None if env is None else dict(env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Timing(wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def in_turns(
    commands: Mapping[str, Sequence[str]],
    repeat: int,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    before: Callable[[str], None] | None = None,
) -> dict[str, list[Timing]]:
    """Each command's ``repeat`` timings, measured in turns after one warm-up run each;
    ``before(name)`` runs ahead of each measured run (to remove a cache, say)."""
    for argv in commands.values():
        run_timed(argv, cwd=cwd, env=env)
    timings: dict[str, list[Timing]] = {name: [] for name in commands}
    for _ in range(repeat):
        for name, argv in commands.items():
            if before is not None:
                before(name)
            timings[name].append(run_timed(argv, cwd=cwd, env=env))
    return timings


def median_timing(timings: Iterable[Timing]) -> Timing:
    """The median wall and the median CPU (each of its own column)."""
    walls, cpus = zip(*((t.wall, t.cpu) for t in timings), strict=True)
    return Timing(statistics.median(walls), statistics.median(cpus))


def medians(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each figure's median over ``runs`` (each run a mapping of the same figures)."""
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}
