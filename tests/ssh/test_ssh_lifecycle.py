"""Training runs end to end over SSH with the fake trainer, through the real CLI.

The target is ``sshd`` on 127.0.0.1: jobs get their environment from the sshd session
(``sshd.env``, so the fake's ``FAKE_AXOLOTL_*`` knobs go there, not into the CLI's
environment), work in ``sshd.home/overbrainer/<run-id>/`` and come home to
``project/runs/<run-id>/`` by verified retrieval. Client and server are this machine, so
the job's processes are seen (``ps``, ``/proc``) from here.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.helpers.run_dirs import write_examples
from tests.helpers.sshd import Sshd, cmdlines_holding
from tests.helpers.tools import need
from tests.helpers.trainer import Trainer, group_alive

from overbrainer.runs import follow
from overbrainer.testing.fake_axolotl import make_fake_venv

SSH_TRAINING = """
[training]
target = "gpu"
base_model = "Qwen/Qwen3-0.6B"
adapter = "lora"
merge = {merge}

[targets.gpu]
kind = "ssh"
venv = "{venv}"
"""

FAST = {"FAKE_AXOLOTL_STEP_SECONDS": "0.02"}
TOKEN = "hf_overbrainerLifecycleToken5d2f8b"
QUICKSTART_DATA = Path(__file__).parents[2] / "examples" / "quickstart" / "data" / "answers.jsonl"


@dataclass
class SshTrainer(Trainer):
    """The training project on the ``ssh`` target ``gpu``, served by ``sshd``."""

    sshd: Sshd = field(kw_only=True)

    def configure(self, merge: bool = False, extra: str = "") -> None:
        text = (self.dir / "overbrainer.toml").read_text(encoding="utf-8")
        text = text.split("\n[training]")[0]
        training = SSH_TRAINING.format(merge=str(merge).lower(), venv=self.venv)
        (self.dir / "overbrainer.toml").write_text(text + training + extra, encoding="utf-8")

    def knobs(self, **env: str) -> None:
        """The environment of the next jobs: the sshd session's, so sshd starts again."""
        self.sshd.stop()
        self.sshd.env = {**FAST, **env}
        self.sshd.start()

    def remote(self, run_id: str) -> Path:
        """The run's directory on the target."""
        return self.sshd.home / "overbrainer" / run_id

    def wait_running(self) -> dict:
        """The newest run once its job is recorded and has logged a step (on the target:
        metrics.jsonl comes home only when the run ends)."""

        def started() -> bool:
            runs = self.runs()
            if not runs or runs[-1]["state"] != "running":
                return False
            metrics = self.remote(runs[-1]["id"]) / "metrics.jsonl"
            return metrics.exists() and '"log"' in metrics.read_text()

        self.wait_for(started, what="a running job")
        return self.run()


@pytest.fixture
def trainer(
    project_dir: Path, tmp_path: Path, sshd: Sshd, ssh_target_env, monkeypatch
) -> Iterator[SshTrainer]:
    ssh_target_env("gpu")
    monkeypatch.setattr(follow, "POLL_S", 0.05)
    fake = make_fake_venv(tmp_path / "fake-venv")
    write_examples(project_dir / "data" / "train.jsonl", range(10))
    write_examples(project_dir / "data" / "eval.jsonl", range(10, 12))
    trainer = SshTrainer(project_dir, fake, sshd=sshd)
    trainer.knobs()
    trainer.configure()
    yield trainer
    trainer.stop_all(sshd.home / "overbrainer")


def _log_steps(trainer: Trainer, run_id: str) -> list[int]:
    return [
        e["step"]
        for e in trainer.metrics(run_id)
        if e["event"] == "log" and e.get("loss") is not None
    ]


def _pids() -> set[int]:
    """The live processes (zombies left for a slow init do not run)."""
    ps = subprocess.run(
        [need("ps"), "-eo", "pid=,stat="], capture_output=True, text=True, check=True
    )
    rows = (line.split() for line in ps.stdout.splitlines())
    return {int(pid) for pid, stat in rows if not stat.startswith("Z")}


