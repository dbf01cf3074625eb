"""A `train` of the fake trainer running in a process of its own, for the TUI and the
metrics endpoint to look at."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from contextlib import suppress
from pathlib import Path

import pytest
from tests.helpers.run_dirs import write_examples
from tests.helpers.seeing_project import TRAINING, wait_started
from tests.helpers.trainer import BOOT

from overbrainer.testing.fake_axolotl import make_fake_venv


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


