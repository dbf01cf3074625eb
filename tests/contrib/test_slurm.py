"""The slurm target (contrib/overbrainer-slurm) through the CLI, on a real one-node Slurm.

Runs in the core's environment: the target needs only Slurm's commands (``.ci/prereqs``
installs them with the daemons). The package's own tests (the executor contract, secrets,
cancel, the time limit) are collected here too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "contrib" / "overbrainer-slurm"
# `tests` is a namespace package: a module that put a contrib package's directory (which
# holds a `tests` folder of its own) first on sys.path hides this checkout's subpackages
# not imported yet (`tests.ssh`). The checkout's root, last on sys.path, keeps them found.
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from tests.helpers.real import REAL_TIMEOUT  # noqa: E402
from tests.helpers.sshd import _descendants  # noqa: E402
from tests.helpers.tools import need  # noqa: E402

from overbrainer.runs.lock import ProjectLock  # noqa: E402


def _package_tests():
    """The package's own tests, collected here too (they import its package). Last on
    sys.path: its `tests` folder must not hide this checkout's."""
    sys.path += [str(PACKAGE), str(PACKAGE / "tests")]
    modules = {}
    for name in ("test_cluster", "test_contract"):
        spec = importlib.util.spec_from_file_location(
            f"overbrainer_slurm_{name}", PACKAGE / "tests" / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


_tests = _package_tests()
from overbrainer_slurm import transport  # noqa: E402 - on sys.path now
from overbrainer_slurm.transport import SshCommands, control_path  # noqa: E402

TestSlurmExecutor = _tests["test_contract"].TestSlurmExecutor
test_a_batch_job_runs_and_a_held_one_is_cancelled_before_it_starts = _tests[
    "test_cluster"
].test_a_batch_job_runs_and_a_held_one_is_cancelled_before_it_starts
slurm_cluster = _tests["test_contract"].slurm_cluster


def slurm_target(spool: Path, venv: Path, more: str = "") -> str:
    return (
        f'\n[targets.cluster]\nkind = "slurm"\nspool = "{spool}"\nvenv = "{venv}"\n'
        f'device = "cpu"\nlocal_paths = true\npass_env = ["FAKE_AXOLOTL_*"]\n{more}'
    )


@pytest.fixture
def on_slurm(trainer, slurm_cluster, slurm_installed, tmp_path, monkeypatch):
    """The trainer project with its training on the test Slurm; ``configure(more, **knobs)``
    adds lines to the target's table and sets the fake trainer's knobs (they reach the job
    through ``pass_env``)."""
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", "local,slurm")
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    spool = tmp_path / "spool"

    def configure(more: str = "", **knobs: str) -> None:
        # The login node comes from the environment only, as an ssh target's host does.
        login = re.search(r'^login = "([^"]*)"\n', more, re.M)
        if login is not None:
            more = more.replace(login.group(0), "")
            monkeypatch.setenv("OVERBRAINER_TARGETS__CLUSTER__LOGIN", login.group(1))
        else:
            monkeypatch.delenv("OVERBRAINER_TARGETS__CLUSTER__LOGIN", raising=False)
        text = (trainer.dir / "overbrainer.toml").read_text().split("\n[targets.cluster]")[0]
        text = text.replace('target = "local"', 'target = "cluster"')
        target = slurm_target(spool, trainer.venv, more)
        (trainer.dir / "overbrainer.toml").write_text(text + target)
        for name in [name for name in os.environ if name.startswith("FAKE_AXOLOTL_")]:
            monkeypatch.delenv(name)
        for name, value in {"FAKE_AXOLOTL_STEP_SECONDS": "0.05", **knobs}.items():
            monkeypatch.setenv(name, value)

    def wait_training() -> dict:
        """The newest run once it is recorded running and its job logged a step."""

        def started() -> bool:
            runs = trainer.runs()
            if not runs or runs[-1]["state"] != "running":
                return False
            metrics = spool / runs[-1]["id"] / "metrics.jsonl"
            return metrics.exists() and '"log"' in metrics.read_text()

        trainer.wait_for(started, timeout=120, what="a running job on Slurm")
        return trainer.run()

    trainer.configure_slurm = configure
    trainer.wait_training = wait_training
    trainer.spool = spool
    configure()
    return trainer


def _job(run: dict) -> str:
    return run["job"]["data"]["job_id"]


def test_train_on_slurm_then_logs_and_listing(on_slurm, slurm_cluster, run_cli, monkeypatch):
    on_slurm.configure_slurm(FAKE_AXOLOTL_STEPS="4")
    secret = "hf_" + secrets.token_hex(16)
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", secret)
    assert "slurm  overbrainer-slurm 0.1.0  kinds: slurm" in run_cli("plugins").stdout
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = on_slurm.run()
    assert run["state"] == "succeeded"
    assert run["remote_dir"] == str(on_slurm.spool / run["id"])
    assert run["job"]["data"] == {"job_id": _job(run), "directory": run["remote_dir"]}
    home = on_slurm.dir / "runs" / run["id"]
    assert (home / "output" / "adapter_model.safetensors").read_bytes() == b"fake adapter weights"
    assert result.stdout.splitlines()[0].startswith(f"train: run {run['id']} succeeded; step 4/4")
    steps = [e["step"] for e in on_slurm.metrics(run["id"]) if e["event"] == "log" and "loss" in e]
    assert steps == [1, 2, 3, 4]
    logs = run_cli("runs", "logs", run["id"])
    assert logs.exit_code == 0, logs.stderr
    assert "fake axolotl: training completed" in logs.stdout
    listing = run_cli("runs", "ls").stdout
    assert f"succeeded  cluster  {run['created']}" in listing
    note = (home / "target.note").read_text()
    assert note == f"slurm job {_job(run)} ended, exit code 0\n"
    assert note.strip() in listing
    # The token reached the job by file: nothing Slurm keeps or shows holds it.
    for shown in (
        slurm_cluster.command("scontrol", "show", "job", "-dd", _job(run)),
        slurm_cluster.command("squeue", "-o", "%all"),
    ):
        assert secret not in shown
    for place in (on_slurm.dir, on_slurm.spool, slurm_cluster.root):
        for path in place.rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert secret.encode() not in path.read_bytes(), f"the secret is in {path}"


def test_ctrl_c_detaches_attach_follows_stop_snapshots_and_resume_continues(on_slurm, run_cli):
    on_slurm.configure_slurm(FAKE_AXOLOTL_HANG="1")
    process = on_slurm.spawn("train")
    run = on_slurm.wait_training()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.endswith(
        f"interrupted: run {run['id']} keeps running on target `cluster`; follow it "
        f"again with `overbrainer train attach {run['id']}`\n"
    )
    assert f"slurm job {_job(run)} RUNNING" in run_cli("runs", "ls").stdout
    attached = on_slurm.spawn("train", "attach", run["id"])
    lock = ProjectLock(on_slurm.dir)
    on_slurm.wait_for(lambda: lock.holder() == attached.pid, 60, "attach to follow the run")
    running = run_cli("runs", "logs", run["id"])  # the log of a running job, from the spool
    assert running.exit_code == 0, running.stderr
    assert "fake axolotl: step" in running.stdout
    stopped = run_cli("train", "stop", run["id"])
    assert stopped.exit_code == 0, stopped.stderr
    out, err = attached.communicate(timeout=120)
    assert attached.returncode == 0, err
    assert f"train: run {run['id']} stopped at step" in out
    record = on_slurm.run()
    step = record["snapshot"]["step"]
    assert record["state"] == "stopped"
    assert (on_slurm.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()

    on_slurm.configure_slurm(FAKE_AXOLOTL_STEPS=str(step + 3))
    resumed = run_cli("train", "--resume-from", run["id"])
    assert resumed.exit_code == 0, resumed.stderr
    new = on_slurm.run()
    assert new["resumed_from"] == run["id"] and new["state"] == "succeeded"
    steps = [e["step"] for e in on_slurm.metrics(new["id"]) if e["event"] == "log" and "loss" in e]
    assert steps == [step + 1, step + 2, step + 3]


def test_slurms_own_stop_of_the_batch_shell_is_a_snapshot_that_attach_records(
    on_slurm, slurm_cluster, run_cli
):
    on_slurm.configure_slurm(FAKE_AXOLOTL_HANG="1")
    process = on_slurm.spawn("train")
    run = on_slurm.wait_training()
    process.kill()  # kill -9 of the CLI: the job keeps running on Slurm
    process.wait()
    slurm_cluster.command("scancel", "--signal=TERM", "--batch", _job(run))
    result = run_cli("train", "attach", run["id"])
    assert result.exit_code == 0, result.stderr
    record = on_slurm.run()
    assert record["state"] == "stopped"
    assert record["snapshot"]["reason"] == "requested"


def test_cancel_kills_the_job_on_slurm_at_once_and_logs_stay_readable(
    on_slurm, slurm_cluster, run_cli
):
    on_slurm.configure_slurm(FAKE_AXOLOTL_HANG="1", FAKE_AXOLOTL_CHILD="1")
    process = on_slurm.spawn("train")
    run = on_slurm.wait_training()
    process.kill()  # kill -9 of the CLI: the job keeps running on Slurm
    process.wait()
    child_file = on_slurm.spool / run["id"] / "fake_axolotl.child"
    on_slurm.wait_for(child_file.exists, 30, "the fake trainer's child")
    child = int(child_file.read_text())
    started = time.monotonic()
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 0, result.stderr
    assert time.monotonic() - started < slurm_cluster.kill_wait_s / 2
    assert result.stdout == f"train: run {run['id']} cancelled\n"
    assert on_slurm.run()["state"] == "cancelled"
    assert not Path(f"/proc/{child}").exists() or _zombie(child)
    assert _job(run) not in slurm_cluster.jobs()
    again = run_cli("train", "cancel", run["id"])
    assert again.exit_code == 1
    assert again.stderr == f"error: run {run['id']} already ended: cancelled\n"
    logs = run_cli("runs", "logs", run["id"])
    assert logs.exit_code == 0, logs.stderr
    assert "overbrainer: stage train:" in logs.stdout


def test_a_job_sbatch_refuses_fails_the_run_and_leaves_no_secret(on_slurm, run_cli, monkeypatch):
    on_slurm.configure_slurm('partition = "nosuch"\n')
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_" + secrets.token_hex(16))
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: target `cluster`: sbatch refused the job: "
        "sbatch: error: Batch job submission failed: Invalid partition name specified\n"
    )
    run = on_slurm.run()
    assert run["state"] == "failed"
    assert not (on_slurm.spool / run["id"] / ".secrets.json").exists()


def test_without_slurm_here_the_error_says_to_set_login(on_slurm, run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: `sbatch` is not on this machine's PATH: run overbrainer on a node of the "
        "cluster, or set the target's login node in the environment "
        "(OVERBRAINER_TARGETS__NAME__LOGIN=user@host)\n"
    )
    assert not on_slurm.runs(), "a run was created for a target that cannot start it"


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_login_submits_through_ssh_and_cancels_there(
    on_slurm,
    slurm_cluster,
    sshd,
    ssh_alias,
    run_cli,
    monkeypatch,
    runtime,
):
    # Only the login node (sshd on 127.0.0.1) knows the cluster: Slurm's commands run
    # here would find no configuration.
    sshd.stop()
    sshd.env["SLURM_CONF"] = slurm_cluster.env["SLURM_CONF"]
    sshd.start()
    monkeypatch.delenv("SLURM_CONF")
    on_slurm.configure_slurm(f'login = "{ssh_alias}"\n', FAKE_AXOLOTL_STEPS="2")
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = on_slurm.run()
    assert run["state"] == "succeeded"
    # The whole run (check, submit, every poll) went through one connection, ended with it.
    assert sshd.log.read_text().count("Accepted publickey") == 1
    assert _ssh_processes(runtime) == []
    shown = slurm_cluster.command("scontrol", "show", "job", "-o", _job(run))
    assert f"JobName=overbrainer-{run['id']} " in shown

    on_slurm.configure_slurm(f'login = "{ssh_alias}"\n', FAKE_AXOLOTL_HANG="1")
    process = on_slurm.spawn("train")
    hanging = on_slurm.wait_training()
    process.kill()
    process.wait()
    # A killed process's master connection outlives it (until ControlPersist's idle end):
    # another process makes its own. A poll the kill caught in flight (an ssh client of that
    # master) ends on its own, moments later.
    left = _ssh_processes(runtime)
    deadline = time.monotonic() + 30
    while len(left) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)
        left = _ssh_processes(runtime)
    assert len(left) == 1
    cancelled = run_cli("train", "cancel", hanging["id"])
    assert cancelled.exit_code == 0, cancelled.stderr
    assert on_slurm.run()["state"] == "cancelled"
    assert _job(hanging) not in slurm_cluster.jobs()
    assert sshd.log.read_text().count("Accepted publickey") == 3
    assert _ssh_processes(runtime) == left