def _group(pgid: int) -> list[int]:
    """The live processes of the process group ``pgid``. Zombies are left out: the job's
    processes are reparented to this machine's init, which may reap them late."""
    ps = subprocess.run(
        [need("ps"), "-eo", "pid=,pgid=,stat="], capture_output=True, text=True, check=True
    )
    rows = (line.split() for line in ps.stdout.splitlines())
    return [int(pid) for pid, group, stat in rows if group == str(pgid) and "Z" not in stat]


def test_a_run_succeeds_and_its_results_come_home(trainer, run_cli):
    trainer.configure(merge=True)
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    record = trainer.run()
    run_id = record["id"]
    remote = trainer.remote(run_id)
    out = result.stdout.splitlines()
    assert out[0].startswith(f"train: run {run_id} succeeded; step 6/6, epoch ")
    assert out[0].endswith(f"; output in runs/{run_id}/output")
    assert out[1:] == [
        f"train: adapter in runs/{run_id}/output",
        f"train: merged model in runs/{run_id}/output/merged",
        f"train: loss chart in runs/{run_id}/loss.png",
    ]
    assert f"train: run {run_id} on target `gpu`, in {remote}" in result.stderr
    assert "train: job running" in result.stderr
    assert "train: job exited with code 0" in result.stderr
    assert "train: merging adapter" in result.stderr
    assert "train: retrieving results" in result.stderr
    assert record["state"] == "succeeded" and record["message"] is None
    assert record["target"] == "gpu" and record["remote_dir"] == str(remote)
    assert record["job"]["dir"] == str(remote) and record["job"]["pid"] > 1
    assert record["snapshots"] is True
    home = trainer.dir / "runs" / run_id
    for name in ("adapter_model.safetensors", "merged/model.safetensors"):
        assert (home / "output" / name).read_bytes() == (remote / "output" / name).read_bytes()
    assert not list((home / "output").glob("checkpoint-*"))  # left on the target
    assert list((remote / "output").glob("checkpoint-*"))
    for name in ("metrics.jsonl", "job.log"):
        assert (home / name).read_bytes() == (remote / name).read_bytes()
    assert [e["event"] for e in trainer.metrics(run_id)][:2] == ["stage", "begin"]
    assert "fake axolotl: merging the adapter" in (home / "job.log").read_text()
    # What the follower saw, kept at home as it came (live charts of a remote run).
    followed = [json.loads(line) for line in (home / "metrics.followed.jsonl").open()]
    assert followed == trainer.metrics(run_id)


def test_a_non_zero_exit_fails_the_run_and_its_log_comes_home(trainer, run_cli):
    trainer.knobs(FAKE_AXOLOTL_EXIT="3")
    result = run_cli("train")
    record = trainer.run()
    run_id = record["id"]
    assert result.exit_code == 1
    assert result.stdout.startswith(f"train: run {run_id} failed; step 6/6, ")
    message = f"the job exited with code 3 (see runs/{run_id}/job.log)"
    assert "train: job exited with code 3" in result.stderr
    assert result.stderr.endswith(f"error: {message}\n")
    assert record["state"] == "failed" and record["message"] == message
    home = trainer.dir / "runs" / run_id
    assert (home / "job.log").read_bytes() == (trainer.remote(run_id) / "job.log").read_bytes()
    assert "fake axolotl: training completed" in (home / "job.log").read_text()
    assert (home / "metrics.jsonl").is_file()


def test_runs_logs_prints_the_retrieved_job_log(trainer, run_cli):
    assert run_cli("train").exit_code == 0
    run_id = trainer.run()["id"]
    log = (trainer.dir / "runs" / run_id / "job.log").read_text()
    assert "fake axolotl: step 6/6" in log
    result = run_cli("runs", "logs", run_id)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == log
    tail = run_cli("runs", "logs", run_id, "--tail", "2")
    assert tail.stdout.splitlines() == log.splitlines()[-2:]


