"""The real CLI in a subprocess, killed or interrupted in the middle of ``answers``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers.pipeline_data import lines, seed_questions

from overbrainer.pipeline.jsonl import read_jsonl
from overbrainer.pipeline.records import is_answer

CLI = str(Path(sys.executable).parent / "overbrainer")


def start_answers(project_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [CLI, "-C", str(project_dir), "answers"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def answered(project_dir: Path) -> list[dict]:
    return read_jsonl(project_dir / "data" / "answers.jsonl", "answers.jsonl", is_answer)


def wait_for_answers(project_dir: Path, count: int, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 20
    while len(answered(project_dir)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no answers came"
        time.sleep(0.01)


def test_kill_9_in_the_middle_of_answers_loses_nothing_and_pays_nothing_twice(
    run_cli, project_dir, provider
):
    provider.latency = 0.1  # slow enough to be killed half way
    questions = seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(60)]})
    process = start_answers(project_dir)
    wait_for_answers(project_dir, 12, process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL

    first = {record["id"] for record in answered(project_dir)}
    paid_before = len(provider.chats("parent-model"))
    assert 12 <= len(first) < 60

    provider.latency = 0.01
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert f"answers: {len(questions) - len(first)} to process" in result.stderr
    asked_again = [s.prompt for s in provider.chats("parent-model")[paid_before:]]
    texts_answered_first = {q["text"] for q in questions if q["id"] in first}
    assert not texts_answered_first & set(asked_again)  # no answer paid twice
    final = [record["id"] for record in lines(project_dir, "answers.jsonl")]
    assert sorted(final) == sorted(q["id"] for q in questions)  # none lost, none twice


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_interrupts_the_stage_which_resumes_on_its_next_run(
    run_cli, project_dir, provider, signum, code
):
    provider.latency = 0.1
    seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(60)]})
    process = start_answers(project_dir)
    wait_for_answers(project_dir, 8, process)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == code, stderr
    assert stderr.endswith("error: interrupted: the stage resumes on its next run\n")
    [summary] = stdout.splitlines()
    assert summary.startswith("answers: ")
    kept = len(answered(project_dir))
    assert f"answers: {kept} done," in summary
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    entry = json.loads(history[-1])
    assert (entry["status"], entry["done"]) == ("interrupted", kept)  # its spend is counted
    assert entry["output_tokens"] >= 20 * kept

    provider.latency = 0.01
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"answers: {60 - kept} done, {kept} skipped")


def test_sigterm_outside_a_stage_exits_143_too(project_dir):
    # `config check --resolve` waiting on a Vault that never replies.
    with socket.socket() as vault:
        vault.bind(("127.0.0.1", 0))
        vault.listen()
        env = {**os.environ, "VAULT_ADDR": f"http://127.0.0.1:{vault.getsockname()[1]}",
               "VAULT_TOKEN": "t", "OVERBRAINER_PROVIDERS__MAIN__API_KEY": "vault:kv/x#y"}
        process = subprocess.Popen(
            [CLI, "-C", str(project_dir), "config", "check", "--resolve"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        vault.settimeout(20)
        connection, _ = vault.accept()
        with connection:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=20)
    assert process.returncode == 143, stderr
    assert stderr.endswith("error: interrupted\n")
