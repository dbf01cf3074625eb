"""Training runs end to end on the local target with the fake trainer: every path of the
training spec's run states, through the real CLI."""

from __future__ import annotations

import os
import re
import signal
import subprocess

from tests.helpers.tools import need
from tests.helpers.trainer import group_alive


def _id(result_or_text: str) -> str:
    match = re.search(r"run (\S+_\d{8}-\d{6}(?:_\d+)?)", result_or_text)
    assert match, result_or_text
    return match[1]


def test_a_run_succeeds_and_says_where_its_model_is(trainer, run_cli):
    trainer.configure(merge=True)
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run_id = trainer.run()["id"]
    out = result.stdout.splitlines()
    assert out[0].startswith(f"train: run {run_id} succeeded; step 6/6, epoch ")
    assert out[0].endswith(f"; output in runs/{run_id}/output")
    assert out[1:] == [
        f"train: adapter in runs/{run_id}/output",
        f"train: merged model in runs/{run_id}/output/merged",
        f"train: loss chart in runs/{run_id}/loss.png",
    ]
    assert (trainer.dir / "runs" / run_id / "loss.png").read_bytes()[:4] == b"\x89PNG"
    assert (
        f"train: run {run_id} on target `local`, in {trainer.dir.resolve()}/runs/{run_id}"
        in result.stderr
    )
    assert "train: job exited with code 0" in result.stderr
    assert "train: merging adapter" in result.stderr
    record = trainer.run()
    assert record["state"] == "succeeded" and record["snapshots"] is True
    assert record["job"]["pid"] > 1
    assert (trainer.dir / "runs" / run_id / "output" / "adapter_model.safetensors").exists()
    assert [event["event"] for event in trainer.metrics(run_id)][:2] == ["stage", "begin"]


def test_a_non_zero_exit_fails_the_run(trainer, run_cli, monkeypatch):
    monkeypatch.setenv("FAKE_AXOLOTL_EXIT", "3")
    result = run_cli("train")
    run_id = trainer.run()["id"]
    assert result.exit_code == 1
    assert result.stdout.startswith(f"train: run {run_id} failed; ")
    message = f"the job exited with code 3 (see runs/{run_id}/job.log)"
    assert result.stderr.endswith(f"error: {message}\n")
    assert trainer.run()["state"] == "failed" and trainer.run()["message"] == message


def test_a_failed_job_says_its_last_error_line(trainer, run_cli, monkeypatch):
    monkeypatch.setenv("FAKE_AXOLOTL_EXIT", "1")
    monkeypatch.setenv(
        "FAKE_AXOLOTL_ERROR",
        "OSError: Can't load the configuration of 'models/nope' (token hf_abcdefghijklmnopqrstu)",
    )
    result = run_cli("train")
    run_id = trainer.run()["id"]
    assert result.exit_code == 1
    message = (
        "the job exited with code 1: OSError: Can't load the configuration of 'models/nope' "
        f"(token ***) (see runs/{run_id}/job.log)"
    )
    assert result.stderr.endswith(f"error: {message}\n")
    assert trainer.run()["message"] == message


def test_a_job_without_metrics_fails_the_run(trainer, run_cli, monkeypatch):
    monkeypatch.setenv("FAKE_AXOLOTL_NO_PLUGIN", "1")
    result = run_cli("train")
    run_id = trainer.run()["id"]
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: the job wrote no metrics: the overbrainer metrics plugin was not loaded "
        f"(see runs/{run_id}/job.log)\n"
    )


def test_a_job_without_output_fails_the_run(trainer, run_cli, monkeypatch):
    monkeypatch.setenv("FAKE_AXOLOTL_NO_OUTPUT", "1")
    result = run_cli("train")
    run_id = trainer.run()["id"]
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"error: the job succeeded but left no output (see runs/{run_id}/job.log)\n"
    )
    assert trainer.run()["state"] == "failed"


