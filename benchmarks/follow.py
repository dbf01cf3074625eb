"""How quickly and cheaply `overbrainer train` follows a job.

A 60-step run of the fake trainer on the local target, driven by the real console script.
Prints the time from the job writing ``exit_code`` to the CLI printing its final line
(against the poll interval, the ideal being no wait at all), and the follower's own CPU time
and peak memory (against the job's wall time and against `python -c pass`).

    uv run python benchmarks/follow.py [--steps 60] [--step-seconds 0.1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import medians  # noqa: E402
from tests.helpers.run_dirs import write_examples  # noqa: E402

from overbrainer.testing.fake_axolotl import make_fake_venv  # noqa: E402

CONFIG = """\
[project]
name = "follow bench"

[providers.p]
protocol = "openai"

[roles.generator]
provider = "p"
model = "g"

[roles.parent]
provider = "p"
model = "m"

[training]
target = "local"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"

[targets.local]
kind = "local"
venv = "{venv}"
"""

TICKS = os.sysconf("SC_CLK_TCK")


def sample(pid: int, peak: dict[str, float]) -> None:
    """Keep the latest own CPU time (user + system, children excluded) and peak RSS of pid."""
    while True:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        if fields[0] == "Z":
            return
        peak["cpu"] = (int(fields[11]) + int(fields[12])) / TICKS
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak["rss_mb"] = int(line.split()[1]) / 1024
        time.sleep(0.02)


def one_run(work: Path, steps: int, step_seconds: float) -> dict[str, float]:
    project = work / f"project-{time.monotonic_ns()}"
    project.mkdir()
    venv = make_fake_venv(work / "venv")
    (project / "overbrainer.toml").write_text(CONFIG.format(venv=venv))
    write_examples(project / "data" / "train.jsonl", range(20))
    env = {
        **os.environ,
        "FAKE_AXOLOTL_STEPS": str(steps),
        "FAKE_AXOLOTL_STEP_SECONDS": str(step_seconds),
        "PYTHONDONTWRITEBYTECODE": "",
    }
    env.pop("PYTHONDONTWRITEBYTECODE")
    began = time.monotonic()
    process = subprocess.Popen(
        [shutil.which("overbrainer") or "overbrainer", "-C", str(project), "train"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    peak: dict[str, float] = {}
    sampler = threading.Thread(target=sample, args=(process.pid, peak), daemon=True)
    sampler.start()
    assert process.stdout is not None
    first_line = process.stdout.readline()
    printed = time.time()
    process.stdout.read()
    process.wait()
    sampler.join()
    if process.returncode != 0 or "succeeded" not in first_line:
        raise SystemExit(f"the run did not succeed: {first_line!r}")
    exit_code = next((project / "runs").glob("*/exit_code"))
    return {
        "latency": printed - exit_code.stat().st_mtime,
        "wall": time.monotonic() - began,
        "cpu": peak.get("cpu", 0.0),
        "rss_mb": peak.get("rss_mb", 0.0),
    }


def python_pass_rss() -> float:
    """Peak RSS of a bare interpreter, read like the follower's (VmHWM: ru_maxrss would
    count the forking parent's pages)."""
    out = subprocess.run(
        [sys.executable, "-c", "print(open('/proc/self/status').read())"],
        capture_output=True, text=True, check=True,
    ).stdout
    line = next(line for line in out.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from overbrainer.runs.follow import POLL_S

    with tempfile.TemporaryDirectory() as work:
        runs = [one_run(Path(work), args.steps, args.step_seconds) for _ in range(args.repeat)]
    median = medians(runs)
    base_rss = python_pass_rss()
    print(f"{args.steps}-step fake run, {args.repeat} runs, medians; poll interval {POLL_S:g} s")
    print(f"exit_code -> final line: {median['latency']:.2f} s "
          f"({median['latency'] / POLL_S:.2f} of one poll interval; ideal 0)")
    print(f"follower CPU: {median['cpu']:.2f} s over {median['wall']:.1f} s followed "
          f"({100 * median['cpu'] / median['wall']:.1f}% of one core)")
    print(f"follower peak memory: {median['rss_mb']:.0f} MB "
          f"({median['rss_mb'] / base_rss:.1f}x python -c pass at {base_rss:.0f} MB)")


if __name__ == "__main__":
    main()