@pytest.fixture
def runtime(isolated_env) -> Iterator[Path]:
    """``XDG_RUNTIME_DIR`` (isolated_env's, where ssh's master sockets go); the ssh
    processes that name it are ended, by pid, with the test."""
    where = Path(os.environ["XDG_RUNTIME_DIR"])
    yield where
    for pid in _ssh_processes(where):
        _end(pid)


def _ssh_processes(where: Path) -> list[int]:
    """The ssh processes (a master connection, its clients) whose command line names a
    path under ``where``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"ssh" in line.split(b"\0")[0] and str(where).encode() in line:
            found.append(int(entry.name))
    return sorted(found)


def _end(pid: int, signum: int = signal.SIGKILL) -> None:
    """Signal ``pid`` and wait until it is gone (a master is reparented: init reaps it)."""
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        return
    _wait_gone(pid)


def _wait_gone(pid: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, f"process {pid} is still there"
        time.sleep(0.02)


def test_ssh_commands_share_one_connection_until_closed(sshd, ssh_alias, runtime):
    commands = SshCommands(ssh_alias, dict(os.environ))
    script = "#!/bin/sh\necho 'a script, as sbatch reads it'\n"
    assert commands.run(["cat"], input=script).out == script
    for word in ("one", "two"):
        assert commands.run(["echo", word]).out == f"{word}\n"
    failed = commands.run(["sh", "-c", "echo no >&2; exit 3"])
    assert (failed.code, failed.out, failed.err) == (3, "", "no\n")
    assert sshd.log.read_text().count("Accepted publickey") == 1
    control = commands.control
    assert control is not None and control.is_socket()
    assert control.parent == runtime / f"overbrainer-ssh-{os.getuid()}"
    assert control.parent.stat().st_mode & 0o777 == 0o700
    [master] = _ssh_processes(runtime)
    commands.close()
    _wait_gone(master)
    assert not control.exists()
    assert commands.control is None
    commands.close()  # twice: nothing left to end
    # Used again, it connects again.
    assert commands.run(["echo", "three"]).out == "three\n"
    assert sshd.log.read_text().count("Accepted publickey") == 2
    commands.close()
    assert _ssh_processes(runtime) == []


def test_a_master_connection_whose_login_node_stopped_answering_is_replaced(
    sshd,
    ssh_alias,
    runtime,
    monkeypatch,
):
    monkeypatch.setattr(transport, "ALIVE_S", 1)
    commands = SshCommands(ssh_alias, dict(os.environ))
    assert commands.run(["echo", "up"]).out == "up\n"
    [master] = _ssh_processes(runtime)
    assert sshd.process is not None
    # The node's side of the connection stops answering (a dropped route, a hung node);
    # the node itself still takes new logins.
    frozen = _descendants(sshd.process.pid, only_exe=os.path.realpath(sshd.program))
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        # Not a wait until COMMAND_TIMEOUT_S's error: the dead master ends, the command
        # connects anew.
        assert commands.run(["echo", "again"]).out == "again\n"
        _wait_gone(master)
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    assert commands.run(["echo", "back"]).out == "back\n"
    assert sshd.log.read_text().count("Accepted publickey") == 2
    commands.close()
    assert _ssh_processes(runtime) == []


def test_a_socket_directory_others_can_open_is_not_used(sshd, ssh_alias, runtime):
    from loguru import logger

    shared = runtime / f"overbrainer-ssh-{os.getuid()}"
    shared.mkdir()
    shared.chmod(0o755)
    said: list[str] = []
    sink = logger.add(said.append, level="WARNING", format="{message}")
    commands = SshCommands(ssh_alias, dict(os.environ))
    try:
        assert [commands.run(["echo", word]).out for word in ("a", "b")] == ["a\n", "b\n"]
    finally:
        logger.remove(sink)
        commands.close()
    assert said == [
        f"each ssh command to {ssh_alias} connects anew: {shared} is not a directory that "
        "only you can open\n"
    ]
    assert sshd.log.read_text().count("Accepted publickey") == 2
    assert list(shared.iterdir()) == []
    assert _ssh_processes(runtime) == []


def test_a_socket_path_too_long_for_unix_goes_under_tmp(tmp_path):
    deep = tmp_path.joinpath(*["a-long-directory-name"] * 5)
    fallback = Path("/tmp") / f"overbrainer-ssh-{os.getuid()}"
    made = not fallback.exists()
    try:
        control = control_path("me@login", {"XDG_RUNTIME_DIR": str(deep)})
        assert control is not None and control.parent == fallback
        assert control.name.startswith(f"{os.getpid()}-")
        assert len(str(control)) + 17 < 108  # ssh binds a longer temporary name first
        assert not deep.exists()
    finally:
        if made:
            fallback.rmdir()


def test_a_login_node_ssh_cannot_trust_is_refused_with_ssh_s_reason(
    on_slurm,
    client_config,
    run_cli,
):
    alias = client_config(alias="stranger", known=False)
    on_slurm.configure_slurm(f'login = "{alias}"\n')
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: target `cluster`: cannot reach login node stranger by ssh: Host key "
        "verification failed.\n"
    )
    assert not on_slurm.runs()


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
QUICKSTART_DATA = Path(__file__).parents[2] / "examples" / "quickstart" / "data" / "answers.jsonl"


def real_project(on_slurm, venv, tiny_model, hf_home, monkeypatch, epochs: int = 1) -> None:
    """The project trains the tiny model with the real Axolotl on the test Slurm."""
    lines = QUICKSTART_DATA.read_text().splitlines()
    (on_slurm.dir / "data" / "train.jsonl").write_text("\n".join(lines[:16]) + "\n")
    (on_slurm.dir / "data" / "eval.jsonl").write_text("\n".join(lines[16:19]) + "\n")
    text = (on_slurm.dir / "overbrainer.toml").read_text().split("\n[training]")[0]
    variables = {"HF_HOME": hf_home, "HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"}
    for name, value in {**variables, "AXOLOTL_DO_NOT_TRACK": "1"}.items():
        monkeypatch.setenv(name, value)
    target = slurm_target(on_slurm.spool, venv).replace(
        'pass_env = ["FAKE_AXOLOTL_*"]',
        'pass_env = ["HF_HOME", "HF_HUB_OFFLINE", "DO_NOT_TRACK", "AXOLOTL_DO_NOT_TRACK"]',
    )
    training = REAL_TRAINING.format(model=tiny_model).replace("epochs = 1", f"epochs = {epochs}")
    (on_slurm.dir / "overbrainer.toml").write_text(text + training + target)


@pytest.mark.real
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_real_axolotl_run_on_slurm_succeeds_with_an_adapter(
    on_slurm, venv, tiny_model, hf_home, slurm_cluster, run_cli, monkeypatch
):
    real_project(on_slurm, venv, tiny_model, hf_home, monkeypatch)
    result = run_cli("train")
    assert result.exit_code == 0, result.stderr
    run = on_slurm.run()
    assert run["state"] == "succeeded"
    output = on_slurm.dir / "runs" / run["id"] / "output"
    assert (output / "adapter_model.safetensors").is_file()
    steps = [e["step"] for e in on_slurm.metrics(run["id"]) if e["event"] == "log" and "loss" in e]
    assert steps == list(range(1, 17))
    shown = slurm_cluster.command("scontrol", "show", "job", "-o", _job(run))
    assert f"JobName=overbrainer-{run['id']} " in shown


@pytest.mark.real
@pytest.mark.timeout(REAL_TIMEOUT)
def test_a_time_limit_stops_a_real_axolotl_run_with_a_snapshot(
    on_slurm, venv, tiny_model, hf_home, slurm_cluster, run_cli, monkeypatch
):
    """Slurm signals the runner ``snapshot_margin_s`` before the limit: Axolotl saves a
    checkpoint and the run stops. Slurm sends that warning once, at a periodic check; due at
    once, it can come while the job is still starting and be lost, so the job starts with a
    long limit, cut once Axolotl trains (the warning is then due at the next check). The run
    is long enough (1,600 steps) that the signal finds it running."""
    real_project(on_slurm, venv, tiny_model, hf_home, monkeypatch, epochs=100)
    config = on_slurm.dir / "overbrainer.toml"
    config.write_text(config.read_text() + 'time_limit = "60"\nsnapshot_margin_s = 230\n')
    process = on_slurm.spawn("train")
    training = on_slurm.wait_training()
    shown = slurm_cluster.command("scontrol", "show", "job", "-o", _job(training))
    hours, minutes, _ = shown.split(" RunTime=", 1)[1].split()[0].split("-")[-1].split(":")
    cut = int(hours) * 60 + int(minutes) + 4
    slurm_cluster.command("scontrol", "update", f"JobId={_job(training)}", f"TimeLimit={cut}")
    _out, err = process.communicate(timeout=200)
    assert process.returncode == 0, err
    run = on_slurm.run()
    assert run["state"] == "stopped", err
    step = run["snapshot"]["step"]
    assert run["snapshot"]["reason"] == "requested"
    assert (on_slurm.dir / "runs" / run["id"] / "output" / f"checkpoint-{step}").is_dir()
    assert "JobState=COMPLETED " in slurm_cluster.command(
        "scontrol", "show", "job", "-o", _job(run)
    )


def _shim_sbatch(directory: Path, body: str) -> None:
    """A ``sbatch`` of ``body`` first on PATH (the other Slurm commands stay real)."""
    directory.mkdir()
    (directory / "sbatch").write_text(f"#!/bin/sh\n{body}")
    (directory / "sbatch").chmod(0o755)


def test_an_sbatch_that_fails_its_version_check_is_refused_before_a_run(
    on_slurm, run_cli, monkeypatch, tmp_path
):
    _shim_sbatch(tmp_path / "shim", 'echo "sbatch: error: cannot load libslurm" >&2\nexit 1\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'shim'}:{os.environ['PATH']}")
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: target `cluster`: `sbatch --version` failed on this machine: "
        "sbatch: error: cannot load libslurm\n"
    )
    assert not on_slurm.runs()


def test_an_answer_of_sbatch_without_a_job_id_fails_the_run(
    on_slurm, run_cli, monkeypatch, tmp_path
):
    _shim_sbatch(
        tmp_path / "shim",
        '[ "$1" = --version ] && { echo "slurm 22.05.8"; exit 0; }\ncat >/dev/null\n'
        'echo "Submitted to the moon"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'shim'}:{os.environ['PATH']}")
    monkeypatch.setenv("OVERBRAINER_HF_TOKEN", "hf_" + secrets.token_hex(16))
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: target `cluster`: sbatch answered no job id: 'Submitted to the moon'\n"
    )
    run = on_slurm.run()
    assert run["state"] == "failed"
    assert not (on_slurm.spool / run["id"] / ".secrets.json").exists()


def test_a_login_node_without_slurm_is_named(
    on_slurm,
    sshd,
    ssh_alias,
    run_cli,
    runtime,
):
    sshd.stop()
    sshd.env["PATH"] = "/nonexistent"
    sshd.start()
    on_slurm.configure_slurm(f'login = "{ssh_alias}"\n')
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(f"error: `sbatch` is not on the PATH of login node {ssh_alias}\n")
    assert not on_slurm.runs()
    assert _ssh_processes(runtime) == []  # the master connection ended with the command


def test_a_job_submitted_whose_answer_was_lost_is_cancelled(
    on_slurm, slurm_cluster, run_cli, monkeypatch, tmp_path
):
    real = need("sbatch")
    _shim_sbatch(
        tmp_path / "shim",
        f'[ "$1" = --version ] && exec {real} "$@"\n{real} "$@" >/dev/null\n'
        'echo "sbatch: error: Socket timed out on send/recv operation" >&2\nexit 1\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'shim'}:{os.environ['PATH']}")
    on_slurm.configure_slurm(FAKE_AXOLOTL_HANG="1")
    result = run_cli("train")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: target `cluster`: sbatch refused the job: "
        "sbatch: error: Socket timed out on send/recv operation\n"
    )
    run = on_slurm.run()
    name = f"overbrainer-{run['id']}"
    listed = slurm_cluster.command("squeue", "-h", f"--name={name}", "-t", "all", "-o", "%T")
    assert listed.split() == ["CANCELLED"], "the job submitted runs on unseen"


def test_a_login_node_in_the_projects_file_is_refused(on_slurm, run_cli):
    """Hosts come from the environment only: a project's overbrainer.toml cannot send
    your ssh keys to a login node of its choosing."""
    text = (on_slurm.dir / "overbrainer.toml").read_text()
    (on_slurm.dir / "overbrainer.toml").write_text(
        text.replace("[targets.cluster]\n", '[targets.cluster]\nlogin = "attacker@host"\n')
    )
    result = run_cli("train")
    assert result.exit_code == 1
    assert "targets.cluster.login: must be set through env, not in overbrainer.toml" in (
        result.stderr
    )
    assert not on_slurm.runs()


def test_cancel_acts_only_on_the_run_s_own_job(on_slurm, run_cli, slurm_cluster):
    """run.json is a file anyone may edit: a job id naming another job is refused before
    anything is signalled, and that job goes on."""
    victim = slurm_cluster.command(
        "sbatch", "--parsable", "--job-name=victim-unrelated", "--output=/dev/null",
        "--wrap", "sleep 300",
    ).strip().split(";")[0]
    try:
        on_slurm.configure_slurm(FAKE_AXOLOTL_HANG="1")
        process = on_slurm.spawn("train")
        run = on_slurm.wait_training()
        process.kill()  # the CLI gone: the job keeps running on Slurm
        process.wait()
        record = on_slurm.dir / "runs" / run["id"] / "run.json"
        data = json.loads(record.read_text())
        own = data["job"]["data"]["job_id"]
        data["job"]["data"]["job_id"] = victim
        record.write_text(json.dumps(data))
        cancelled = run_cli("train", "cancel", run["id"])
        assert cancelled.exit_code == 1, cancelled.stdout
        assert cancelled.stderr.endswith(
            f"error: run {run['id']}: Slurm job {victim} is not this run's (it is named "
            f"`victim-unrelated`, not `overbrainer-{run['id']}`): nothing was cancelled; the "
            "run's record may have been edited\n"
        )
        assert victim in slurm_cluster.jobs()  # still queued or running
        data["job"]["data"]["job_id"] = own
        record.write_text(json.dumps(data))
        assert run_cli("train", "cancel", run["id"]).exit_code == 0
    finally:
        slurm_cluster.command("scancel", victim, check=False)


def test_a_failing_scontrol_is_a_clean_message_not_a_traceback(
    on_slurm, run_cli, monkeypatch, tmp_path
):
    on_slurm.configure_slurm(FAKE_AXOLOTL_HANG="1")
    process = on_slurm.spawn("train")
    run = on_slurm.wait_training()
    process.kill()
    process.wait()
    broken = tmp_path / "broken-bin"
    broken.mkdir()
    scontrol = broken / "scontrol"
    scontrol.write_text(
        "#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact slurm controller' >&2\n"
        "exit 1\n"
    )
    scontrol.chmod(0o755)
    monkeypatch.setenv("PATH", f"{broken}:{os.environ['PATH']}")
    result = run_cli("train", "cancel", run["id"])
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.endswith(
        "scontrol on this machine: slurm_load_jobs error: Unable to contact slurm controller "
        "(it may pass: try again)\n"
    ), result.stderr
    monkeypatch.setenv("PATH", os.environ["PATH"].split(":", 1)[1])
    assert run_cli("train", "cancel", run["id"]).exit_code == 0
