"""Training runs on the runpod target end to end, through the CLI, on the fake Runpod:
each run's pod is made, reached with its host key pinned, and deleted once the results are
home (or left to its watchdog, which deletes it on its own)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from tests.helpers.fake_runpod import API_KEY
from tests.helpers.pod_trainer import PodTrainer
from tests.helpers.tools import need

from overbrainer.plugin import layout

HF_TOKEN = "hf_runpodLifecycleToken7c1e9a44"


def test_a_run_trains_on_its_pod_which_is_deleted_once_the_results_are_home(trainer, run_cli):
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    assert result.stdout.startswith(f"train: run {run_id} succeeded; step 6/6")
    assert (trainer.dir / "runs" / run_id / "output" / "adapter_model.safetensors").is_file()
    pod = trainer.pod(run_id)
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert pod["pod_name"] == f"overbrainer-{run_id}-1" and pod["gpu_type"] == "NVIDIA A40"
    assert pod["estimated_spend"] is not None
    assert not trainer.fake.alive()
    # Both delete it once .pod/retrieved is written: whichever comes first.
    assert trainer.fake.terminated_by[pod["pod_id"]] in ("client", "watchdog")
    assert (trainer.dir / "runs" / run_id / "pod" / "boot.log").is_file()
    assert not trainer.fake.secrets, "the host key's secret outlived the start"
    listing = run_cli("runs", "ls")
    assert "pod deleted about $" in listing.stdout
    config = trainer.dir / "runs" / run_id / "ssh" / "config"
    assert f"Host overbrainer-{run_id}" in config.read_text()


def test_an_image_that_starts_its_own_sshd_on_port_22_is_no_obstacle(trainer, run_cli):
    # axolotl-cloud's entrypoint starts the image's sshd (its own host key) on port 22
    # when the pod has a PUBLIC_KEY, then runs the pod's command.
    trainer.fake.image_sshd = 22
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    pod = trainer.pod(trainer.run()["id"])
    assert pod["state"] == "deleted"
    create = [r for r in trainer.fake.requests if "podFindAndDeployOnDemand" in r][-1]
    assert 'ports: "22/tcp"' not in json.loads(create)["query"]


def test_a_pod_whose_sshd_cannot_start_fails_at_once_and_is_deleted(trainer, run_cli):
    from overbrainer_runpod.pods import SSH_PORT

    trainer.fake.image_sshd = SSH_PORT  # the port is taken: the pod's sshd stops at once
    result = run_cli("train")
    assert result.exit_code == 1
    assert "vanished while it was starting" in result.stderr
    assert not trainer.fake.alive()
    (pod,) = trainer.fake.deleted.values()
    assert trainer.fake.terminated_by[pod.id] == "watchdog"
    boot = (pod.dir / "root" / ".overbrainer-pod" / "boot.log").read_text()
    assert "bootstrap failed: sshd stopped at once" in boot


def test_capacity_falls_back_to_the_next_gpu_type(trainer, run_cli):
    trainer.fake.no_capacity = {"NVIDIA A40"}
    trainer.fake.forbidden = {"NVIDIA L40S"}
    trainer.configure(gpu_types='["NVIDIA A40", "NVIDIA L40S", "NVIDIA RTX A5000"]')
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    pod = trainer.pod(trainer.run()["id"])
    assert [a["outcome"] for a in pod["attempts"]] == ["capacity", "forbidden", "created"]
    assert pod["gpu_type"] == "NVIDIA RTX A5000"


def test_a_lookup_that_fails_once_does_not_end_the_wait_for_the_pod(trainer, run_cli):
    trainer.fake.flaky_gets = 2
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert trainer.fake.flaky_gets == 0
    assert trainer.pod(trainer.run()["id"])["state"] == "deleted"
    # A new pod the API does not know yet, once, has not vanished.
    trainer.fake.glitch_not_found = 1
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert trainer.fake.glitch_not_found == 0
    assert trainer.pod(trainer.run()["id"])["state"] == "deleted"


def test_a_lookup_that_fails_once_does_not_end_the_deletion_s_confirmation(trainer, run_cli):
    result = run_cli("train", "--keep-pod")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    trainer.fake.flaky_gets = 1
    removed = run_cli("pod", "rm", run_id)
    assert removed.exit_code == 0, removed.stderr
    assert trainer.fake.flaky_gets == 0
    assert trainer.pod(run_id)["state"] == "deleted"


def test_no_gpu_type_placed_says_why(trainer, run_cli):
    trainer.fake.no_capacity = {"NVIDIA A40", "NVIDIA L40S"}
    trainer.configure(gpu_types='["NVIDIA A40", "NVIDIA L40S"]')
    result = run_cli("train")
    assert result.exit_code == 1
    assert "error: no gpu_types entry could be placed: NVIDIA A40: There are no longer" in (
        result.stderr
    )
    assert not trainer.fake.alive()


def test_no_credit_stops_at_once(trainer, run_cli):
    trainer.fake.no_credit = True
    trainer.configure(gpu_types='["NVIDIA A40", "NVIDIA L40S"]')
    result = run_cli("train")
    assert result.exit_code == 1
    assert "balance is too low" in result.stderr
    assert trainer.fake.calls.count("create") == 1


def test_an_ambiguous_create_leaves_exactly_one_pod(trainer, run_cli):
    trainer.fake.ambiguous_creates = 1
    trainer.fake.dropped_creates = 0
    result = run_cli("train", "--keep-pod")
    assert result.exit_code == 0, result.stderr
    assert trainer.fake.calls.count("create") == 1
    assert len(trainer.fake.alive()) == 1
    run_id = trainer.run()["id"]
    assert trainer.pod(run_id)["state"] == "kept"
    assert f"ssh -F runs/{run_id}/ssh/config overbrainer-{run_id}" in result.stderr
    assert f"overbrainer pod rm {run_id}" in result.stderr
    removed = run_cli("pod", "rm", run_id)
    assert removed.exit_code == 0, removed.stderr
    assert not trainer.fake.alive()
    assert trainer.pod(run_id)["deleted_by"] == "pod rm"


def test_a_create_answered_without_a_pod_id_is_reconciled_by_name(trainer, run_cli):
    trainer.fake.null_creates = 1
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert trainer.fake.calls.count("create") == 1
    pod = trainer.pod(trainer.run()["id"])
    assert [a["outcome"] for a in pod["attempts"]] == ["created"]
    assert pod["state"] == "deleted" and not trainer.fake.alive()


def test_no_api_key_is_refused(trainer, run_cli, monkeypatch):
    monkeypatch.delenv("OVERBRAINER_RUNPOD__API_KEY")
    result = run_cli("train")
    assert result.exit_code == 1
    assert "error: no Runpod API key: set OVERBRAINER_RUNPOD__API_KEY" in result.stderr


def test_a_wrong_key_is_a_401(trainer, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_RUNPOD__API_KEY", "rpa_WRONG")
    result = run_cli("pod", "ls")
    assert result.exit_code == 1
    assert "the Runpod API refused the key (HTTP 401)" in result.stderr


def test_the_watchdog_deletes_a_pod_whose_client_was_killed_while_following(trainer):
    trainer.fake.pod_env["FAKE_AXOLOTL_STEPS"] = "30"
    cli = trainer.spawn("train", env={"OVERBRAINER_HF_TOKEN": HF_TOKEN})
    record = _wait_running(trainer)
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    # The job ends, nobody retrieves it: the retrieve grace (1 "minute") passes.
    trainer.fake.wait_until(lambda: not trainer.fake.alive(), timeout=60, what="the deletion")
    pod_id = trainer.pod(record["id"])["pod_id"]
    assert trainer.fake.terminated_by[pod_id] == "watchdog"


def test_the_watchdog_deletes_a_pod_whose_job_never_started(trainer):
    trainer.fake.port_delay = 10**6  # the client never learns the SSH port
    cli = trainer.spawn("train")
    trainer.fake.wait_until(trainer.fake.alive, what="a pod")
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    pod = trainer.fake.alive()[0]
    trainer.fake.wait_until(lambda: not trainer.fake.alive(), timeout=60, what="the deletion")
    assert trainer.fake.terminated_by[pod.id] == "watchdog"


def test_the_watchdog_tries_again_when_its_delete_fails(trainer):
    trainer.fake.port_delay = 10**6  # the client never learns the SSH port
    trainer.fake.failing_terminates = 2
    cli = trainer.spawn("train")
    trainer.fake.wait_until(trainer.fake.alive, what="a pod")
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    pod = trainer.fake.alive()[0]
    trainer.fake.wait_until(lambda: not trainer.fake.alive(), timeout=60, what="the deletion")
    assert trainer.fake.terminated_by[pod.id] == "watchdog"
    log = (pod.dir / "root" / ".overbrainer-pod" / "watchdog.log").read_text()
    assert log.count("the delete failed, trying again") == 2


@pytest.mark.parametrize("shell", ["dash", "busybox"])
def test_the_watchdog_asks_for_a_snapshot_before_its_deadline_then_deletes(trainer, run_cli, shell):
    trainer.fake.shell = need(shell)
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    # max_hours = 20 "minutes" (10 s): the snapshot is asked for 15 "minutes" (7.5 s) before.
    trainer.configure(max_hours=20 / 60)
    result = run_cli("train")
    run_id = trainer.run()["id"]
    assert result.exit_code == 0, result.stderr
    assert f"train: run {run_id} stopped at step" in result.stdout
    assert "(deadline)" in result.stdout
    assert not trainer.fake.alive()


def test_detach_attach_stop_resume_and_cancel(trainer, run_cli):
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    cli = trainer.spawn("train")
    record = _wait_running(trainer)
    run_id = record["id"]
    os.kill(cli.pid, signal.SIGINT)
    out, _ = cli.communicate(timeout=60)
    assert cli.returncode == 0
    assert f"interrupted: run {run_id} keeps running on target `gpu`" in out
    assert trainer.pod(run_id)["state"] == "running"
    stopped = run_cli("train", "stop", run_id)
    assert stopped.exit_code == 0, stopped.stderr
    assert f"train: run {run_id} stopped at step" in stopped.stdout
    assert trainer.pod(run_id)["state"] == "deleted"
    trainer.fake.pod_env.pop("FAKE_AXOLOTL_HANG")
    resumed = run_cli("train", "--resume-from", run_id)
    assert resumed.exit_code == 0, resumed.stderr
    assert trainer.pod(trainer.run()["id"])["state"] == "deleted"
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    cli = trainer.spawn("train")
    third = _wait_running(trainer)["id"]
    os.kill(cli.pid, signal.SIGINT)
    cli.communicate(timeout=60)
    cancelled = run_cli("train", "cancel", third)
    assert cancelled.exit_code == 0, cancelled.stderr
    assert f"train: run {third} cancelled" in cancelled.stdout
    assert trainer.pod(third)["state"] == "deleted"
    assert not trainer.fake.alive()


def test_secrets_never_reach_the_api_the_pod_env_or_a_file(trainer, run_cli, monkeypatch):
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", HF_TOKEN)
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    private = (trainer.dir / "runs" / run_id / "ssh" / "client_ed25519").read_text()
    body = private.split("-----")[2].strip().splitlines()[1]
    # The host's private key went only into the Runpod secret, then the pod's state dir.
    (handed,) = [r for r in trainer.fake.requests if "secretCreate" in r]
    host_key = json.loads(handed)["query"].split('value: "')[1].split('"')[0]
    assert len(host_key) > 100
    for secret in (API_KEY, HF_TOKEN, body, host_key):
        creates = [r for r in trainer.fake.requests if "podFindAndDeployOnDemand" in r]
        assert creates and not any(secret in request for request in creates)
        assert secret not in json.dumps([p.env for p in trainer.fake.deleted.values()])
        assert secret not in result.stderr and secret not in result.stdout
        for path in (trainer.dir / "runs" / run_id).rglob("*"):
            if path.is_file() and path.name != "client_ed25519":
                assert secret not in path.read_text(errors="replace"), path
        for pod in trainer.fake.deleted.values():
            for path in (pod.dir / "root" / ".overbrainer-pod").glob("*.log"):
                assert secret not in path.read_text(errors="replace"), path


def _wait_running(trainer: PodTrainer) -> dict:
    def started() -> bool:
        runs = trainer.runs()
        if not runs or runs[-1]["state"] != "running":
            return False
        metrics = trainer.remote(runs[-1]["id"]) / "metrics.jsonl"
        return metrics.exists() and '"log"' in metrics.read_text()

    trainer.wait_for(started, timeout=60, what="a running job")
    return trainer.run()


def test_a_kept_pod_is_reached_with_ssh_and_its_host_key_pinned(trainer, run_cli):
    ssh, ssh_keygen = need("ssh"), need("ssh-keygen")
    trainer.fake.port_delay = 5  # the SSH port is known only after a few lookups
    result = run_cli("train", "--keep-pod")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    pod = trainer.pod(run_id)
    assert pod["state"] == "kept" and pod["host_key"].startswith("ssh-ed25519 ")
    ssh_dir = trainer.dir / "runs" / run_id / "ssh"
    assert pod["host_key"] in (ssh_dir / "known_hosts").read_text()
    assert oct((ssh_dir / "client_ed25519").stat().st_mode & 0o777) == "0o600"
    done = subprocess.run(
        [ssh, "-F", str(ssh_dir / "config"), f"overbrainer-{run_id}", "echo", "on-the-pod"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "on-the-pod\n"
    # The same name with another host key is refused, never accepted.
    other = subprocess.run(
        [ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(trainer.dir / "k")],
        check=True,
    )
    assert other.returncode == 0
    known = ssh_dir / "known_hosts"
    where = known.read_text().split()[0]
    known.write_text(f"{where} {(trainer.dir / 'k.pub').read_text().split()[0]} "
                     f"{(trainer.dir / 'k.pub').read_text().split()[1]}\n")  # fmt: skip
    refused = subprocess.run(
        [ssh, "-F", str(ssh_dir / "config"), f"overbrainer-{run_id}", "true"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert refused.returncode != 0
    assert "HOST IDENTIFICATION HAS CHANGED" in refused.stderr or "verification failed" in (
        refused.stderr
    )
    removed = run_cli("pod", "rm", run_id)
    assert removed.exit_code == 0, removed.stderr
    assert not trainer.fake.alive()


def test_pod_rm_refuses_results_not_home_unless_forced(trainer, run_cli):
    result = run_cli("train", "--keep-pod")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    path = trainer.dir / "runs" / run_id / "pod.json"
    path.write_text(json.dumps({**trainer.pod(run_id), "state": "awaiting_retrieval"}))
    refused = run_cli("pod", "rm", "latest")  # a run name as every command takes one
    assert refused.exit_code == 1
    assert f"error: the results of run {run_id} are still on pod" in refused.stderr
    assert f"overbrainer train attach {run_id}" in refused.stderr
    assert trainer.fake.alive()
    forced = run_cli("pod", "rm", run_id, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert not trainer.fake.alive()


def test_a_broken_record_of_another_run_does_not_stop_a_start(trainer, run_cli):
    from overbrainer_runpod.api import Enum, RunpodApi

    api = RunpodApi(API_KEY, trainer.fake.url)
    api.create({"name": "overbrainer-old_20250101-000000-1", "gpuTypeId": "NVIDIA A40",
                "cloudType": Enum("SECURE"), "dockerArgs": "sleep 30"})  # fmt: skip
    broken = trainer.dir / "runs" / "old_20250101-000000"
    broken.mkdir(parents=True)
    (broken / "pod.json").write_text("{not json")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert "overbrainer pod rm old_20250101-000000" in result.stderr


def test_pod_rm_refuses_a_running_run_unless_forced(trainer, run_cli):
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    cli = trainer.spawn("train")
    run_id = _wait_running(trainer)["id"]
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    refused = run_cli("pod", "rm", run_id)
    assert refused.exit_code == 1
    assert f"error: run {run_id} may still be running on pod" in refused.stderr
    assert "pod running" in run_cli("runs", "ls").stdout
    forced = run_cli("pod", "rm", run_id, "--force")
    assert forced.exit_code == 0, forced.stderr
    assert f"of run {run_id} deleted" in forced.stdout
    assert not trainer.fake.alive()


def test_a_bootstrap_failure_deletes_the_pod(trainer, run_cli):
    trainer.fake.drop_secrets = True  # the host key never reaches the pod
    result = run_cli("train")
    assert result.exit_code == 1
    assert "vanished while it was starting" in result.stderr or "failed to start" in (result.stderr)
    pod = next(iter(trainer.fake.deleted.values()))
    boot = (pod.dir / "root" / ".overbrainer-pod" / "boot.log").read_text()
    assert "bootstrap failed: no host key reached the pod" in boot
    assert not trainer.fake.alive()


def test_the_cli_killed_during_the_create_leaves_a_pod_the_watchdog_deletes(trainer):
    trainer.fake.create_delay = 1.0
    cli = trainer.spawn("train")
    trainer.wait_for(
        lambda: any("podFindAndDeployOnDemand" in r for r in trainer.fake.requests),
        what="the create",
    )
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    trainer.fake.wait_until(trainer.fake.alive, what="the pod")
    pod = trainer.fake.alive()[0]
    # Its record was saved before the create: the pod's name is known at home.
    (record,) = list((trainer.dir / "runs").glob("*/pod.json"))
    assert json.loads(record.read_text())["attempts"][0]["name"] == pod.name
    trainer.fake.wait_until(lambda: not trainer.fake.alive(), timeout=60, what="the deletion")
    assert trainer.fake.terminated_by[pod.id] == "watchdog"


def test_a_pod_found_missing_once_is_not_taken_for_gone(trainer, run_cli):
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    cli = trainer.spawn("train")
    run_id = _wait_running(trainer)["id"]
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    from overbrainer_runpod.api import RunpodApi
    from overbrainer_runpod.pods import PodLifecycle
    from overbrainer_runpod.timing import timing

    api = RunpodApi(API_KEY, trainer.fake.url)
    life = PodLifecycle(api, trainer.dir / "runs" / run_id, timing())
    trainer.fake.glitch_not_found = 1
    with pytest.raises(Exception, match="is still listed after its deletion"):
        life.confirm_gone("test")
    assert trainer.fake.alive()
    assert trainer.pod(run_id)["state"] == "running"


def test_auto_picks_the_cheapest_type_in_stock_with_enough_vram(trainer, run_cli):
    trainer.fake.stock = {"NVIDIA A40": "None"}
    trainer.configure(gpu_types='"auto"', extra="min_vram_gb = 40\nmax_price_per_hour = 1.0\n")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert trainer.pod(trainer.run()["id"])["gpu_type"] == "NVIDIA L40S"


def test_orphan_pods_are_warned_about_at_start(trainer, run_cli):
    from overbrainer_runpod.api import Enum, RunpodApi

    api = RunpodApi(API_KEY, trainer.fake.url)
    api.create({"name": "overbrainer-gone_20250101-000000-1", "gpuTypeId": "NVIDIA A40",
                "cloudType": Enum("SECURE"), "dockerArgs": "sleep 30"})  # fmt: skip
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    assert "overbrainer-gone_20250101-000000-1" in result.stderr
    assert "overbrainer pod rm gone_20250101-000000" in result.stderr
    listed = run_cli("pod", "ls")
    assert "run gone_20250101-000000 (not of this project)" in listed.stdout
    removed = run_cli("pod", "rm", "gone_20250101-000000")
    assert removed.exit_code == 0, removed.stderr
    assert not trainer.fake.alive()
    assert not (trainer.dir / "runs" / "gone_20250101-000000").exists()


def test_pod_rm_finds_the_pod_of_a_create_whose_answer_never_came(trainer, run_cli):
    trainer.configure(boot_grace=60)
    trainer.fake.create_delay = 0.5
    cli = trainer.spawn("train")
    trainer.wait_for(
        lambda: any("podFindAndDeployOnDemand" in r for r in trainer.fake.requests),
        what="the create",
    )
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    trainer.fake.wait_until(trainer.fake.alive, what="the pod")
    (record,) = list((trainer.dir / "runs").glob("*/pod.json"))
    run_id = record.parent.name
    assert json.loads(record.read_text())["pod_id"] is None
    removed = run_cli("pod", "rm", run_id)
    assert removed.exit_code == 0, removed.stderr
    assert not trainer.fake.alive()
    assert set(trainer.fake.terminated_by.values()) == {"client"}
    assert trainer.pod(run_id)["deleted_by"] == "pod rm"


def test_a_follower_s_lease_keeps_the_pod_past_its_deadline(trainer, run_cli, monkeypatch):
    # A minute lasts 0.2 s: the deadline 5 s after the create, a lease lasts 6 s, renewed
    # every second while metrics flow until 4 s past the deadline; the job ignores the
    # snapshot asked for and ends after 4 s or more. Without the lease the watchdog would
    # delete the pod at 5 s.
    monkeypatch.setenv(
        "RUNPOD_OVERBRAINER_TIMING",
        "minute=0.2,tick=0.2,poll=0.05,confirm=0.02,lease_minutes=30,client_guard_minutes=20",
    )
    trainer.configure(max_hours=25 / 60, boot_grace=30)
    trainer.fake.pod_env.update(
        {"FAKE_AXOLOTL_STEPS": "80", "FAKE_AXOLOTL_STEP_SECONDS": "0.05",
         "FAKE_AXOLOTL_IGNORE_SNAPSHOT": "1"}
    )  # fmt: skip
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    assert "succeeded; step 80/80" in result.stdout
    watchdog = (trainer.dir / "runs" / run_id / "pod" / "watchdog.log").read_text()
    assert "asking the job for a snapshot (deadline)" in watchdog
    assert "past max_hours" not in watchdog
    pod = trainer.pod(run_id)
    assert pod["state"] == "deleted"
    end = next(e for e in trainer.metrics(run_id) if e["event"] == "end")
    assert end["time"] > pod["delete_at"], "the job did not run past the deadline"


def test_the_cli_killed_during_the_retrieval_leaves_no_pod(trainer):
    cli = trainer.spawn("train")
    assert cli.stderr is not None
    for line in cli.stderr:
        if "train: retrieving results" in line:
            break
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    trainer.fake.wait_until(lambda: not trainer.fake.alive(), timeout=60, what="the deletion")


def test_results_not_home_leave_the_pod_awaiting_retrieval_for_its_watchdog(
    trainer, fake_runpod, tmp_path
):
    import overbrainer_runpod
    from overbrainer.plugin import JobSpec, Project, RunRecord
    from overbrainer.testing.jobs import contract_settings, manager_with, prepare_job

    plugins = manager_with(overbrainer_runpod.plugin)
    table = {"kind": "runpod", "gpu_types": ["NVIDIA A40"], "max_hours": 1,
             "venv": str(trainer.venv), "retrieve_grace_minutes": 1}  # fmt: skip
    model = plugins.kinds["runpod"].model_validate(table)
    project = Project(trainer.dir, contract_settings("gpu", model), dict(os.environ))
    hook = plugins.hook
    executor = hook.create_executor(name="gpu", target=model, project=project, run=None)
    run_id = "demo_20260101-000000"
    remote = hook.claim_run_dir(executor=executor, run_id=run_id)
    local = trainer.dir / "runs" / run_id
    prepare_job(local, cpu=True, env={"FAKE_AXOLOTL_STEPS": "2"})
    run = RunRecord(id=run_id, target="gpu", created="2026-01-01T00:00:00Z", remote_dir=remote)
    handle = hook.launch_job(
        executor=executor, run=run, job=JobSpec(run_id=run_id, local_dir=local)
    )
    failed = run.evolve(
        job=handle,
        state="failed",
        message="the job failed (artifacts not retrieved: boom)",
        artifacts_missing=True,
    )
    hook.release_executor(executor=executor, run=failed, outcome="failed")
    assert trainer.pod(run_id)["state"] == "awaiting_retrieval"
    assert "pod awaiting_retrieval" in (local / layout.TARGET_NOTE).read_text()
    trainer.fake.wait_until(lambda: not trainer.fake.alive(), timeout=60, what="the deletion")
    assert set(trainer.fake.terminated_by.values()) == {"watchdog"}


def test_a_failed_run_whose_files_came_home_ends_its_pod_whatever_its_log_says(
    trainer, run_cli
):
    # The job's last error line joins the run's message: words in it are no outcome.
    trainer.fake.pod_env["FAKE_AXOLOTL_ERROR"] = "RuntimeError: artifacts not retrieved"
    trainer.fake.pod_env["FAKE_AXOLOTL_NO_PLUGIN"] = "1"  # it fails: no metrics
    result = run_cli("train")
    assert result.exit_code == 1, result.stderr
    run = trainer.run()
    assert run["state"] == "failed" and "artifacts not retrieved" in run["message"]
    assert "artifacts_missing" not in run
    pod = trainer.pod(run["id"])
    assert pod["state"] == "deleted" and pod["deleted_by"] == "client"
    assert "awaiting_retrieval" not in result.stderr
    assert not trainer.fake.alive()


def test_a_connection_that_fails_is_waited_out_whatever_its_words(trainer):
    # Only the pod's own bootstrap failure ends the wait: a refusal of the connection is
    # tried again, even one worded "failed to start" (as an SSH client may word it).
    import overbrainer_runpod
    from overbrainer.plugin import Project, UserError
    from overbrainer.testing.jobs import contract_settings, manager_with
    from overbrainer_runpod.pods import PodLifecycle, connect
    from overbrainer_runpod.record import PodState

    plugins = manager_with(overbrainer_runpod.plugin)
    table = {"kind": "runpod", "gpu_types": ["NVIDIA A40"], "max_hours": 1,
             "venv": str(trainer.venv)}  # fmt: skip
    model = plugins.kinds["runpod"].model_validate(table)
    project = Project(trainer.dir, contract_settings("gpu", model), dict(os.environ))
    executor = plugins.hook.create_executor(name="gpu", target=model, project=project, run=None)
    run_id = "demo_20260101-000000"
    run_dir = trainer.dir / "runs" / run_id
    run_dir.mkdir(parents=True)
    life = PodLifecycle(executor.api, run_dir, executor.timing)
    life.place(model, executor.site.placement(), api_url=executor.api.base_url)
    refused: list[Path] = []

    def reach(config: Path):
        if not refused:
            refused.append(config)
            raise UserError("ssh: the connection failed to start: Connection refused")
        return connect("gpu", run_id, config)

    try:
        host = life.wait_ready(reach)
        assert host.run("true").code == 0
        host.close()
        assert refused and life.pod.state is PodState.READY
    finally:
        life.drop_secret()
        life.delete("client")
    assert not trainer.fake.alive()


def test_an_image_without_axolotl_is_refused_and_its_pod_deleted(trainer, run_cli):
    trainer.venv = Path("/nonexistent/axolotl-venv")
    trainer.configure()
    result = run_cli("train")
    assert result.exit_code == 1
    assert (
        "error: targets.gpu.venv: the pod's image has no Axolotl in /nonexistent/axolotl-venv"
    ) in result.stderr
    assert not trainer.fake.alive()
    (record,) = list((trainer.dir / "runs").glob("*/pod.json"))
    assert json.loads(record.read_text())["state"] == "deleted"


def test_the_cli_killed_before_the_create_leaves_nothing(trainer):
    trainer.fake.list_delay = 2.0  # the orphan check, before the run is created
    cli = trainer.spawn("train")
    trainer.wait_for(
        lambda: any("myself" in request for request in trainer.fake.requests),
        what="the orphan check",
    )
    os.kill(cli.pid, signal.SIGKILL)
    cli.wait()
    assert "create" not in trainer.fake.calls and "secret" not in trainer.fake.calls
    assert not trainer.fake.alive() and not trainer.fake.deleted
    assert not list((trainer.dir / "runs").glob("*/pod.json"))


def test_the_cost_cap_asks_for_a_snapshot(trainer, run_cli):
    # An hour lasts 30 s; $0.03 at $0.44/h is about 2 s: the snapshot comes long before
    # the deadline's.
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    trainer.configure(extra="max_cost_usd = 0.03\n")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    assert f"train: run {run_id} stopped at step" in result.stdout
    assert "(cost)" in result.stdout
    assert not trainer.fake.alive()


def test_data_centers_are_tried_in_order_with_the_network_volume(trainer, run_cli):
    trainer.fake.full_data_centers = {"EU-RO-1"}
    trainer.configure(extra='data_center_ids = ["EU-RO-1", "US-KS-2"]\n')
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    pod = trainer.pod(trainer.run()["id"])
    assert [(a["data_center"], a["outcome"]) for a in pod["attempts"]] == [
        ("EU-RO-1", "capacity"),
        ("US-KS-2", "created"),
    ]
    trainer.configure(extra='data_center_ids = ["US-KS-2"]\nnetwork_volume_id = "vol123"\n')
    assert run_cli("train").exit_code == 0
    create = [r for r in trainer.fake.requests if "podFindAndDeployOnDemand" in r][-1]
    query = json.loads(create)["query"]
    assert 'networkVolumeId: "vol123"' in query and 'volumeMountPath: "/workspace"' in query
    assert 'dataCenterId: "US-KS-2"' in query


def test_a_pod_not_named_for_the_run_is_never_deleted(trainer, run_cli):
    """The run's pod record is a file anyone may edit: the pod id it names is deleted only
    when Runpod calls that pod by the run's name (another pod of the account is left)."""
    trainer.fake.pod_env["FAKE_AXOLOTL_HANG"] = "1"
    cli = trainer.spawn("train")
    run_id = _wait_running(trainer)["id"]
    os.kill(cli.pid, signal.SIGINT)
    cli.communicate(timeout=60)
    pod_id = trainer.pod(run_id)["pod_id"]
    own_name = trainer.fake.pods[pod_id].name
    trainer.fake.pods[pod_id].name = "someone-elses-pod"  # as if the record named that one
    refused = run_cli("pod", "rm", "--force", run_id)
    assert refused.exit_code == 1, (refused.stdout, refused.stderr)
    assert (
        f"run {run_id}: pod {pod_id} is not this run's (it is named `someone-elses-pod`, not "
        f"overbrainer-{run_id}-…): it was not deleted" in refused.stderr
    )
    assert pod_id not in trainer.fake.terminated_by
    trainer.fake.pods[pod_id].name = own_name
    assert run_cli("pod", "rm", "--force", run_id).exit_code == 0
    assert pod_id in trainer.fake.terminated_by
