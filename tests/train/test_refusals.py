"""What the training commands refuse, and Ctrl-C at each step of a start."""

from __future__ import annotations

import json

import pytest

from overbrainer.job.record import Container, JobHandle, RunRecord, RunState, Snapshot
from overbrainer.runs.store import RunStore

INTERRUPT_LAUNCH = """
import os, signal
from overbrainer import hookimpl

@hookimpl(hookwrapper=True)
def launch_job(executor, run, job):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the job is being started
    yield
"""

INTERRUPT_PREPARATION = """
import os, signal
from overbrainer import hookimpl

@hookimpl(hookwrapper=True)
def create_executor(name, target, project, run):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the target is being reached
    yield
"""


def test_ctrl_c_during_the_start_lets_it_finish_then_detaches(trainer, run_cli, site):
    site.install("interrupter", INTERRUPT_LAUNCH)
    result = run_cli(
        "train", env={"OVERBRAINER_LOAD_PLUGINS": "local,interrupter", "FAKE_AXOLOTL_STEPS": "30"}
    )
    run = trainer.run()
    assert result.exit_code == 0, result.stderr
    assert result.stdout.endswith(
        f"interrupted: run {run['id']} keeps running on target `local`; follow it "
        f"again with `overbrainer train attach {run['id']}`\n"
    )
    assert run["state"] == "running" and run["job"]["pid"] > 1  # started and recorded
    attached = run_cli("train", "attach", run["id"])
    assert attached.exit_code == 0, attached.stderr
    assert trainer.run()["state"] == "succeeded"


def test_ctrl_c_during_the_preparation_leaves_no_run(trainer, run_cli, site):
    site.install("interrupter", INTERRUPT_PREPARATION)
    result = run_cli("train", env={"OVERBRAINER_LOAD_PLUGINS": "local,interrupter"})
    assert result.exit_code == 1
    assert result.stderr == "error: interrupted before the run started\n"
    assert trainer.runs() == []


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("no_training", "no [training] section in overbrainer.toml"),
        ("unknown_target", "unknown target `elsewhere`"),
        (
            "keep_pod",
            "--keep-machine applies only to a target that makes a machine for the run "
            "(target `local` does not)",
        ),
        ("empty_train", "data/train.jsonl has no example: run `overbrainer split` first"),
        (
            "managed_key",
            "invalid configuration:\n  training.axolotl_extra.output_dir: "
            "overbrainer sets it for each run; remove it",
        ),
    ],
)
def test_a_start_is_refused_before_any_run_exists(trainer, run_cli, setup, message):
    args = ["train"]
    config = trainer.dir / "overbrainer.toml"
    if setup == "no_training":
        config.write_text(config.read_text().split("\n[training]")[0])
    elif setup == "unknown_target":
        args += ["--target", "elsewhere"]
    elif setup == "keep_pod":
        args.append("--keep-pod")
    elif setup == "empty_train":
        (trainer.dir / "data" / "train.jsonl").write_text("\n")
    elif setup == "managed_key":
        trainer.configure(extra="")
        config.write_text(
            config.read_text().replace(
                "merge = false",
                'merge = false\n[training.axolotl_extra]\noutput_dir = "/elsewhere"',
            )
        )
    result = run_cli(*args)
    assert result.exit_code == 1
    assert result.stderr == f"error: {message}\n"
    assert trainer.runs() == []


def test_keep_machine_is_keep_pod(trainer, run_cli):
    # The generic name and the reference tool's: one flag, refused alike on a local target.
    result = run_cli("train", "--keep-machine")
    assert result.exit_code == 1
    assert result.stderr == (
        "error: --keep-machine applies only to a target that makes a machine for the run "
        "(target `local` does not)\n"
    )
    assert trainer.runs() == []


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_target_is_refused_not_read_as_the_default(trainer, run_cli, name):
    result = run_cli("train", "--target", name)
    assert result.exit_code == 2
    assert "Invalid value for --target: names no target: give a target's name" in result.stderr
    assert trainer.runs() == []


