"""What the benchmark scripts share: a command timed in a fresh process, commands measured
in turns, a block or a call timed in this process, and the medians they print, computed one
way instead of once a script.

A machine shared with other work drifts: commands are measured in turns (each once a round,
after one unmeasured warm-up run that also writes the bytecode caches), so that a slow
minute weighs on all of them, and the medians are compared, never a single run.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Timing:
    """One run of a command: wall seconds, and CPU seconds (user + system) of its process."""

    wall: float
    cpu: float


@dataclass
class Stopwatch:
    """The wall and CPU seconds of a ``with stopwatch():`` block, set when it ends."""

    wall: float = 0.0
    cpu: float = 0.0


@contextmanager
def stopwatch(cpu_clock: Callable[[], float] = time.process_time) -> Iterator[Stopwatch]:
    """Times the block: wall seconds (``perf_counter``) and CPU seconds of ``cpu_clock``
    (this process's by default; ``time.thread_time`` for one thread's)."""
    watch = Stopwatch()
    wall, cpu = time.perf_counter(), cpu_clock()
    try:
        yield watch
    finally:
        watch.wall, watch.cpu = time.perf_counter() - wall, cpu_clock() - cpu


def timed(action: Callable[[], T]) -> tuple[float, T]:
    """``action()``'s wall seconds and its value."""
    start = time.perf_counter()
    value = action()
    return time.perf_counter() - start, value


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's children that have ended, so far: a
    ``stopwatch(children_cpu)`` reads what the commands run in its block spent."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_timed(
    argv: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Timing:
    """``argv`` run to its end, its output dropped (a failure raises); its CPU is read from
    this process's children's usage, so nothing else may run a child meanwhile."""
    with stopwatch(children_cpu) as watch:
        subprocess.run(
            list(argv), cwd=cwd, env=None if env is None else dict(env),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
        )
    return Timing(watch.wall, watch.cpu)


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


def median(values: Iterable[float]) -> float:
    """The median of ``values`` (the middle two's mean for an even count)."""
    return statistics.median(values)


def column_medians(rows: Iterable[Sequence[float]]) -> tuple[float, ...]:
    """The median of each column of ``rows`` (each row a run's figures, in the same order)."""
    return tuple(statistics.median(column) for column in zip(*rows, strict=True))


def median_of_ratios(numerators: Iterable[float], denominators: Iterable[float]) -> float:
    """The median of each pair's ratio: two sides measured in the same round share that
    round's drift, which the ratio of the two medians would not cancel."""
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))