def test_stop_brings_the_snapshot_home_and_resume_uploads_it(trainer, run_cli):
    trainer.knobs(FAKE_AXOLOTL_HANG="1")
    process = trainer.spawn("train")
    run = trainer.wait_running()
    process.kill()  # kill -9 of the CLI: the job keeps running
    process.wait()
    assert group_alive(run["job"]["pid"])
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"train: snapshot of run {run['id']} requested: its job saves a checkpoint at the end "
        "of its current step, then stops"
    )
    record = trainer.run()
    step = record["snapshot"]["step"]
    checkpoint = f"output/checkpoint-{step}"
    assert record["state"] == "stopped" and record["message"] is None
    assert record["snapshot"] == {"checkpoint": checkpoint, "step": step, "reason": "requested"}
    assert lines[-3] == (
        f"train: run {run['id']} stopped at step {step} (requested): snapshot in "
        f"runs/{run['id']}/{checkpoint}; resume with `overbrainer train --resume-from {run['id']}`"
    )
    assert lines[-2] == (
        f"train: runs/{run['id']}/output also holds the partial model at step {step}, not a "
        "finished one"
    )
    assert lines[-1] == f"train: loss chart in runs/{run['id']}/loss.png"
    home, remote = trainer.dir / "runs" / run["id"], trainer.remote(run["id"])
    for name in ("trainer_state.json", "adapter_model.safetensors", "optimizer.pt"):
        assert (home / checkpoint / name).read_bytes() == (remote / checkpoint / name).read_bytes()
    assert (home / "snapshot.json").read_bytes() == (remote / "snapshot.json").read_bytes()
    assert (home / "job.log").is_file() and (home / "metrics.jsonl").is_file()
    assert not (home / "output" / "merged").exists()
    assert _group(run["job"]["pid"]) == []
    listing = " ".join(run_cli("runs", "ls").stdout.split())  # its columns, padded
    assert (
        f"stopped gpu {run['created']} step {step} (requested): partial model in output/"
        in listing
    )

    trainer.knobs(FAKE_AXOLOTL_STEPS=str(step + 3))
    resumed = run_cli("train", "--resume-from", run["id"])
    assert resumed.exit_code == 0, resumed.stderr
    new = trainer.run()
    assert new["resumed_from"] == run["id"] and new["state"] == "succeeded"
    assert (
        f"train: run {new['id']} resumes from the snapshot of run {run['id']} ({checkpoint})"
    ) in resumed.stderr
    assert resumed.stdout.startswith(f"train: run {new['id']} succeeded; step {step + 3}/")
    uploaded = trainer.remote(new["id"]) / "resume" / f"checkpoint-{step}"
    assert (uploaded / "trainer_state.json").read_bytes() == (
        home / checkpoint / "trainer_state.json"
    ).read_bytes()
    assert _log_steps(trainer, new["id"]) == [step + 1, step + 2, step + 3]
    assert (
        f"fake axolotl: resuming at step {step}"
        in (trainer.dir / "runs" / new["id"] / "job.log").read_text()
    )


def test_cancel_kills_the_remote_process_group_then_a_second_cancel_is_refused(trainer, run_cli):
    trainer.knobs(FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_CHILD="1")
    process = trainer.spawn("train")
    run = trainer.wait_running()
    process.kill()
    process.wait()
    pgid = run["job"]["pid"]
    child = int((trainer.remote(run["id"]) / "fake_axolotl.child").read_text())
    assert group_alive(pgid) and child in _pids()
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    record = trainer.run()
    assert record["state"] == "cancelled" and record["message"] is None
    assert not group_alive(pgid)  # the cancel waits until no process of the group runs
    assert child not in _pids() and pgid not in _pids()
    assert (trainer.remote(run["id"]) / "cancelled").is_file()
    assert (trainer.dir / "runs" / run["id"] / "job.log").is_file()  # retrieved best-effort
    again = run_cli("train", "cancel", run["id"])
    assert again.exit_code == 1
    assert again.stderr == f"error: run {run['id']} already ended: cancelled\n"


