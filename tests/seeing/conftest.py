"""A `train` of the fake trainer running in a process of its own, for the TUI and the
metrics endpoint to look at."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest
from tests.after.conftest import finished  # noqa: F401 - a run to export, stand-in llama.cpp
from tests.fixtures.run_dirs import write_examples

from overbrainer.testing.fake_axolotl import make_fake_venv

TRAINING = """
[training]
target = "local"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"

[targets.local]
kind = "local"
venv = "{venv}"
pass_env = ["FAKE_AXOLOTL_*"]
"""

BOOT = (
    "import sys, overbrainer.runs.follow as f; f.POLL_S = 0.05; "
    "from overbrainer.cli import main; sys.argv[0] = 'overbrainer'; main()"
)


def runs(project_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((project_dir / "runs").glob("*/run.json"))]


@pytest.fixture
def start_training(project_dir: Path, tmp_path: Path):
    """Starts `train` of the fake trainer (``extra``: more of overbrainer.toml) in a process
    of its own and waits for its first step; killed by PID, with its job, at the end."""
    processes: list[subprocess.Popen[str]] = []

    def start(extra: str = "") -> subprocess.Popen[str]:
        venv = make_fake_venv(tmp_path / "fake-venv")
        write_examples(project_dir / "data" / "train.jsonl", range(10))
        write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
        config = project_dir / "overbrainer.toml"
        config.write_text(config.read_text() + TRAINING.format(venv=venv) + extra)
        env = {**os.environ, "FAKE_AXOLOTL_STEP_SECONDS": "0.1", "FAKE_AXOLOTL_STEPS": "100000"}
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "-C", str(project_dir), "train"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        processes.append(process)
        wait_started(project_dir, process)
        return process

    yield start
    for process in processes:
        with suppress(ProcessLookupError):
            process.kill()
        process.communicate()
    for pid_file in (project_dir / "runs").glob("*/job.pid"):
        with suppress(ProcessLookupError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def wait_started(project_dir: Path, process: subprocess.Popen[str]) -> None:
    """Until the newest run is recorded running and has logged a step."""
    deadline = time.monotonic() + 60
    while True:
        found = runs(project_dir) if (project_dir / "runs").is_dir() else []
        if found and found[-1]["state"] == "running":
            metrics = project_dir / "runs" / found[-1]["id"] / "metrics.jsonl"
            if metrics.exists() and '"log"' in metrics.read_text():
                return
        assert time.monotonic() < deadline, "the fake training did not start"
        assert process.poll() is None, process.communicate()
        time.sleep(0.1)
