"""A served parent on the ssh target (a real sshd on 127.0.0.1): the stand-in vLLM runs in
the server's home under its watchdog, on the server's loopback, and is reached through a
port forwarded over the target's SSH connection; the command ends it when it ends."""

from __future__ import annotations

import contextlib
import os
import signal

from click.testing import CliRunner
from tests.helpers.pipeline_data import lines, seed_questions
from tests.helpers.serving import (
    engine_argv,
    make_engine_venv,
    running,
    watchdog_pids,
    write_served_project,
)

from overbrainer.cli import cli


def test_a_parent_served_over_ssh_answers_through_a_forwarded_port(tmp_path, sshd, ssh_target_env):
    ssh_target_env("gpu")
    venv = make_engine_venv(tmp_path / "engine-venv")
    project = write_served_project(tmp_path / "project", venv, target="gpu", kind="ssh")
    seed_questions(project, {("ownership", "borrowing"): ["What is a borrow?", "Why move?"]})
    try:
        up = CliRunner().invoke(cli, ["-C", str(project), "serve", "up"], catch_exceptions=False)
        assert up.exit_code == 0, up.output
        local_port = up.stdout.strip().rsplit(":", 1)[1].split("/")[0]
        argv = engine_argv(sshd.home)
        remote_port = argv[argv.index("--port") + 1]
        assert argv[argv.index("--host") + 1] == "127.0.0.1"
        assert local_port != remote_port, "reached through a forward, not the engine's port"
        (pid,) = watchdog_pids(sshd.home)
        assert running(pid)

        answers = CliRunner().invoke(cli, ["-C", str(project), "answers"], catch_exceptions=False)
        assert answers.exit_code == 0, answers.output
        found = lines(project, "answers.jsonl")
        assert len(found) == 2
        assert all("served answer to:" in a["messages"][-1]["content"] for a in found)
        assert "reusing the vllm serve on `gpu`" in answers.stderr

        down = CliRunner().invoke(cli, ["-C", str(project), "serve", "down"])
        assert down.stdout == "big: ended\n"
        assert not running(pid)
    finally:
        for left in watchdog_pids(sshd.home):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(left, signal.SIGKILL)


def test_a_stage_over_ssh_starts_the_engine_and_ends_it_with_the_command(
    tmp_path, sshd, ssh_target_env
):
    ssh_target_env("gpu")
    venv = make_engine_venv(tmp_path / "engine-venv")
    project = write_served_project(tmp_path / "project", venv, target="gpu", kind="ssh")
    seed_questions(project, {("ownership", "borrowing"): ["What is a borrow?"]})
    try:
        result = CliRunner().invoke(cli, ["-C", str(project), "answers"], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert len(lines(project, "answers.jsonl")) == 1
        pids = watchdog_pids(sshd.home)
        assert pids and not any(running(pid) for pid in pids)
        assert not list((project / ".overbrainer" / "serve").glob("*.json"))
    finally:
        for left in watchdog_pids(sshd.home):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(left, signal.SIGKILL)