def test_stop_snapshots_a_running_job_and_resume_continues_after_it(trainer, run_cli, monkeypatch):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
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
    assert record["state"] == "stopped"
    assert record["snapshot"] == {
        "checkpoint": f"output/checkpoint-{step}",
        "step": step,
        "reason": "requested",
    }
    assert lines[-3] == (
        f"train: run {run['id']} stopped at step {step} (requested): snapshot in "
        f"runs/{run['id']}/output/checkpoint-{step}; resume with "
        f"`overbrainer train --resume-from {run['id']}`"
    )
    assert lines[-2] == (
        f"train: runs/{run['id']}/output also holds the partial model at step {step}, not a "
        "finished one"
    )
    assert lines[-1] == f"train: loss chart in runs/{run['id']}/loss.png"
    assert (trainer.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()
    assert not (trainer.dir / "runs" / run["id"] / "output" / "merged").exists()

    listing = " ".join(run_cli("runs", "ls").stdout.split())  # its columns, padded
    assert (
        f"stopped local {run['created']} step {step} (requested): partial model in output/"
        in listing
    )

    # The stopped run trained for ever: the resumed one has a few steps left after the
    # snapshot, wherever it was taken (without this it had none about half of the time).
    monkeypatch.setenv("FAKE_AXOLOTL_STEPS", str(step + 3))
    resumed = run_cli("train", "--resume-from", run["id"])
    assert resumed.exit_code == 0, resumed.stderr
    new = trainer.run()
    assert new["resumed_from"] == run["id"] and new["state"] == "succeeded"
    assert (
        f"train: run {new['id']} resumes from the snapshot of run {run['id']} "
        f"(output/checkpoint-{step})"
    ) in resumed.stderr
    steps = [
        e["step"]
        for e in trainer.metrics(new["id"])
        if e["event"] == "log" and e.get("loss") is not None
    ]
    assert steps[0] == step + 1
    assert (trainer.dir / "runs" / new["id"] / "resume" / f"checkpoint-{step}").is_dir()


def test_a_stop_while_another_process_follows_is_left_to_it(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1] == (
        f"train: overbrainer (pid {process.pid}) is using this project: if it follows run "
        f"{run['id']}, it collects the snapshot; if not, collect it with "
        f"`overbrainer train attach {run['id']}`"
    )
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert f"train: run {run['id']} stopped at step" in out
    assert trainer.run()["state"] == "stopped"


def test_a_cancel_while_another_process_follows_stops_the_job_now_and_it_reports(
    trainer, run_cli
):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"train: the job of run {run['id']} is cancelled; overbrainer (pid {process.pid}) is "
        f"using this project: if it follows run {run['id']}, it records the run cancelled; "
        f"if not, record it with `overbrainer train attach {run['id']}`"
    )
    assert not group_alive(run["job"]["pid"])  # at once, not when the follower polls
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, (out, err)
    assert err.endswith(f"error: run {run['id']} was cancelled\n"), err
    assert trainer.run()["state"] == "cancelled"
    # The follower recorded it: a second cancel says so, from the record.
    again = run_cli("train", "cancel", run["id"])
    assert again.exit_code == 1
    assert again.stderr == f"error: run {run['id']} already ended: cancelled\n"