@pytest.mark.parametrize("flag", ["--keep-machine", "--keep-pod"])
def test_keep_machine_applies_to_a_new_run_only(trainer, run_cli, flag):
    result = run_cli("train", flag, "attach", "latest")
    assert result.exit_code == 2
    assert "--target, --keep-machine and --resume-from apply to a new run only" in result.stderr


def test_a_venv_without_axolotl_is_refused(trainer, run_cli, tmp_path):
    trainer.venv = tmp_path / "empty-venv"
    (trainer.venv / "bin").mkdir(parents=True)
    trainer.configure()
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: targets.local.venv: {trainer.venv} has no bin/axolotl: install Axolotl there, "
        "or set targets.local.install to have it installed\n"
    )
    assert trainer.runs() == []


def test_a_corrupted_snapshot_fails_a_job_that_exited_0(trainer):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_STEPS": "150"})
    run = trainer.wait_running()
    (trainer.dir / "runs" / run["id"] / "snapshot.json").write_text("{not json")
    _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert err.endswith("error: snapshot.json is not valid JSON\n")
    assert trainer.run()["state"] == "failed"


def test_a_corrupted_snapshot_leaves_a_cancelled_run_cancelled(trainer, run_cli):
    process = trainer.spawn("train", env={"FAKE_AXOLOTL_HANG": "1"})
    run = trainer.wait_running()
    process.kill()
    process.wait()
    (trainer.dir / "runs" / run["id"] / "snapshot.json").write_text(
        '{"checkpoint": "../../etc", "step": 1}'
    )
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert trainer.run()["state"] == "cancelled"


def _record(
    store: RunStore, run_id: str, state: RunState, job: bool = True, **changes
) -> RunRecord:
    (store.root / run_id).mkdir(parents=True)
    record = RunRecord(
        id=run_id,
        target="local",
        created="2026-01-01T00:00:00Z",
        remote_dir=str(store.root.resolve() / run_id),
        job=JobHandle(dir=str(store.root / run_id), pid=999_999_999) if job else None,
        state=state,
        **{"snapshots": True, **changes},
    )
    store.save(record)
    return record


ID = "demo_20260101-000000"


@pytest.mark.parametrize(
    ("state", "job", "command", "message"),
    [
        (
            RunState.PREPARING,
            False,
            "stop",
            f"run {ID} has not started: there is no job to snapshot yet",
        ),
        (RunState.SUCCEEDED, True, "stop", f"run {ID} already ended: succeeded"),
        (RunState.FAILED, True, "stop", f"run {ID} already ended: failed"),
        (RunState.CANCELLED, True, "stop", f"run {ID} already ended: cancelled"),
        (RunState.STOPPED, True, "stop", f"run {ID} already ended: stopped"),
        (RunState.PREPARING, False, "cancel", f"run {ID} has not started"),
        (RunState.FAILED, False, "cancel", f"run {ID} has not started"),
        (RunState.CANCELLED, True, "cancel", f"run {ID} already ended: cancelled"),
        (RunState.CANCELLED, True, "attach", f"run {ID} was cancelled"),
        (RunState.FAILED, True, "attach", "the job exited with code 3 (see runs/x/job.log)"),
    ],
)
def test_commands_on_runs_in_each_state(trainer, run_cli, state, job, command, message):
    extra = (
        {"message": "the job exited with code 3 (see runs/x/job.log)"}
        if state is RunState.FAILED
        else {}
    )
    _record(RunStore(trainer.dir), ID, state, job=job, **extra)
    result = run_cli("train", command, ID)
    assert result.exit_code == 1
    assert result.stderr.endswith(f"error: {message}\n")


