"""Training over several GPUs of one machine (a target's ``gpus``, ``deepspeed``, ``fsdp``):
the launch command, axolotl.yaml and the presets, and stop, cancel and snapshots with two
ranks, through the real CLI, the runner and the fake ``axolotl`` under a fake ``accelerate``
that starts its ranks as torch's elastic agent does (each in a session of its own)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import yaml
from tests.helpers.config_check import problems
from tests.helpers.trainer import group_alive

from overbrainer.testing.fake_axolotl import CALLS_FILE, RANKS_FILE

TWO_GPUS = 'device = "gpu"\ngpus = 2\n'


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] != "Z"


def _ranks(trainer, run_id: str) -> list[int]:
    path = trainer.dir / "runs" / run_id / RANKS_FILE
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def ranks_stopped(trainer):
    """Every rank a test's jobs started is killed at the end, by its pid."""
    yield
    for path in (trainer.dir / "runs").glob(f"*/{RANKS_FILE}"):
        for pid in (int(line) for line in path.read_text().split()):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("preset", "keys"),
    [
        ("", {}),
        ('deepspeed = "zero2"', {"deepspeed": "deepspeed/zero2.json"}),
        ('fsdp = "full_shard"', {"fsdp_version": 2}),
    ],
)
def test_two_gpus_train_in_two_ranks_through_accelerate(
    trainer, run_cli, monkeypatch, ranks_stopped, preset, keys
):
    trainer.configure(extra=TWO_GPUS + preset + "\n")
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "4")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = trainer.run()
    assert run["state"] == "succeeded"
    run_dir = trainer.dir / "runs" / run["id"]
    job = json.loads((run_dir / "job.json").read_text())
    assert job["stages"][0]["argv"] == [
        "axolotl", "train", "axolotl.yaml", "--launcher", "accelerate", "--",
        "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
    ]  # fmt: skip
    calls = [json.loads(line) for line in (run_dir / CALLS_FILE).read_text().splitlines()]
    assert calls.count(["axolotl", "train", "axolotl.yaml"]) == 2  # one a rank
    assert [
        "accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
        "-m", "axolotl.cli.train", "axolotl.yaml",
    ] in calls  # fmt: skip
    assert len(_ranks(trainer, run["id"])) == 2
    begins = [e for e in trainer.metrics(run["id"]) if e["event"] == "begin"]
    assert len(begins) == 1  # the main process alone writes metrics
    config = yaml.safe_load((run_dir / "axolotl.yaml").read_text())
    assert {key: config[key] for key in keys} == keys
    assert "deepspeed" in config or "deepspeed" not in keys
    if "deepspeed" in keys:
        shipped = json.loads((run_dir / keys["deepspeed"]).read_text())
        assert shipped["zero_optimization"]["stage"] == 2
    if "fsdp_version" in keys:
        assert config["fsdp_config"]["reshard_after_forward"] is True
    else:
        assert "fsdp_config" not in config
    inputs = json.loads((run_dir / "inputs.json").read_text())
    assert inputs["parts"]["processes"] == "2"


def test_a_stop_snapshots_once_and_every_rank_stops(trainer, run_cli, ranks_stopped):
    trainer.configure(extra=TWO_GPUS)
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    ranks = _ranks(trainer, run["id"])
    assert len(ranks) == 2
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 0, result.stderr
    record = trainer.run()
    assert record["state"] == "stopped"
    step = record["snapshot"]["step"]
    run_dir = trainer.dir / "runs" / run["id"]
    assert (run_dir / "output" / f"checkpoint-{step}").is_dir()
    log = (run_dir / "job.log").read_text()
    # Every rank took part in the snapshot's save, at the same step, then ended.
    assert log.count(f"fake axolotl: saved checkpoint-{step}\n") == 2
    assert log.count("fake axolotl: training completed\n") == 2
    assert not any(_alive(pid) for pid in ranks)
    saved = [line for line in log.splitlines() if line.startswith("fake axolotl: saved")]
    assert saved == [f"fake axolotl: saved checkpoint-{step}"] * 2  # one save, no second one
    # The main process alone writes the metrics lines and the snapshot's record.
    events = [e["event"] for e in trainer.metrics(run["id"])]
    assert events.count("begin") == 1 and events.count("end") == 1
    assert json.loads((run_dir / "snapshot.json").read_text())["step"] == step


def test_a_cancel_leaves_no_rank_behind(trainer, run_cli, ranks_stopped):
    trainer.configure(extra=TWO_GPUS)
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    ranks = _ranks(trainer, run["id"])
    assert len(ranks) == 2 and all(_alive(pid) for pid in ranks)
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    assert trainer.run()["state"] == "cancelled"
    assert not group_alive(run["job"]["pid"])
    assert [pid for pid in ranks if _alive(pid)] == []


def test_gpus_on_a_target_that_trains_on_the_cpu_is_refused(trainer, run_cli):
    trainer.configure(extra='device = "cpu"\ngpus = 2\n')
    result = run_cli("train")
    assert result.exit_code == 1
    assert (
        "targets.local.gpus = 2, but this target trains on the CPU (device = cpu): remove "
        "gpus, or train on a machine with GPUs"
    ) in result.stderr
    assert trainer.runs() == []


