"""One timed ``overbrainer train`` of the fake trainer, shared by the engine benchmarks
(``ray.py``, ``slurm.py``): when the first metric came, and how long after the job's exit
the CLI said the run succeeded."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

BOOT = "from overbrainer.cli import main; import sys; sys.argv[0] = 'overbrainer'; main()"


def timed_train(project: Path, target: str, env: dict[str, str]) -> dict[str, float]:
    """``train`` in ``project`` on ``target`` (``cluster``: the job runs in its
    ``remote_dir``; else in the run directory), timed from the command's start."""
    began = time.time()
    process = subprocess.Popen(
        [sys.executable, "-c", BOOT, "-C", str(project), "train"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    first_line = process.stdout.readline()
    printed = time.time()
    process.stdout.read()
    process.wait()
    if process.returncode != 0 or "succeeded" not in first_line:
        raise SystemExit(f"the {target} run did not succeed: {first_line!r}")
    run = json.loads(next((project / "runs").glob("*/run.json")).read_text())
    where = Path(run["remote_dir"]) if target == "cluster" else project / "runs" / run["id"]
    events = [json.loads(line) for line in (where / "metrics.jsonl").read_text().splitlines()]
    first_log = next(e["time"] for e in events if e["event"] == "log")
    return {
        "first_metric": first_log - began,
        "exit_to_succeeded": printed - (where / "exit_code").stat().st_mtime,
    }

