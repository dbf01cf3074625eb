"""A project that trains on the local target with the fake ``axolotl``, and real CLI
processes to drive it (killed by their PIDs, like every job they started)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

TRAINING = """
[training]
target = "local"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
merge = {merge}

[targets.local]
kind = "local"
venv = "{venv}"
pass_env = ["FAKE_AXOLOTL_*"]
"""


# A real CLI process, polling fast: the same code as the console script.
BOOT = (
    "import sys, overbrainer.runs.follow as f; f.POLL_S = 0.05; "
    "from overbrainer.cli import main; sys.argv[0] = 'overbrainer'; main()"
)


@dataclass
class Trainer:
    """The training project and the processes a test started in it."""

    dir: Path
    venv: Path
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def configure(self, merge: bool = False, extra: str = "") -> None:
        text = (self.dir / "overbrainer.toml").read_text(encoding="utf-8")
        text = text.split("\n[training]")[0]
        training = TRAINING.format(merge=str(merge).lower(), venv=self.venv)
        (self.dir / "overbrainer.toml").write_text(text + training + extra, encoding="utf-8")

    def spawn(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """``overbrainer -C DIR ARGS`` in a process of its own."""
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "-C", str(self.dir), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.processes.append(process)
        return process

    def stop_all(self, job_dirs: Path) -> None:
        """Kill every CLI process started here and every job group under ``job_dirs``."""
        for process in self.processes:
            with suppress(ProcessLookupError):
                process.kill()
            process.wait()
            for stream in (process.stdout, process.stderr):
                if stream:
                    stream.close()
        for pid_file in job_dirs.glob("*/job.pid"):
            with suppress(ProcessLookupError, ValueError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)

    def runs(self) -> list[dict]:
        return [
            json.loads(path.read_text()) for path in sorted((self.dir / "runs").glob("*/run.json"))
        ]

    def run(self, index: int = -1) -> dict:
        return self.runs()[index]

    def wait_for(self, check: Callable[[], bool], timeout: float = 30, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
            time.sleep(0.05)

    def wait_running(self) -> dict:
        """The newest run once its job is recorded and has logged a step."""

        def started() -> bool:
            runs = self.runs()
            if not runs or runs[-1]["state"] != "running":
                return False
            metrics = self.dir / "runs" / runs[-1]["id"] / "metrics.jsonl"
            return metrics.exists() and '"log"' in metrics.read_text()

        self.wait_for(started, what="a running job")
        return self.run()

    def metrics(self, run_id: str) -> list[dict]:
        path = self.dir / "runs" / run_id / "metrics.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies waiting for a slow init to
    reap them do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def log_steps(trainer, run_id: str) -> list[int]:
    """The steps logged so far: none while the job has not made its metrics.jsonl yet (a
    run is `running` once its job is spawned, before Axolotl has loaded)."""
    if not (trainer.dir / "runs" / run_id / "metrics.jsonl").exists():
        return []
    return [e["step"] for e in trainer.metrics(run_id) if e["event"] == "log" and "loss" in e]
