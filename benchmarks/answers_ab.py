"""The cold ``answers`` command of another checkout's core against this one's, alternated.

    uv run python benchmarks/answers_ab.py OTHER_CORE [--repeat 4]

``OTHER_CORE``: the ``core`` folder of another checkout (``git worktree add --detach
/tmp/old <commit>`` then ``/tmp/old/core``), run by this venv's console script with
``PYTHONPATH`` set to it; then this checkout's, then a bare aiohttp client (as
``answers.py --bare``), in turn, so that a shared machine's load falls on all three alike.
Printed, each the median of ``--repeat`` (after one warm-up round): the start-up before the
first request, the whole command against the ideal, the whole process's CPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness

ANSWERS, CONCURRENCY, LATENCY = 1920, 64, 0.1


def main() -> None:
    import answers as bench
    from benchmarks._harness import children_cpu, column_medians, median, stopwatch
    from tests.helpers.fake_provider import FakeProvider, is_chat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other_core", type=Path)
    parser.add_argument("--repeat", type=int, default=4)
    args = parser.parse_args()
    provider = FakeProvider(latency=LATENCY).start()
    arrivals: list[float] = []
    provider.on(lambda seen: is_chat(seen) and arrivals.append(time.monotonic()) is None
                and False, None, times=None)
    script = shutil.which("overbrainer") or "overbrainer"
    base = {k: v for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    base.update(OVERBRAINER_LOAD_PLUGINS="", OVERBRAINER_LOG="WARNING", NO_COLOR="1")
    rows: dict[str, list[tuple[float, float, float]]] = {"other": [], "this": [], "bare": []}

    def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, float]:
        arrivals.clear()
        with stopwatch(children_cpu) as watch:
            began = time.monotonic()  # the clock of ``arrivals``
            subprocess.run(argv, env=env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            ended = time.monotonic()
        return arrivals[0] - began, ended - began, watch.cpu

    try:
        with tempfile.TemporaryDirectory() as temp:
            for number in range(args.repeat + 1):
                for name in ("other", "this"):
                    env = dict(base)
                    if name == "other":
                        env["PYTHONPATH"] = str(args.other_core.resolve())
                    directory = bench.project(Path(temp) / f"{name}{number}", provider.url,
                                              CONCURRENCY, ANSWERS)
                    row = timed([script, "-C", str(directory), "answers"], env)
                    if number:
                        rows[name].append(row)
                row = timed([sys.executable, str(ROOT / "benchmarks" / "answers.py"), "--bare",
                             provider.url, "--answers", str(ANSWERS),
                             "--concurrency", str(CONCURRENCY)], base)
                if number:
                    rows["bare"].append(row)
    finally:
        provider.stop()
    ideal = ANSWERS / CONCURRENCY * LATENCY
    bare_cpu = median(row[2] for row in rows["bare"])
    for name, found in rows.items():
        start, wall, cpu = column_medians(found)
        print(f"{name:5}  start-up {start:.3f} s  whole {wall:.2f} s, {ideal / wall:.2f} of "
              f"ideal  CPU {cpu:.3f} s, {cpu / bare_cpu:.2f}x the bare client's")


if __name__ == "__main__":
    main()