def test_a_run_from_an_older_overbrainer_cannot_be_stopped(trainer, run_cli):
    _record(RunStore(trainer.dir), ID, RunState.RUNNING, snapshots=False)
    assert json.loads((trainer.dir / "runs" / ID / "run.json").read_text())["snapshots"] is False
    result = run_cli("train", "stop", ID)
    assert result.stderr == (
        f"error: run {ID} was started by an overbrainer older than 0.5.0: its job cannot save a "
        f"snapshot; cancel it with `overbrainer train cancel {ID}`, or let it finish\n"
    )


def test_attach_reports_an_ended_run_from_its_files(trainer, run_cli):
    store = RunStore(trainer.dir)
    _record(
        store,
        ID,
        RunState.STOPPED,
        snapshot=Snapshot(checkpoint="output/checkpoint-4", step=4, reason="deadline"),
    )
    (store.root / ID / "metrics.jsonl").write_text(
        '{"event":"log","step":4,"max_steps":10,"epoch":0.4,"loss":1.5}\n'
    )
    result = run_cli("train", "attach", ID)
    assert result.exit_code == 0
    assert (
        result.stdout.splitlines()[0]
        == f"train: run {ID} stopped; step 4/10, epoch 0.40, loss 1.5000"
    )
    assert "stopped at step 4 (deadline)" in result.stdout


def test_a_run_whose_target_was_removed(trainer, run_cli):
    _record(RunStore(trainer.dir), ID, RunState.RUNNING)
    config = trainer.dir / "overbrainer.toml"
    config.write_text(
        config.read_text()
        .replace("[targets.local]", "[targets.other]")
        .replace('target = "local"', 'target = "other"')
    )
    for command in ("attach", "stop", "cancel"):
        result = run_cli("train", command, ID)
        assert (
            result.stderr == f"error: target `local` of run {ID} is no longer in overbrainer.toml\n"
        )


@pytest.mark.parametrize("command", ["attach", "stop", "cancel"])
def test_unknown_and_escaping_run_ids(trainer, run_cli, command):
    assert run_cli("train", command, "nope_20260101-000000").stderr == (
        "error: no run nope_20260101-000000 in runs/\n"
    )
    escaping = run_cli("train", command, "../outside")
    assert escaping.exit_code == 1
    assert escaping.stderr.startswith("error: invalid run id `../outside`")


def test_a_container_job_is_stopped_by_name_on_cancel(trainer, run_cli, tmp_path, monkeypatch):
    # A docker stand-in records its calls; the job's group is already gone.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n')
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    store = RunStore(trainer.dir)
    record = _record(store, ID, RunState.RUNNING)
    store.save(
        record.evolve(
            job=record.job.model_copy(
                update={"container": Container(engine="docker", name=f"overbrainer-{ID}")}
            )
        )
    )
    result = run_cli("train", "cancel", ID)
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "calls").read_text() == f"stop -t 30 overbrainer-{ID}\n"


@pytest.mark.parametrize(
    "container",
    [
        Container(engine="docker", name="victim-unrelated"),
        Container(engine="docker", name="overbrainer-20250101-000000-other"),
        Container(engine="./runs/evil.sh", name=f"overbrainer-{ID}"),
    ],
)  # fmt: skip
def test_a_cancel_stops_only_the_runs_own_container(trainer, run_cli, tmp_path, monkeypatch,
                                                   container):  # fmt: skip
    """run.json's container is checked against the one a start names: an edited record
    neither stops another container nor runs a program of its choosing as the engine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "calls"}\n')
    (bin_dir / "docker").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    store = RunStore(trainer.dir)
    record = _record(store, ID, RunState.RUNNING)
    store.save(record.evolve(job=record.job.model_copy(update={"container": container})))
    result = run_cli("train", "cancel", ID)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: run {ID}: run.json names container {container.name!r} of "
        f"{container.engine!r}, not 'overbrainer-{ID}' of docker or podman: the record was "
        "edited, or is not this tool's; nothing was stopped\n"
    )
    assert not (tmp_path / "calls").exists()
    assert store.load(ID).state is RunState.RUNNING
