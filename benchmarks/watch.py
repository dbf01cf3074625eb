"""`overbrainer watch`: from a saved edit to the start of its cycle, and the idle CPU.

A copy of the quickstart without its [training] table (its data is all there: no provider
is asked) is watched; the script saves a real change to `overbrainer.toml` (an editor's
way: a new file renamed over the old one) N times and measures the time until the watch
process logs that the cycle starts. Then it reads the process's CPU time over an idle
period. Goals: under 0.5 s from save to cycle, under 1 % of a core while idle.

    uv run python benchmarks/watch.py [-n 10] [--idle 60]
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks._harness

from benchmarks._harness import median  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
BOOT = "import sys; from overbrainer.cli import main; sys.argv[0] = 'overbrainer'; main()"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def project(directory: Path) -> Path:
    shutil.copytree(
        ROOT / "examples" / "quickstart", directory, ignore=shutil.ignore_patterns("runs", "models")
    )
    config = directory / "overbrainer.toml"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.split("\n[training]")[0] + "\n", encoding="utf-8")
    return directory


def save(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text, encoding="utf-8")
    os.replace(temp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="edits to time")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of idle CPU measured")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = project(Path(tmp) / "project")
        env = {**os.environ, "OVERBRAINER_LOAD_PLUGINS": "local", "NO_COLOR": "1"}
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "-C", str(directory), "watch"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines: queue.Queue[tuple[float, str]] = queue.Queue()

        def pump() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                lines.put((time.monotonic(), line))

        threading.Thread(target=pump, daemon=True).start()

        def started(number: int) -> float:
            deadline = time.monotonic() + 60
            while True:
                at, line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
                if f"watch: cycle {number} starts" in line:
                    return at

        try:
            started(1)
            time.sleep(3)  # let the first cycle end
            config = directory / "overbrainer.toml"
            delays = []
            original = config.read_text(encoding="utf-8")
            for number in range(2, args.n + 2):
                # A setting that changes and changes back: each save is a real change.
                edited = original.replace("[pipeline]", f"[pipeline]\nconcurrency = {number}", 1)
                saved = time.monotonic()
                save(config, edited)
                delays.append(started(number) - saved)
                time.sleep(2)  # the cycle (split only) ends
            before, at = cpu_seconds(process.pid), time.monotonic()
            time.sleep(args.idle)
            idle = (cpu_seconds(process.pid) - before) / (time.monotonic() - at)
        finally:
            process.terminate()
            process.wait(10)
    middle = median(delays)
    print(
        f"save -> cycle start, {len(delays)} edits: median {middle * 1000:.0f} ms, "
        f"max {max(delays) * 1000:.0f} ms (goal 500 ms: {middle / 0.5:.2f} of it)"
    )
    print(f"idle CPU over {args.idle:.0f} s: {idle * 100:.2f} % of a core (goal 1 %)")


if __name__ == "__main__":
    main()