def test_kill_9_of_the_cli_then_attach_completes_the_run(trainer, run_cli):
    trainer.knobs(FAKE_AXOLOTL_STEPS="40")
    process = trainer.spawn("train")
    run = trainer.wait_running()
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert trainer.run()["state"] == "running"
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"train: run {run['id']} succeeded; step 40/40")
    assert result.stdout.splitlines()[1] == f"train: adapter in runs/{run['id']}/output"
    assert trainer.run()["state"] == "succeeded"
    assert (trainer.dir / "runs" / run["id"] / "output" / "adapter_model.safetensors").is_file()
    assert _log_steps(trainer, run["id"]) == list(range(1, 41))
    again = run_cli("train", "attach", run["id"])  # an ended run is reported from its files
    assert again.exit_code == 0
    assert again.stdout == result.stdout


def test_a_follow_that_loses_the_target_detaches_and_attach_completes_the_run(trainer, run_cli):
    trainer.knobs(FAKE_AXOLOTL_STEPS="120", FAKE_AXOLOTL_STEP_SECONDS="0.03")
    process = trainer.spawn("train")
    run = trainer.wait_running()
    run_id, pgid = run["id"], run["job"]["pid"]
    trainer.sshd.stop()
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    # Five retries, each failing (the first may meet the connection as it drops), then
    # the sixth gives up.
    warnings = [line for line in err.splitlines() if "cannot reach the job (" in line]
    cause = r"(cannot reach target|lost the connection to target) `gpu`: .+"
    assert len(warnings) == 5, err
    for k, line in enumerate(warnings, 1):
        assert re.fullmatch(rf"warning: cannot reach the job \({k}/5\): {cause}", line), line
    refused = f"cannot reach target `gpu`: 127.0.0.1 port {trainer.sshd.port}: connection refused"
    assert warnings[-1].endswith(refused)
    last = err.splitlines()[-1]
    assert last == (
        f"error: cannot reach the job of run {run_id}: {refused}; "
        f"follow it again with `overbrainer train attach {run_id}`"
    )
    # The job did not notice: it runs on, seen on the server's side by its pid.
    assert trainer.run()["state"] == "running"
    assert len(_group(pgid)) >= 3  # the wrapper, the job script, the fake axolotl
    assert not (trainer.remote(run_id) / "exit_code").exists()
    trainer.sshd.start()
    result = run_cli("train", "attach", run_id)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"train: run {run_id} succeeded; step 120/120")
    assert trainer.run()["state"] == "succeeded"
    assert _log_steps(trainer, run_id) == list(range(1, 121))


def test_the_hf_token_reaches_the_job_environment_and_nothing_else(trainer):
    trainer.knobs(FAKE_AXOLOTL_STEPS="60")
    hits: list[str] = []
    scans = 0
    scanning = threading.Event()
    scanning.set()

    def scan() -> None:  # client and server are this machine: every process is seen
        nonlocal scans
        while scanning.is_set():
            hits.extend(cmdlines_holding(TOKEN.encode()))
            scans += 1

    scanner = threading.Thread(target=scan, daemon=True)
    scanner.start()
    try:
        process = trainer.spawn("train", env={"OVERBRAINER_HF_TOKEN": TOKEN})
        run = trainer.wait_running()
        group = _group(run["job"]["pid"])
        assert len(group) >= 3  # the wrapper, the job script, the fake axolotl
        for pid in group:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            assert f"HF_TOKEN={TOKEN}".encode() in environ, pid
        out, err = process.communicate(timeout=60)
    finally:
        scanning.clear()
        scanner.join()
    assert process.returncode == 0, err
    assert hits == []
    assert scans > 10
    assert TOKEN not in out and TOKEN not in err
    record = trainer.run()
    assert record["state"] == "succeeded"
    run_dirs = (trainer.dir, trainer.remote(record["id"]))
    files = [path for top in run_dirs for path in top.rglob("*") if path.is_file()]
    names = {path.name for path in files}
    assert {"run.json", "job.log", "job.sh", "axolotl.yaml", "metrics.jsonl"} <= names
    assert [path for path in files if TOKEN.encode() in path.read_bytes()] == []


