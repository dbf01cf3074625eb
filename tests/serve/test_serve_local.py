"""A served parent on the local target, through the CLI: the stand-in vLLM is started
when a stage needs it, answers, and is ended when the command ends; a killed command's
engine is ended by the next; ``serve up|down|status``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.litellm_proxy import free_port
from tests.helpers.pipeline_data import lines, seed_questions
from tests.helpers.serving import (
    MODEL,
    engine_argv,
    engine_records,
    running,
    watchdog_pids,
    write_served_project,
)

from overbrainer.cli import cli


def invoke(project: Path, *args: str):
    return CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)


def records(project: Path) -> list[str]:
    directory = project / ".overbrainer" / "serve"
    return sorted(p.name for p in directory.glob("*.json")) if directory.is_dir() else []


def test_a_stage_starts_the_served_parent_and_the_command_ends_it(served_dir):
    seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?", "Why move?"]})

    result = invoke(served_dir, "answers")

    assert result.exit_code == 0, result.output
    answers = lines(served_dir, "answers.jsonl")
    assert len(answers) == 2
    assert all("served answer to:" in a["messages"][-1]["content"] for a in answers)
    argv = engine_argv(served_dir)
    # vLLM's documented command line, on the loopback only
    assert argv[:3] == ["vllm", "serve", MODEL]
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "starting vllm with Qwen/Qwen3-0.6B on target `box`" in result.stderr
    pids = watchdog_pids(served_dir)
    assert pids and not any(running(pid) for pid in pids)
    assert records(served_dir) == []


def test_a_killed_command_s_engine_is_ended_by_the_next_command(served_dir):
    seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?"]})
    env = {**os.environ, "FAKE_ENGINE_DELAY": "60"}
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "overbrainer"), "-C", str(served_dir), "answers"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (records(served_dir) and engine_asked(served_dir)):
            assert command.poll() is None, "the command ended before it was killed"
            assert time.monotonic() < deadline, "the engine was never asked"
            time.sleep(0.1)
    finally:
        os.killpg(command.pid, signal.SIGKILL)
        command.wait()
    (pid,) = watchdog_pids(served_dir)
    assert running(pid), "kill -9 of the command leaves its engine up"

    result = invoke(served_dir, "serve", "status")

    assert "ending the vllm serve a killed command left on `box`" in result.stderr
    assert result.stdout == "nothing is served\n"
    assert not running(pid)
    assert records(served_dir) == []


def engine_asked(project: Path) -> bool:
    """Whether the stand-in engine has a connection open (a request on its way)."""
    return bool(engine_records(project, "argv.json"))


def test_serve_up_keeps_it_across_commands_status_shows_it_and_down_ends_it(served_dir):
    up = invoke(served_dir, "serve", "up")
    assert up.exit_code == 0, up.output
    assert up.stdout.startswith("big: up at http://127.0.0.1:")
    (pid,) = watchdog_pids(served_dir)

    seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?"]})
    assert invoke(served_dir, "answers").exit_code == 0
    assert running(pid), "a kept serve outlives the commands that use it"
    assert watchdog_pids(served_dir) == [pid], "the stage reused it"

    status = invoke(served_dir, "serve", "status")
    assert "big: vllm Qwen/Qwen3-0.6B on `box`, since " in status.stdout
    assert "kept (serve up): up at http://127.0.0.1:" in status.stdout
    assert status.stdout.rstrip().endswith("/v1")

    down = invoke(served_dir, "serve", "down", "big")
    assert down.stdout == "big: ended\n"
    assert not running(pid)
    assert invoke(served_dir, "serve", "status").stdout == "nothing is served\n"
    assert invoke(served_dir, "serve", "down", "big").stdout == "big: not up\n"


def test_the_watchdog_ends_an_engine_left_without_a_connection(tmp_path, engine_venv):
    from overbrainer.job.serving import watchdog_source

    watchdog = tmp_path / "watchdog.py"
    watchdog.write_bytes(watchdog_source())
    port = free_port()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(watchdog), "--port", str(port), "--idle", "1", "--pid-file",
         str(tmp_path / "watchdog.pid"), "--", str(engine_venv / "bin" / "vllm"), "serve",
         MODEL, "--host", "127.0.0.1", "--port", str(port)],
        cwd=tmp_path, capture_output=True, text=True, timeout=30, start_new_session=True,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert "watchdog: no connection for 1 s: ending the engine" in done.stdout
    assert time.monotonic() - started < 20
    pid = int((tmp_path / "watchdog.pid").read_text())
    assert not running(pid), "the engine ended with its watchdog"


def test_an_orphan_on_a_target_out_of_reach_warns_and_the_command_goes_on(
    tmp_path, engine_venv, monkeypatch
):
    project = write_served_project(tmp_path / "p", engine_venv, target="gpu", kind="ssh")
    monkeypatch.setenv("OVERBRAINER_TARGETS__GPU__HOST", f"nobody@127.0.0.1:{free_port()}")
    records_dir = project / ".overbrainer" / "serve"
    records_dir.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    handle = {"serve_id": "big-1", "dir": "/nowhere/.serve/big-1", "pid": 4242, "port": 8000}
    (records_dir / "big.json").write_text(json.dumps({
        "provider": "big", "target": "gpu", "engine": "vllm", "model": MODEL,
        "started": time.time(), "owner": dead.pid, "kept": False, "handle": handle,
    }))  # fmt: skip

    result = invoke(project, "serve", "status")

    assert result.exit_code == 0, result.output
    assert "providers.big: cannot end the serve a killed command left (" in result.stderr
    assert "the next command tries again" in result.stderr
    assert "big: vllm Qwen/Qwen3-0.6B on `gpu`, since " in result.stdout
    assert ": not known: " in result.stdout
    assert records(project) == ["big.json"], "kept for the next command to end"


def test_a_serve_s_hours_and_their_price_are_in_the_history(tmp_path, engine_venv):
    project = write_served_project(tmp_path / "p", engine_venv)
    config = project / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('kind = "local"', 'kind = "local"\nprice_per_hour = 3.6')
    )
    assert invoke(project, "serve", "up").exit_code == 0
    time.sleep(1.0)
    assert invoke(project, "serve", "down").exit_code == 0

    (line,) = [
        json.loads(x) for x in (project / ".overbrainer" / "history.jsonl").read_text().splitlines()
    ]
    assert (line["stage"], line["status"], line["provider"], line["target"]) == (
        "serve",
        "ended",
        "big",
        "box",
    )
    assert 1.0 / 3600 <= line["hours"] < 60.0 / 3600
    # Each is rounded to 6 places: the hours' rounding, times 3.6, and the cost's own.
    assert line["cost"] == pytest.approx(line["hours"] * 3.6, abs=3.6 * 5e-7 + 5e-7 + 1e-9)
    history = invoke(project, "history")
    assert f"serve      1 run(s), 0 done, 0 failed; tokens 0 in, 0 out; ${line['cost']:.4f}" in (
        history.stdout
    )


def test_a_serve_its_watchdog_ended_is_in_the_history_without_a_cost(served_dir):
    assert invoke(served_dir, "serve", "up").exit_code == 0
    (pid,) = watchdog_pids(served_dir)
    os.killpg(pid, signal.SIGTERM)  # as its idle limit ends it, on the target
    while running(pid):
        time.sleep(0.05)

    status = invoke(served_dir, "serve", "status")
    assert "gone (ended on its target)" in status.stdout
    assert invoke(served_dir, "serve", "down").stdout == "big: ended\n"

    (line,) = [
        json.loads(x)
        for x in (served_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    ]
    assert (line["stage"], line["status"], line["hours"], line["cost"]) == (
        "serve",
        "gone",
        None,
        None,
    )


def test_plan_starts_nothing_and_says_a_served_parent_is_paid_by_the_hour(served_dir):
    config = served_dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('kind = "local"', 'kind = "local"\nprice_per_hour = 2.5')
    )

    result = invoke(served_dir, "plan")

    assert result.exit_code == 0, result.output
    assert (
        "served: providers.big (vllm Qwen/Qwen3-0.6B on `box`) is paid by the hour, not the "
        "token: $2.50/h (targets.box.price_per_hour), recorded in history when it ends"
        in result.stdout
    )
    assert "answers  " in result.stdout
    assert watchdog_pids(served_dir) == [], "plan asks no served provider for its prices"


def test_a_token_reaches_the_engine_through_its_environment_never_a_command_line(
    served_dir, monkeypatch
):
    token = "hf_servedEngineToken1234567890abcdef"
    config = served_dir / "overbrainer.toml"
    config.write_text(config.read_text().replace('["FAKE_ENGINE_DELAY"]', '["HF_TOKEN"]'))
    monkeypatch.setenv("HF_TOKEN", token)
    assert invoke(served_dir, "serve", "up").exit_code == 0
    try:
        argv = json.loads(engine_records(served_dir, "argv.json")[0].read_text())
        assert "HF_TOKEN" in argv["env"], "pass_env reaches the engine"
        holding = [
            entry.name for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and token.encode() in _cmdline(entry)
        ]  # fmt: skip
        assert holding == []
        written = [
            p for p in served_dir.rglob("*") if p.is_file() and token.encode() in p.read_bytes()
        ]
        assert written == []
    finally:
        invoke(served_dir, "serve", "down")


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


def test_ctrl_c_of_serve_up_before_its_engine_answers_ends_it(served_dir):
    """`serve up` cut short never printed "up at": the serve it was starting is ended, not
    left up (and paid for) with nobody told."""
    config = served_dir / "overbrainer.toml"
    config.write_text(config.read_text().replace('["FAKE_ENGINE_DELAY"]', '["FAKE_ENGINE_LOAD"]'))
    env = {**os.environ, "FAKE_ENGINE_LOAD": "60"}  # a model that loads for a minute
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "overbrainer"), "-C", str(served_dir), "serve", "up"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (records(served_dir) and watchdog_pids(served_dir)):
            assert command.poll() is None, "the command ended before Ctrl-C"
            assert time.monotonic() < deadline, "the serve was never recorded"
            time.sleep(0.1)
        (pid,) = watchdog_pids(served_dir)
        os.killpg(command.pid, signal.SIGINT)
        stdout, stderr = command.communicate(timeout=30)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    assert command.returncode == 130, stderr
    assert b"up at" not in stdout
    assert b"providers.big: vllm ended on `box`" in stderr
    assert b"interrupted" in stderr
    assert not running(pid)
    assert records(served_dir) == []


def test_ctrl_c_of_the_command_ends_its_engine(served_dir):
    seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?"]})
    env = {**os.environ, "FAKE_ENGINE_DELAY": "60"}
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "overbrainer"), "-C", str(served_dir), "answers"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (records(served_dir) and engine_asked(served_dir)):
            assert command.poll() is None, "the command ended before Ctrl-C"
            assert time.monotonic() < deadline, "the engine was never asked"
            time.sleep(0.1)
        (pid,) = watchdog_pids(served_dir)
        time.sleep(0.5)  # the request on its way
        for _ in range(2):  # the first drains the stage, the second stops waiting for it
            os.killpg(command.pid, signal.SIGINT)
            time.sleep(0.3)
        _, stderr = command.communicate(timeout=30)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    assert command.returncode != 0
    assert b"vllm ended on `box`" in stderr
    assert not running(pid)
    assert records(served_dir) == []


def test_a_serve_on_a_target_set_for_gpu_training_starts_without_its_training_checks(served_dir):
    """Starting a serve asks nothing of the target's training side: `gpus = 2` on a machine
    without a GPU is a training error, not a serving one."""
    config = served_dir / "overbrainer.toml"
    config.write_text(config.read_text().replace('kind = "local"\n', 'kind = "local"\ngpus = 2\n'))
    try:
        up = invoke(served_dir, "serve", "up")
        assert up.exit_code == 0, up.output
        assert "big: up at http://127.0.0.1:" in up.stdout
    finally:
        invoke(served_dir, "serve", "down")
    assert records(served_dir) == []


def test_an_engine_whose_package_is_missing_from_the_venv_is_refused_before_it_starts(
    tmp_path,
):
    """SGLang runs as ``VENV/bin/python -m sglang.launch_server``: the venv's python is there
    without SGLang, which is looked for before anything starts."""
    venv = tmp_path / "bare-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    project = write_served_project(tmp_path / "project", venv, engine="sglang")

    up = invoke(project, "serve", "up")

    assert up.exit_code == 1
    assert (
        f"target `box`: the engine is not installed in targets.box.venv ({venv}) (this was "
        "checked: "
    ) in up.stderr
    assert "): install sglang[all] there" in up.stderr
    assert records(project) == []
    assert not (project / "runs" / ".serve").exists() or not any(
        (project / "runs" / ".serve").iterdir()
    )
