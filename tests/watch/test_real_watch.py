"""One cycle of `watch` with the real Axolotl on the CPU, then `run` finds it up to date."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.real import REAL_TIMEOUT
from tests.helpers.trainer import BOOT

from overbrainer.cli import cli

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart"


@pytest.mark.real
def test_a_watch_cycle_trains_the_quickstart_and_run_finds_it_up_to_date(tmp_path, venv):
    project = tmp_path / "quickstart"
    shutil.copytree(QUICKSTART, project, ignore=shutil.ignore_patterns("runs", ".overbrainer"))
    env = {**os.environ, "OVERBRAINER_TARGETS__LOCAL__VENV": str(venv)}
    log = tmp_path / "watch.out"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", BOOT, "watch"],  # as the README: cd project && watch
            cwd=project,
            stdout=out,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    try:
        deadline = time.monotonic() + REAL_TIMEOUT
        while "watch: cycle 1 " not in log.read_text():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
    finally:
        process.terminate()
        process.wait(30)
    run = json.loads(next((project / "runs").glob("*/run.json")).read_text())
    assert run["state"] == "succeeded"
    assert f"train run {run['id']} succeeded" in log.read_text()
    again = CliRunner().invoke(
        cli, ["-C", str(project), "run"], env={"OVERBRAINER_TARGETS__LOCAL__VENV": str(venv)}
    )
    assert again.exit_code == 0, again.stderr
    assert again.stdout.splitlines()[-1] == f"train: up to date with run {run['id']}"