def test_a_job_that_never_snapshots_is_cancelled_after_the_limit(trainer, run_cli, monkeypatch):
    from overbrainer.runs import follow

    monkeypatch.setattr(follow, "STOP_LIMITS", follow.StopLimits(proof_s=0.5, end_s=0.5))
    process = trainer.spawn(
        "train", env={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_IGNORE_SNAPSHOT": "1"}
    )
    run = trainer.wait_running()
    process.kill()
    process.wait()
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 1
    assert (
        "warning: no snapshot 0.5 s after it was asked for: the job was cancelled" in result.stderr
    )
    assert result.stderr.endswith(f"error: run {run['id']} was cancelled\n")
    assert trainer.run()["state"] == "cancelled"
    assert not group_alive(run["job"]["pid"])


def test_a_job_that_snapshots_but_never_ends_is_cancelled_and_stopped(
    trainer, run_cli, monkeypatch
):
    from overbrainer.runs import follow

    monkeypatch.setattr(follow, "STOP_LIMITS", follow.StopLimits(proof_s=30, end_s=0.5))
    process = trainer.spawn(
        "train", env={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_HANG_AFTER_SNAPSHOT": "1"}
    )
    run = trainer.wait_running()
    process.kill()
    process.wait()
    result = run_cli("train", "stop", run["id"])
    assert result.exit_code == 0, result.stderr
    assert "warning: the job saved its snapshot but did not end: it was cancelled" in result.stderr
    assert trainer.run()["state"] == "stopped"
    assert not group_alive(run["job"]["pid"])


def test_a_request_written_by_another_process_is_watched(trainer, run_cli, monkeypatch):
    # `train stop` from elsewhere while `train attach` follows: the follower applies the limits.
    from overbrainer.runs import follow

    monkeypatch.setattr(follow, "STOP_LIMITS", follow.StopLimits(proof_s=0.5, end_s=0.5))
    process = trainer.spawn(
        "train", env={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_IGNORE_SNAPSHOT": "1"}
    )
    run = trainer.wait_running()
    process.kill()
    process.wait()
    (trainer.dir / "runs" / run["id"] / "snapshot.request").write_text("deadline\n")
    result = run_cli("train", "attach", run["id"])
    assert "no snapshot 0.5 s after it was asked for: the job was cancelled" in result.stderr
    assert trainer.run()["state"] == "cancelled"


def test_resume_refusals(trainer, run_cli):
    done = run_cli("train")
    assert done.exit_code == 0, done.stderr
    succeeded = trainer.run()["id"]
    result = run_cli("train", "--resume-from", succeeded)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: cannot resume from run {succeeded}: it is succeeded, not stopped with a "
        "snapshot (see `overbrainer train stop`)\n"
    )

    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    assert run_cli("train", "stop", run["id"]).exit_code == 0
    step = trainer.runs()[1]["snapshot"]["step"]

    trainer.configure(extra="")
    text = (
        (trainer.dir / "overbrainer.toml")
        .read_text()
        .replace('adapter = "lora"', 'adapter = "lora"\nlora_r = 8')
    )
    (trainer.dir / "overbrainer.toml").write_text(text)
    result = run_cli("train", "--resume-from", run["id"])
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: cannot resume from run {run['id']}: the training settings differ from the ones "
        "it ran with (lora_r); set them back to resume, or start a new run\n"
    )

    trainer.configure()
    checkpoint = trainer.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}"
    checkpoint.rename(checkpoint.with_name("moved"))
    result = run_cli("train", "--resume-from", run["id"])
    assert result.stderr == (
        f"error: cannot resume from run {run['id']}: its snapshot is not in runs/{run['id']}/"
        f"output/checkpoint-{step}; retrieve it with `overbrainer train attach {run['id']}`\n"
    )
    assert len(trainer.runs()) == 2  # no run was created by a refusal


def test_cancel_kills_the_job_and_its_children_then_a_second_cancel_is_refused(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1", "FAKE_AXOLOTL_CHILD": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    child = int((trainer.dir / "runs" / run["id"] / "fake_axolotl.child").read_text())
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    assert trainer.run()["state"] == "cancelled"
    assert not group_alive(run["job"]["pid"])
    ps = subprocess.run(
        [need("ps"), "-eo", "pid=,stat="], capture_output=True, text=True, check=True
    )
    rows = (line.split() for line in ps.stdout.splitlines())
    pids = {int(pid) for pid, stat in rows if not stat.startswith("Z")}  # zombies do not run
    assert child not in pids and run["job"]["pid"] not in pids
    again = run_cli("train", "cancel", run["id"])
    assert again.exit_code == 1
    assert again.stderr == f"error: run {run['id']} already ended: cancelled\n"


def test_cancel_of_a_finished_job_keeps_its_result(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_STEPS": "3"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    trainer.wait_for((trainer.dir / "runs" / run["id"] / "exit_code").exists, what="exit")
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        f"train: the job of run {run['id']} had already ended (exited with code 0): collect it "
        f"with `overbrainer train attach {run['id']}`\n"
    )
    assert trainer.run()["state"] == "running"
    attached = run_cli("train", "attach", run["id"])
    assert attached.exit_code == 0, attached.stderr
    assert trainer.run()["state"] == "succeeded"


def test_kill_9_of_the_cli_then_attach_completes_the_run(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_STEPS": "40"})
    run = trainer.wait_running()
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"train: run {run['id']} succeeded; step 40/40")
    again = run_cli("train", "attach", run["id"])  # an ended run is reported from its files
    assert again.exit_code == 0
    assert again.stdout == result.stdout


def test_ctrl_c_while_following_detaches_and_the_job_keeps_running(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_STEPS": "60"})
    run = trainer.wait_running()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err  # a detach, not a failure
    assert out.endswith(
        f"interrupted: run {run['id']} keeps running on target `local`; follow it again "
        f"with `overbrainer train attach {run['id']}`\n"
    )
    assert "error:" not in err
    assert (
        group_alive(run["job"]["pid"]) or (trainer.dir / "runs" / run["id"] / "exit_code").exists()
    )
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "succeeded"


def test_a_second_writer_is_refused_while_a_run_is_followed(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    trainer.wait_running()
    result = run_cli("train")
    assert result.exit_code == 1
    assert (
        result.stderr == f"error: another overbrainer (pid {process.pid}) is using this project\n"
    )
