"""Several GPUs against the real Axolotl 0.19 (the real tier, on this CPU): its CLI passes
our launch arguments to ``accelerate launch`` as we write them, and its configuration
schema takes every preset's keys. No training: that needs several GPUs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from tests.helpers.real import REAL_TIMEOUT

from overbrainer.config.model import Training
from overbrainer.config.runtime import DEEPSPEED_PRESETS, FSDP_PRESETS
from overbrainer.job.spec import Launch
from overbrainer.train.axolotl import axolotl_config
from overbrainer.train.axolotl_yaml import dump_yaml
from overbrainer.train.job_setup import deepspeed_preset, job_stages

pytestmark = pytest.mark.real

QUIET = {"AXOLOTL_DO_NOT_TRACK": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}

RECORDER = """#!/bin/sh
printf '%s\\n' "$@" > accelerate.argv
"""

VALIDATE = """
import json, sys
from axolotl.utils.schemas.config import AxolotlInputConfig
for path in sys.argv[1:]:
    with open(path) as file:
        config = json.load(file)
    config.pop("plugins")
    AxolotlInputConfig(**config)
    print("valid", path)
"""

TRAINING = Training(target="box", base_model="Qwen/Qwen3-0.6B", adapter="lora")


def test_axolotls_cli_execs_accelerate_with_our_arguments(venv, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "accelerate").write_text(RECORDER)
    (bin_dir / "accelerate").chmod(0o755)
    (tmp_path / "axolotl.yaml").write_text(dump_yaml({"base_model": "x"}))
    stage = job_stages(TRAINING, cpu=False, launch=Launch(2))[0]
    env = {**os.environ, **QUIET, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(
        [str(venv / "bin" / stage.argv[0]), *stage.argv[1:]],
        cwd=tmp_path, env=env, check=True, timeout=REAL_TIMEOUT, capture_output=True,
    )  # fmt: skip
    argv = (tmp_path / "accelerate.argv").read_text().splitlines()
    assert argv[:9] == [
        "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "-m", "axolotl.cli.train", "axolotl.yaml",
    ]  # fmt: skip
    # After the configuration, Axolotl's own options for its train module (--debug=False...).
    assert all(arg.startswith("--") and "=" in arg for arg in argv[9:]), argv


def test_axolotls_schema_takes_every_preset(venv, tmp_path):
    paths = []
    launches = [Launch(2, deepspeed=name) for name in DEEPSPEED_PRESETS]
    launches += [Launch(2, fsdp=name) for name in FSDP_PRESETS]
    for index, launch in enumerate(launches):
        job = tmp_path / f"job{index}"
        (job / "deepspeed").mkdir(parents=True)
        if launch.deepspeed:
            name = f"{launch.deepspeed}.json"
            shutil.copyfile(deepspeed_preset(launch.deepspeed), job / "deepspeed" / name)
        config = axolotl_config(TRAINING, has_eval=True, launch=launch, root=str(job))
        path = job / "config.json"
        path.write_text(json.dumps(config))
        paths.append(str(path))
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", VALIDATE, *paths],
        cwd=tmp_path, env={**os.environ, **QUIET}, capture_output=True, text=True,
        timeout=REAL_TIMEOUT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [f"valid {path}" for path in paths]