def test_all_gpus_counts_the_visible_devices(trainer, run_cli, monkeypatch, ranks_stopped):
    trainer.configure(extra='device = "gpu"\ngpus = "all"\n')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "2")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = trainer.run()
    argv = json.loads((trainer.dir / "runs" / run["id"] / "job.json").read_text())["stages"][0]
    assert argv["argv"][6:9] == ["--multi_gpu", "--num_processes", "3"]
    assert len(_ranks(trainer, run["id"])) == 3


def test_more_gpus_than_the_machine_shows_are_refused_before_a_run(trainer, run_cli, monkeypatch):
    trainer.configure(extra=TWO_GPUS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    result = run_cli("train")
    assert result.exit_code == 1
    assert (
        "targets.local.gpus = 2, but the machine shows 1 GPU (nvidia-smi -L, "
        'CUDA_VISIBLE_DEVICES): set gpus = 1 or gpus = "all", or train on a machine with more'
    ) in result.stderr
    assert trainer.runs() == []


def test_gpus_that_cannot_be_counted_are_trusted_with_a_warning(
    trainer, run_cli, monkeypatch, ranks_stopped
):
    trainer.configure(extra=TWO_GPUS)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep)
        if not (Path(p) / "nvidia-smi").exists()
    ))  # fmt: skip
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "2")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert (
        "targets.local.gpus = 2: the GPUs cannot be counted here (no nvidia-smi, no "
        "CUDA_VISIBLE_DEVICES): trusting the setting"
    ) in result.stderr
    assert len(_ranks(trainer, trainer.run()["id"])) == 2


def test_all_gpus_on_a_machine_without_one_is_refused(trainer, run_cli, monkeypatch):
    trainer.configure(extra='device = "gpu"\ngpus = "all"\nfsdp = "full_shard"\n')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    result = run_cli("train")
    assert result.exit_code == 1
    assert (
        'targets.local.gpus = "all": the machine shows no GPU (nvidia-smi -L, '
        "CUDA_VISIBLE_DEVICES)"
    ) in result.stderr
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    result = run_cli("train")
    assert result.exit_code == 1
    assert (
        'targets.local.gpus = "all": the machine shows 1 GPU, and the preset "full_shard" '
        "shards across several"
    ) in result.stderr


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("gpus = 0", 'targets.box.gpus: a number of GPUs (1 or more), or "all"'),
        ('gpus = "some"', 'targets.box.gpus: a number of GPUs (1 or more), or "all"'),
        ('gpus = 1\ndeepspeed = "zero2"',
         'targets.box: deepspeed = "zero2" shards across GPUs, and gpus = 1: set gpus = N (2 '
         'or more) or gpus = "all", or remove deepspeed'),
        ('fsdp = "full_shard"',
         'targets.box: fsdp = "full_shard" needs gpus: set gpus = N (2 or more) or gpus = "all"'),
        ('gpus = 2\ndeepspeed = "zero3"\nfsdp = "full_shard"',
         "targets.box: deepspeed and fsdp are both set: choose one of them"),
        ('gpus = 2\ndeepspeed = "zero4"',
         "targets.box.deepspeed: expected 'zero1', 'zero2' or 'zero3'"),
        ('gpus = 2\nfsdp = "hybrid"',
         "targets.box.fsdp: expected 'full_shard', 'shard_grad_op' or 'full_shard_offload'"),
    ],
)  # fmt: skip
def test_the_settings_are_checked_and_named(run_cli, write_config, keys, message):
    write_config(f'\n[targets.box]\nkind = "local"\n{keys}\n')
    result = run_cli("config", "check", env={"OVERBRAINER_LOAD_PLUGINS": "local"})
    found = problems(result)
    assert message in found


def test_one_gpu_is_one_process_through_accelerate(trainer, run_cli, monkeypatch, ranks_stopped):
    trainer.configure(extra='device = "gpu"\ngpus = 1\n')
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", "2")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = trainer.run()
    job = json.loads((trainer.dir / "runs" / run["id"] / "job.json").read_text())
    assert job["stages"][0]["argv"][3:] == [
        "--launcher", "accelerate", "--", "--num_processes", "1", "--num_machines", "1",
    ]  # fmt: skip
    assert len(_ranks(trainer, run["id"])) == 1


def test_a_stopped_run_with_a_preset_resumes_with_it(trainer, run_cli, monkeypatch, ranks_stopped):
    trainer.configure(extra=TWO_GPUS + 'fsdp = "full_shard"\n')
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    assert run_cli("train", "stop", run["id"]).exit_code == 0
    step = trainer.run()["snapshot"]["step"]
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", str(step + 2))
    resumed = run_cli("train", "--resume-from", run["id"])
    assert resumed.exit_code == 0, resumed.stderr
    new = trainer.run()
    assert new["resumed_from"] == run["id"] and new["state"] == "succeeded"
    config = yaml.safe_load((trainer.dir / "runs" / new["id"] / "axolotl.yaml").read_text())
    assert config["fsdp_version"] == 2 and config["resume_from_checkpoint"].endswith(
        f"checkpoint-{step}"
    )
