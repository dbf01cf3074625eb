"""An engine whose watchdog was killed (``kill -9``) runs on in the watchdog's process
group with no idle limit: ``serve status`` says so, ``serve down`` and the next command's
orphan cleanup end that group; a serve's directory on the target goes when it ends."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.helpers.pipeline_data import seed_questions
from tests.helpers.serving import MODEL, engine_records, group_members, watchdog_pids

from overbrainer.cli import cli
from overbrainer.cli.context import App
from overbrainer.errors import UserError


def invoke(project: Path, *args: str):
    return CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)


def kill_watchdog(project: Path) -> tuple[int, list[int]]:
    """``kill -9`` the serve's watchdog: its pid (the engine's group) and the engine's."""
    (pid,) = watchdog_pids(project)
    engine = [member for member in group_members(pid) if member != pid]
    assert engine, "the engine runs in its watchdog's process group"
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid in group_members(pid):
        assert time.monotonic() < deadline, "the watchdog outlived kill -9"
        time.sleep(0.05)
    return pid, engine


def stop_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def serve_dirs(project: Path) -> list[Path]:
    return list(project.rglob(".serve/*"))


def test_serve_down_ends_an_engine_whose_watchdog_was_killed(served_dir):
    up = invoke(served_dir, "serve", "up")
    assert up.exit_code == 0, up.output
    pid, engine = kill_watchdog(served_dir)
    try:
        status = invoke(served_dir, "serve", "status")
        assert "big: vllm Qwen/Qwen3-0.6B on `box`" in status.stdout
        assert "engine running without its watchdog (no idle limit)" in status.stdout
        assert "gone" not in status.stdout
        url = status.stdout.split("up at ", 1)[1].split(",", 1)[0]
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(f"{url}/models", timeout=10) as reply:
            assert MODEL in reply.read().decode()
        seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?"]})
        reused = invoke(served_dir, "answers")
        assert reused.exit_code == 0, reused.output
        assert (
            "providers.big: the vllm serve on `box` runs without its watchdog (no idle limit): "
            "`overbrainer serve down big` ends it"
        ) in reused.stderr

        down = invoke(served_dir, "serve", "down")

        assert down.stdout == "big: ended\n"
        assert group_members(pid) == [], f"the engine {engine} outlived serve down"
        assert serve_dirs(served_dir) == [], "the serve's directory is removed when it ends"
        assert invoke(served_dir, "serve", "status").stdout == "nothing is served\n"
    finally:
        stop_group(pid)


def test_the_next_command_ends_an_orphan_engine_whose_watchdog_was_killed(served_dir):
    seed_questions(served_dir, {("ownership", "borrowing"): ["What is a borrow?"]})
    env = {**os.environ, "FAKE_ENGINE_DELAY": "60"}
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "overbrainer"), "-C", str(served_dir), "answers"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    pid = 0
    try:
        deadline = time.monotonic() + 60
        while not engine_records(served_dir, "argv.json"):
            assert command.poll() is None, "the command ended before it was killed"
            assert time.monotonic() < deadline, "the engine was never started"
            time.sleep(0.1)
        os.killpg(command.pid, signal.SIGKILL)
        command.wait()
        pid, _ = kill_watchdog(served_dir)

        result = invoke(served_dir, "serve", "status")

        assert "ending the vllm serve a killed command left on `box`" in result.stderr
        assert result.stdout == "nothing is served\n"
        assert group_members(pid) == [], "the orphan engine outlived the next command"
        assert serve_dirs(served_dir) == []
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
        if pid:
            stop_group(pid)


def test_serve_down_of_an_unknown_provider_is_refused(served_dir):
    result = CliRunner().invoke(cli, ["-C", str(served_dir), "serve", "down", "bogus"])

    assert result.exit_code == 1
    assert "no provider `bogus` in overbrainer.toml" in result.output


def test_an_engine_that_never_answers_is_ended_and_its_log_kept(served_dir, monkeypatch):
    config = served_dir / "overbrainer.toml"
    config.write_text(
        config.read_text().replace('["FAKE_ENGINE_DELAY"]', '["FAKE_ENGINE_LOAD"]')
    )
    monkeypatch.setenv("FAKE_ENGINE_LOAD", "600")  # a model that loads for ever
    serving = App(served_dir).serving()
    serving.ready_timeout = 1.0
    try:
        with pytest.raises(UserError) as raised:
            serving.url("big")
    finally:
        serving.close()
    message = str(raised.value)
    assert "providers.big: vllm did not answer within 1 s (it was ended): see " in message
    log = Path(message.split("see ", 1)[1].split(" on target", 1)[0])
    assert message.endswith(" on target `box`")
    assert [path.name for path in log.parent.iterdir()] == ["serve.log"], (
        "the log the message names is kept, the rest of the serve's directory goes"
    )
    (pid,) = watchdog_pids(served_dir)
    assert group_members(pid) == []