def test_ctrl_c_while_following_detaches_and_the_job_keeps_running(trainer, run_cli):
    trainer.knobs(FAKE_AXOLOTL_STEPS="80", FAKE_AXOLOTL_STEP_SECONDS="0.03")
    process = trainer.spawn("train")
    run = trainer.wait_running()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert out.endswith(
        f"interrupted: run {run['id']} keeps running on target `gpu`; follow it again "
        f"with `overbrainer train attach {run['id']}`\n"
    )
    assert _group(run["job"]["pid"])
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "succeeded"


def test_a_gpu_job_finds_the_programs_of_its_venv_by_name(trainer, run_cli):
    # Off the CPU, `axolotl train` execs `accelerate launch ...` by name (only `--launcher
    # python` does not): the venv's programs must be on the job's PATH, the venv being
    # named, not activated. Stand-ins: the venv's `axolotl` execs `accelerate` the same
    # way, and that one runs the fake.
    bin_dir = trainer.venv / "bin"
    (bin_dir / "axolotl").rename(bin_dir / "fake-axolotl")
    (bin_dir / "axolotl").write_text('#!/bin/sh\nexec accelerate "$@"\n')
    (bin_dir / "accelerate").write_text('#!/bin/sh\nexec "${0%/*}/fake-axolotl" "$@"\n')
    for name in ("axolotl", "accelerate"):
        (bin_dir / name).chmod(0o755)
    trainer.configure(extra='device = "gpu"\n')
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "succeeded"
    calls = (trainer.remote(trainer.run()["id"]) / "fake_axolotl.calls").read_text()
    assert calls == '["axolotl", "train", "axolotl.yaml"]\n'


# The real trainer over SSH: Axolotl 0.19 on the CPU with the tiny model (see
# tests/train/test_real_cli.py), with the fixtures of tests/train/conftest.py.


REAL_TRAINING = """
[training]
target = "gpu"
base_model = "{model}"
adapter = "lora"
chat_template = "tokenizer_default"
epochs = 1
sequence_len = 384
sample_packing = false
micro_batch_size = 1
gradient_accumulation_steps = 1
evals_per_epoch = 1
saves_per_epoch = 1

[targets.gpu]
kind = "ssh"
venv = "{venv}"
device = "cpu"
"""


@pytest.mark.real
def test_a_real_run_over_ssh_succeeds_with_an_adapter(trainer, run_cli, venv, tiny_model):
    lines = QUICKSTART_DATA.read_text().splitlines()
    (trainer.dir / "data" / "train.jsonl").write_text("\n".join(lines[:16]) + "\n")
    (trainer.dir / "data" / "eval.jsonl").write_text("\n".join(lines[16:19]) + "\n")
    text = (trainer.dir / "overbrainer.toml").read_text().split("\n[training]")[0]
    (trainer.dir / "overbrainer.toml").write_text(
        text + REAL_TRAINING.format(model=tiny_model, venv=venv)
    )
    # The sshd session says nothing of telemetry or the hub: the job script sets
    # AXOLOTL_DO_NOT_TRACK, DO_NOT_TRACK and HF_HUB_OFFLINE (a local base model) itself.
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr[-3000:]
    run = trainer.run()
    assert run["state"] == "succeeded"
    remote = trainer.remote(run["id"])
    output = trainer.dir / "runs" / run["id"] / "output"
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (output / name).read_bytes() == (remote / "output" / name).read_bytes()
    assert result.stdout.splitlines()[1] == f"train: adapter in runs/{run['id']}/output"
    assert _log_steps(trainer, run["id"]) == list(range(1, 17))
    yaml_text = (trainer.dir / "runs" / run["id"] / "axolotl.yaml").read_text()
    # Paths relative to the job directory: the runner runs every stage there.
    assert 'output_dir: "output"' in yaml_text and '- path: "data/train.jsonl"' in yaml_text
    assert "lora_mlp_kernel: false" in yaml_text and "bf16: false" in yaml_text
