"""The real Axolotl's online teacher on the CPU: ``mode = "online"`` trains the tiny model
with Axolotl 0.19's ``OnlineTeacherCollator`` asking a parent served on the local target.

The parent is the stand-in vLLM (``tests/helpers/fake_engine.py``): it answers the collator's
``/v1/completions`` with vLLM's ``prompt_logprobs`` for the token ids it is sent (made-up
candidates within the tiny vocabulary), so the test proves the wiring (the settings Axolotl
accepts, the serve up for the whole job and ended after), not what a real parent teaches.

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import numpy
import pytest
from tests.helpers.serving import FAKE_ENGINE, engine_records, running, watchdog_pids

pytestmark = pytest.mark.real

KD = """
[providers.big]
protocol = "openai"
serve = { target = "local", engine = "vllm", model = "tiny-parent" }

[training.kd]
mode = "online"
top_k = 4
"""


def beside(real_venv: Path, directory: Path) -> Path:
    """A venv whose ``python`` and ``axolotl`` are the real venv's and whose ``vllm`` is the
    stand-in: the parent's engine and the trainer on one target, as on a GPU machine."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python", "python3", "axolotl"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec {real_venv}/bin/{name} "$@"\n')
    (bin_dir / "vllm").write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE_ENGINE} vllm "$@"\n')
    for program in bin_dir.iterdir():
        program.chmod(0o755)
    return directory


def test_a_real_online_kd_run_asks_the_served_parent_at_every_step(
    real, run_cli, venv, tmp_path
):
    real.configure_real(extra=KD)
    config = real.dir / "overbrainer.toml"
    both = beside(venv, tmp_path / "both")
    text = config.read_text().replace(f'venv = "{venv}"', f'venv = "{both}"')
    text = text.replace("sample_packing = false", "sample_packing = true")
    text = text.replace('adapter = "lora"', 'adapter = "lora"\ndistill = "logits"')
    text = text.replace(
        '[roles.parent]\nprovider = "main"\nmodel = "parent-model"',
        '[roles.parent]\nprovider = "big"\nmodel = "tiny-parent"',
    )
    config.write_text(text)
    try:
        result = run_cli("train")
        run = real.run()
        run_dir = real.dir / "runs" / run["id"]
        log = (run_dir / "job.log").read_text()
        assert result.exit_code == 0, log[-4000:]
        assert run["state"] == "succeeded"
        assert (run_dir / "output" / "adapter_model.safetensors").is_file()
        logged = [e for e in real.metrics(run["id"]) if e["event"] == "log" and "loss" in e]
        assert logged and all(numpy.isfinite([e["loss"] for e in logged]))
        # Axolotl's collator asked the served parent for every step's packed batch
        (scored,) = engine_records(real.dir, "scored.jsonl")
        asked = [json.loads(line) for line in scored.read_text().splitlines()]
        assert len(asked) >= len(logged)
        assert {a["path"] for a in asked} == {"/v1/completions"}
        assert all(0 < n <= 384 for a in asked for n in a["lengths"])
        # and the serve is gone with the command
        pids = watchdog_pids(real.dir)
        assert pids and not any(running(pid) for pid in pids)
    finally:
        for pid in watchdog_pids(real.dir):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
