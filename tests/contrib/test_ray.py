"""The ray target (contrib/overbrainer-ray) through the CLI, on a real local Ray cluster.

Needs Ray: skipped in the core's environment, run by ``.ci/run`` in the Ray package's own
venv (``$OVERBRAINER_RAY_VENV/bin/python -m pytest tests/contrib/test_ray.py``). The
package's own tests (the executor contract, secrets) are collected here too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from overbrainer.runs.lock import ProjectLock

pytest.importorskip("ray.job_submission", reason="needs Ray: run in the Ray package's venv")

from tests.helpers.real import REAL_TIMEOUT

PACKAGE = Path(__file__).parents[2] / "contrib" / "overbrainer-ray"
AXOLOTL_RAY_VENV = os.environ.get("OVERBRAINER_AXOLOTL_RAY_VENV", "")
"""A venv with Axolotl and ray[train] 2.60.0, for the two-worker test (read at import: the
tests' environment leaves out overbrainer's variables)."""
QUICKSTART_DATA = Path(__file__).parents[2] / "examples" / "quickstart" / "data" / "answers.jsonl"


def _package_tests():
    """The package's own tests, collected here too (they import its package)."""
    sys.path.insert(0, str(PACKAGE))
    spec = importlib.util.spec_from_file_location(
        "overbrainer_ray_contract", PACKAGE / "tests" / "test_contract.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_contract = _package_tests()
TestRayExecutor = _contract.TestRayExecutor
ray_cluster = _contract.ray_cluster


def ray_target(cluster, storage: Path, venv: Path, env: dict[str, str], address: str = "") -> str:
    variables = "".join(f'{name} = "{value}"\n' for name, value in env.items())
    return (
        f'\n[targets.cluster]\nkind = "ray"\naddress = "{address or cluster.address}"\n'
        f'storage = "{storage}"\nvenv = "{venv}"\ndevice = "cpu"\nlocal_paths = true\n'
        f"[targets.cluster.runtime_env.env_vars]\n{variables}"
    )


@pytest.fixture
def on_ray(trainer, ray_cluster, tmp_path, monkeypatch):
    """The trainer project with its training on the Ray cluster; ``configure(**knobs)``
    sets the fake trainer's knobs (they reach the job through ``runtime_env``)."""
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", "local,ray")
    storage = tmp_path / "storage"

    def configure(address: str = "", **knobs: str) -> None:
        text = (trainer.dir / "overbrainer.toml").read_text().split("\n[targets.cluster]")[0]
        text = text.replace('target = "local"', 'target = "cluster"')
        env = {"FAKE_AXOLOTL_STEP_SECONDS": "0.05", **knobs}
        target = ray_target(ray_cluster, storage, trainer.venv, env, address)
        (trainer.dir / "overbrainer.toml").write_text(text + target)

    def wait_training() -> dict:
        """The newest run once it is recorded running and its job logged a step."""

        def started() -> bool:
            runs = trainer.runs()
            if not runs or runs[-1]["state"] != "running":
                return False
            metrics = storage / runs[-1]["id"] / "metrics.jsonl"
            return metrics.exists() and '"log"' in metrics.read_text()

        trainer.wait_for(started, timeout=90, what="a running job on Ray")
        return trainer.run()

    trainer.configure_ray = configure
    trainer.wait_training = wait_training
    trainer.storage = storage
    configure()
    return trainer


def test_train_on_ray_then_logs_and_listing(on_ray, ray_cluster, run_cli, monkeypatch, tmp_path):
    # The address in the file is wrong; the environment overrides it, like every key.
    on_ray.configure_ray(address="http://127.0.0.1:9", FAKE_AXOLOTL_STEPS="4")
    monkeypatch.setenv("OVERBRAINER_TARGETS__CLUSTER__ADDRESS", ray_cluster.address)
    secret = "hf_" + secrets.token_hex(16)
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", secret)
    assert "ray  overbrainer-ray 0.1.0  kinds: ray" in run_cli("plugins").stdout
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = on_ray.run()
    assert run["state"] == "succeeded"
    assert run["remote_dir"] == str(on_ray.storage / run["id"])
    assert run["job"]["data"]["submission_id"].startswith(f"overbrainer-{run['id']}-")
    home = on_ray.dir / "runs" / run["id"]
    assert (home / "output" / "adapter_model.safetensors").read_bytes() == b"fake adapter weights"
    assert result.stdout.splitlines()[0].startswith(f"train: run {run['id']} succeeded; step 4/4")
    assert "train: job exited with code 0" in result.stderr
    steps = [e["step"] for e in on_ray.metrics(run["id"]) if e["event"] == "log" and "loss" in e]
    assert steps == [1, 2, 3, 4]
    logs = run_cli("runs", "logs", run["id"])
    assert logs.exit_code == 0, logs.stderr
    assert "fake axolotl: training completed" in logs.stdout
    assert f"Running entrypoint for job {run['job']['data']['submission_id']}" in logs.stdout
    assert f"succeeded  cluster  {run['created']}" in run_cli("runs", "ls").stdout
    # The token went to the job by file (the package's tests show the job reads it): Ray's
    # dashboard and every file left here hold none of it.
    assert secret.encode() not in _contract.dashboard_jobs(ray_cluster.address)
    for place in (tmp_path, ray_cluster.root):
        for path in place.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"


def test_an_unreachable_cluster_fails_the_run_and_leaves_no_secret(on_ray, run_cli, monkeypatch):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    on_ray.configure_ray(address=f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_" + secrets.token_hex(16))
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"error: target `cluster`: cannot reach the Ray cluster at http://127.0.0.1:{port} "
        "to submit the job: ConnectionError\n"
    )
    run = on_ray.run()
    assert run["state"] == "failed"
    assert not (on_ray.storage / run["id"] / ".secrets.json").exists()


def test_ctrl_c_detaches_attach_follows_stop_snapshots_and_resume_continues(on_ray, run_cli):
    on_ray.configure_ray(FAKE_AXOLOTL_HANG="1")
    process = on_ray.spawn("train")
    run = on_ray.wait_training()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.endswith(
        f"interrupted: run {run['id']} keeps running on target `cluster`; follow it "
        f"again with `overbrainer train attach {run['id']}`\n"
    )
    attached = on_ray.spawn("train", "attach", run["id"])
    lock = ProjectLock(on_ray.dir)
    on_ray.wait_for(lambda: lock.holder() == attached.pid, 60, "attach to follow the run")
    running = run_cli("runs", "logs", run["id"])  # the log of a running job, from Ray
    assert running.exit_code == 0, running.stderr
    assert "fake axolotl: step" in running.stdout
    stopped = run_cli("train", "stop", run["id"])
    assert stopped.exit_code == 0, stopped.stderr
    assert stopped.stdout.splitlines()[1] == (
        f"train: overbrainer (pid {attached.pid}) is using this project: if it follows run "
        f"{run['id']}, it collects the snapshot; if not, collect it with "
        f"`overbrainer train attach {run['id']}`"
    )
    out, err = attached.communicate(timeout=120)
    assert attached.returncode == 0, err
    assert f"train: run {run['id']} stopped at step" in out
    record = on_ray.run()
    step = record["snapshot"]["step"]
    assert record["state"] == "stopped"
    assert record["snapshot"]["reason"] == "requested"
    assert (on_ray.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()

    on_ray.configure_ray(FAKE_AXOLOTL_STEPS=str(step + 3))
    resumed = run_cli("train", "--resume-from", run["id"])
    assert resumed.exit_code == 0, resumed.stderr
    new = on_ray.run()
    assert new["resumed_from"] == run["id"] and new["state"] == "succeeded"
    steps = [e["step"] for e in on_ray.metrics(new["id"]) if e["event"] == "log" and "loss" in e]
    assert steps == [step + 1, step + 2, step + 3]


def test_rays_own_stop_is_a_snapshot_that_attach_records(on_ray, ray_cluster, run_cli):
    from ray.job_submission import JobSubmissionClient

    on_ray.configure_ray(FAKE_AXOLOTL_HANG="1")
    process = on_ray.spawn("train")
    run = on_ray.wait_training()
    process.kill()  # kill -9 of the CLI: the job keeps running on Ray
    process.wait()
    job = run["job"]["data"]["submission_id"]
    assert JobSubmissionClient(ray_cluster.address).stop_job(job)  # `ray job stop`
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    record = on_ray.run()
    assert record["state"] == "stopped"
    assert record["snapshot"]["reason"] == "requested"
    step = record["snapshot"]["step"]
    assert (on_ray.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()
    assert _settled_status(ray_cluster.address, job) == "STOPPED"


def test_cancel_stops_the_job_on_ray_and_logs_stay_readable(on_ray, ray_cluster, run_cli):
    on_ray.configure_ray(FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_CHILD="1")
    process = on_ray.spawn("train")
    run = on_ray.wait_training()
    process.kill()  # kill -9 of the CLI: the job keeps running on Ray
    process.wait()
    child = int((on_ray.storage / run["id"] / "fake_axolotl.child").read_text())
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    assert on_ray.run()["state"] == "cancelled"
    assert not Path(f"/proc/{child}").exists() or _zombie(child)

    job = run["job"]["data"]["submission_id"]
    assert _settled_status(ray_cluster.address, job) == "STOPPED"
    again = run_cli("train", "cancel", run["id"])
    assert again.exit_code == 1
    assert again.stderr == f"error: run {run['id']} already ended: cancelled\n"
    logs = run_cli("runs", "logs", run["id"])
    assert logs.exit_code == 0, logs.stderr
    # Cancelled as soon as training started: the trainer may not have logged a step yet.
    assert "overbrainer: stage train:" in logs.stdout
    assert "overbrainer: cancelled" in logs.stdout


def test_cancel_acts_only_on_the_run_s_own_job(on_ray, ray_cluster, run_cli):
    """run.json is a file anyone may edit: a submission id that is not the run's is
    refused before anything is stopped."""
    on_ray.configure_ray(FAKE_AXOLOTL_HANG="1")
    process = on_ray.spawn("train")
    run = on_ray.wait_training()
    process.kill()
    process.wait()
    record = on_ray.dir / "runs" / run["id"] / "run.json"
    data = json.loads(record.read_text())
    own = data["job"]["data"]["submission_id"]
    data["job"]["data"]["submission_id"] = "raysubmit_someone_else"
    record.write_text(json.dumps(data))
    refused = run_cli("train", "cancel", run["id"])
    assert refused.exit_code == 1
    assert refused.stderr.endswith(
        f"error: run {run['id']}: Ray job raysubmit_someone_else is not this run's (its id "
        f"does not start with overbrainer-{run['id']}-): nothing was stopped; the run's "
        "record may have been edited\n"
    )
    data["job"]["data"]["submission_id"] = own
    record.write_text(json.dumps(data))
    assert run_cli("train", "cancel", run["id"]).exit_code == 0


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


REAL_TRAINING = """
[training]
target = "cluster"
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
"""


@pytest.mark.real
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_real_axolotl_run_on_ray_succeeds_with_an_adapter(
    on_ray, venv, tiny_model, hf_home, ray_cluster, run_cli
):
    lines = QUICKSTART_DATA.read_text().splitlines()
    (on_ray.dir / "data" / "train.jsonl").write_text("\n".join(lines[:16]) + "\n")
    (on_ray.dir / "data" / "eval.jsonl").write_text("\n".join(lines[16:19]) + "\n")
    text = (on_ray.dir / "overbrainer.toml").read_text().split("\n[training]")[0]
    env = {
        "AXOLOTL_DO_NOT_TRACK": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": hf_home,
    }
    target = ray_target(ray_cluster, on_ray.storage, venv, env)
    (on_ray.dir / "overbrainer.toml").write_text(
        text + REAL_TRAINING.format(model=tiny_model) + target
    )
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = on_ray.run()
    assert run["state"] == "succeeded"
    output = on_ray.dir / "runs" / run["id"] / "output"
    assert (output / "adapter_model.safetensors").is_file()
    steps = [e["step"] for e in on_ray.metrics(run["id"]) if e["event"] == "log" and "loss" in e]
    assert steps == list(range(1, 17))


@pytest.mark.real
@pytest.mark.timeout(REAL_TIMEOUT)
def test_two_workers_on_the_cpu_are_refused_by_axolotls_ray_train(
    on_ray, venv, tiny_model, hf_home, ray_cluster, run_cli
):
    """``workers = 2`` on this CPU cluster: Axolotl 0.19 builds its Ray Train trainer with
    ``use_gpu=True`` whatever the config, so each worker asks for a GPU the cluster does not
    have and the workers never start (Ray retries for ever). Cancel ends it all."""
    if not AXOLOTL_RAY_VENV:
        pytest.skip("OVERBRAINER_AXOLOTL_RAY_VENV (Axolotl with ray[train] 2.60.0) is not set")
    lines = QUICKSTART_DATA.read_text().splitlines()
    (on_ray.dir / "data" / "train.jsonl").write_text("\n".join(lines[:16]) + "\n")
    (on_ray.dir / "data" / "eval.jsonl").write_text("\n".join(lines[16:19]) + "\n")
    text = (on_ray.dir / "overbrainer.toml").read_text().split("\n[training]")[0]
    env = {
        "AXOLOTL_DO_NOT_TRACK": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": hf_home,
    }
    target = ray_target(ray_cluster, on_ray.storage, Path(AXOLOTL_RAY_VENV), env)
    target = target.replace("local_paths = true\n", "local_paths = true\nworkers = 2\n")
    (on_ray.dir / "overbrainer.toml").write_text(
        text + REAL_TRAINING.format(model=tiny_model) + target
    )
    process = on_ray.spawn("train")
    on_ray.wait_for(lambda: bool(on_ray.runs()) and on_ray.run()["state"] == "running", 120)
    run = on_ray.run()
    yaml_text = (on_ray.storage / run["id"] / "axolotl.yaml").read_text()
    assert "use_ray: true\nray_num_workers: 2\nresources_per_worker:\n  CPU: 1\n" in yaml_text
    asked = "Attempting to start training worker group of size 2 with the following resources"
    on_ray.wait_for(
        lambda: asked in run_cli("runs", "logs", run["id"]).stdout, 300, "Ray Train's request"
    )
    log = run_cli("runs", "logs", run["id"]).stdout
    assert f"{asked}: [{{'CPU': 1, 'GPU': 1}}] * 2" in log
    process.kill()
    process.wait()
    cancelled = run_cli("train", "cancel", run["id"])
    assert cancelled.exit_code == 0, cancelled.stderr
    assert on_ray.run()["state"] == "cancelled"
    _, err = process.communicate()
    assert "workers = 2 on the CPU: Axolotl 0.19 asks Ray Train for one GPU per worker" in err


def test_a_runtime_env_ray_cannot_build_fails_the_run_with_rays_reason(
    on_ray, run_cli, monkeypatch
):
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_" + secrets.token_hex(16))
    config = on_ray.dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace(
            "[targets.cluster.runtime_env.env_vars]",
            '[targets.cluster.runtime_env]\nconda = "no-such-env"\n'
            "[targets.cluster.runtime_env.env_vars]",
        )
    )
    result = run_cli("train")
    run = on_ray.run()
    assert result.exit_code == 1
    last = result.stderr.splitlines()[-1]
    # The job log's last error line comes with it: Ray's own reason (its wording is Ray's).
    assert last.startswith("error: the job stopped without an exit code: ")
    assert "Error" in last
    assert last.endswith(f" (see runs/{run['id']}/job.log)")
    warning = "warning: target `cluster`: Ray ended the job: runtime_env setup failed"
    assert result.stderr.count(warning) == 1
    assert run["state"] == "failed"
    log = (on_ray.dir / "runs" / run["id"] / "job.log").read_text()
    assert "[ray] job failed before its entrypoint ran:\nruntime_env setup failed" in log
    # The runner never ran to read and delete the secrets file: the target deleted it.
    assert not (on_ray.storage / run["id"] / ".secrets.json").exists()


def _settled_status(address: str, job: str) -> str:
    """The Ray job's status once it is no longer RUNNING: Ray writes it a moment after
    the entrypoint ends (60 s at most)."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(address)
    deadline = time.monotonic() + 60
    status = str(client.get_job_status(job))
    while status == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.2)
        status = str(client.get_job_status(job))
    return status
