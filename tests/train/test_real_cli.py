"""The training commands with the real Axolotl on the CPU: train, stop, resume, cancel.

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from tests.helpers.real import REAL_TIMEOUT
from tests.helpers.tools import need
from tests.helpers.trainer import group_alive, log_steps

pytestmark = pytest.mark.real


def test_a_real_run_succeeds_with_an_adapter(real, run_cli):
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = real.run()
    assert run["state"] == "succeeded"
    output = real.dir / "runs" / run["id"] / "output"
    assert (output / "adapter_model.safetensors").is_file()
    assert (output / "adapter_config.json").is_file()
    assert result.stdout.splitlines()[1] == f"train: adapter in runs/{run['id']}/output"
    assert log_steps(real, run["id"]) == list(range(1, 17))
    yaml_text = (real.dir / "runs" / run["id"] / "axolotl.yaml").read_text()
    assert "lora_mlp_kernel: false" in yaml_text and "bf16: false" in yaml_text


def test_a_real_run_stops_with_a_snapshot_and_resumes_after_it(real, run_cli):
    real.configure_real(epochs=3)
    process = real.spawn("train")
    real.wait_for(lambda: real.runs() and real.run()["state"] == "running", REAL_TIMEOUT, "a run")
    run = real.run()
    real.wait_for(lambda: len(log_steps(real, run["id"])) >= 2, REAL_TIMEOUT, "two steps")
    stop = run_cli("train", "stop", run["id"])  # the spawned process holds the lock
    assert stop.exit_code == 0, stop.stderr
    out, err = process.communicate(timeout=REAL_TIMEOUT)
    assert process.returncode == 0, err[-3000:]
    record = real.run()
    assert record["state"] == "stopped", record
    step = record["snapshot"]["step"]
    assert 2 <= step < 48
    assert (real.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()
    assert f"stopped at step {step} (requested)" in out

    resumed = run_cli("train", "--resume-from", run["id"])
    assert resumed.exit_code == 0, resumed.stderr
    new = real.run()
    assert new["state"] == "succeeded" and new["resumed_from"] == run["id"]
    steps = log_steps(real, new["id"])
    assert steps[0] == step + 1 and steps[-1] == 48


def test_a_real_run_is_cancelled_with_no_process_left(real, run_cli):
    real.configure_real(epochs=3)
    process = real.spawn("train")
    real.wait_for(lambda: real.runs() and real.run()["state"] == "running", REAL_TIMEOUT, "a run")
    run = real.run()
    real.wait_for(lambda: len(log_steps(real, run["id"])) >= 1, REAL_TIMEOUT, "a step")
    process.kill()
    process.wait()
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    assert real.run()["state"] == "cancelled"
    pgid = run["job"]["pid"]
    assert not group_alive(pgid)
    ps = subprocess.run(
        [need("ps"), "-eo", "pgid=,stat=,args="], capture_output=True, text=True, check=True
    )
    rows = [line.split(None, 2) for line in ps.stdout.splitlines()]
    # Zombies waiting for a slow init to reap them do not run.
    assert not [row for row in rows if row[0] == str(pgid) and not row[1].startswith("Z")]
    assert json.loads((real.dir / "runs" / run["id"] / "run.json").read_text())["message"] is None
