"""The job runner (``run_job.py``) on its own: the same command on every target."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.helpers.jobs import write_job
from tests.helpers.trainer import group_alive

from overbrainer.errors import ArtifactMismatch
from overbrainer.job.layout import EXIT_CODE, JOB_FILE, MANIFEST_FILE, MANIFEST_ROOTS, RUNNER
from overbrainer.job.manifest import parse_manifest, verify
from overbrainer.job.scripts import runner_source

WAIT_FOR_REQUEST = (
    "while [ ! -f snapshot.request ]; do sleep 0.02; done; "
    "mkdir -p output/checkpoint-2 && echo ckpt > output/checkpoint-2/w && "
    'echo "{\\"checkpoint\\":\\"output/checkpoint-2\\",\\"step\\":2}" > snapshot.json'
)


def run(job: Path, **popen) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(job / RUNNER)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **popen,
    )


def start(job: Path) -> subprocess.Popen[str]:
    """The runner in a session of its own, as a host's wrapper starts it."""
    return subprocess.Popen(
        [sys.executable, str(job / RUNNER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def events(job: Path) -> list[dict]:
    return [json.loads(line) for line in (job / "metrics.jsonl").read_text().splitlines()]


def wait_for(check, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_the_runner_is_python_3_7_and_stdlib_only():
    tree = ast.parse(runner_source(), feature_version=(3, 7))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (node.names if isinstance(node, ast.Import) else [ast.alias(node.module)])
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}


def test_stages_run_in_order_in_the_job_directory_with_their_environment(tmp_path):
    job = tmp_path / "job"
    write_job(
        job,
        {
            "train": 'echo "$GREETING|$METRICS_AT|$PYTHONPATH|$(pwd)" > seen.txt',
            "merge": "echo merged > merged.txt",
        },
        env={"GREETING": "hello"},
        paths={"METRICS_AT": "metrics.jsonl"},
    )
    data = json.loads((job / "job.json").read_text())
    data["pythonpath"] = ["plugin"]
    (job / "job.json").write_text(json.dumps(data))
    done = run(job, cwd=tmp_path, env={**os.environ, "PYTHONPATH": "/elsewhere"})
    assert done.returncode == 0, done.stdout + done.stderr
    greeting, metrics, pythonpath, cwd = (job / "seen.txt").read_text().strip().split("|")
    assert greeting == "hello"
    assert metrics == str(job / "metrics.jsonl")  # job-relative paths made absolute
    assert pythonpath == f"{job / 'plugin'}:/elsewhere"  # prepended, never replaced
    assert cwd == str(job)  # wherever the runner was started from
    assert [(e["event"], e["name"]) for e in events(job)] == [
        ("stage", "train"),
        ("stage", "merge"),
    ]
    assert (job / "merged.txt").exists()
    assert (job / EXIT_CODE).read_text() == "0\n"
    assert "overbrainer: stage train: sh -c" in done.stdout


def test_a_failed_stage_ends_the_job_with_its_code(tmp_path):
    job = tmp_path / "job"
    write_job(job, {"train": "exit 7", "merge": "echo merged > merged.txt"})
    done = run(job)
    assert done.returncode == 7
    assert not (job / "merged.txt").exists()
    assert (job / EXIT_CODE).read_text() == "7\n"
    assert "overbrainer: stage train exited with code 7" in done.stdout


def test_a_stage_killed_by_a_signal_exits_128_plus_it(tmp_path):
    job = tmp_path / "job"
    write_job(job, "kill -KILL $$")
    assert run(job).returncode == 128 + signal.SIGKILL


def test_a_missing_program_exits_127(tmp_path):
    job = tmp_path / "job"
    write_job(job, "x")
    data = json.loads((job / "job.json").read_text())
    data["stages"][0]["argv"] = ["no-such-program-here"]
    (job / "job.json").write_text(json.dumps(data))
    done = run(job)
    assert done.returncode == 127
    assert "stage train could not start" in done.stdout


def test_after_a_snapshot_the_later_stages_are_skipped_and_the_job_succeeds(tmp_path):
    job = tmp_path / "job"
    write_job(
        job,
        {
            "train": "echo '{\"checkpoint\":\"output/checkpoint-1\",\"step\":1}' > snapshot.json",
            "merge": "echo merged > merged.txt",
        },
    )
    done = run(job)
    assert done.returncode == 0
    assert not (job / "merged.txt").exists()
    assert "a snapshot was saved: stage merge is skipped" in done.stdout
    assert [e["name"] for e in events(job)] == ["train"]


def test_an_unreadable_job_description_is_exit_2_with_the_reason(tmp_path):
    job = tmp_path / "job"
    write_job(job, "true")
    (job / "job.json").write_text('{"format": 99}')
    done = run(job)
    assert done.returncode == 2
    assert "cannot run the job: job.json is not a job description this runner knows" in done.stdout
    assert (job / EXIT_CODE).read_text() == "2\n"


def test_sigterm_to_the_runner_asks_for_a_snapshot_and_skips_the_merge(tmp_path):
    job = tmp_path / "job"
    write_job(job, {"train": WAIT_FOR_REQUEST, "merge": "echo merged > merged.txt"})
    runner = start(job)
    try:
        wait_for((job / "metrics.jsonl").exists)
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=20) == 0
        assert (job / "snapshot.request").read_text() == "requested\n"
        assert (job / "snapshot.json").exists() and not (job / "merged.txt").exists()
        assert "SIGTERM: the trainer saves a snapshot" in runner.stdout.read()
    finally:
        runner.kill()
        runner.wait()
        runner.stdout.close()


def test_sigterm_to_the_whole_group_reaches_the_runner_not_the_trainer(tmp_path):
    # Slurm and Ray signal every process of the job: the trainer must finish its step.
    job = tmp_path / "job"
    write_job(job, {"train": WAIT_FOR_REQUEST, "merge": "echo merged > merged.txt"})
    runner = start(job)
    try:
        wait_for((job / "metrics.jsonl").exists)
        time.sleep(0.2)
        os.killpg(runner.pid, signal.SIGTERM)
        assert runner.wait(timeout=20) == 0
        assert (job / "snapshot.json").exists()
    finally:
        runner.kill()
        runner.wait()
        runner.stdout.close()


TERM_BIT = 1 << (signal.SIGTERM - 1)


def python_job(job: Path, code: str, *args: str) -> None:
    """A job whose one stage is this Python running ``code`` (``stage.py``), started without
    a shell between (dash clears the signal mask it starts with; the trainer's plugin blocks
    TERM again)."""
    write_job(job, "")
    (job / "stage.py").write_text(code)
    description = json.loads((job / JOB_FILE).read_text())
    description["stages"][0]["argv"] = [sys.executable, "stage.py", *args]
    (job / JOB_FILE).write_text(json.dumps(description))


# Writes its signal masks to the file named ARGV[1], then has a child of its own do the same.
MASKS = """\
import subprocess, sys
masks = [line for line in open('/proc/self/status') if line.startswith(('SigBlk', 'SigIgn'))]
open(sys.argv[1], 'w').writelines(masks)
if sys.argv[1] == 'own':
    subprocess.run([sys.executable, 'stage.py', 'child'], check=True)
"""


def _masks(path: Path) -> dict[str, int]:
    return {
        name: int(value, 16)
        for name, value in (line.split(":") for line in path.read_text().splitlines())
    }


def test_a_stage_and_what_it_starts_have_sigterm_ignored_and_blocked(tmp_path):
    job = tmp_path / "job"
    python_job(job, MASKS, "own")
    done = run(job)
    assert done.returncode == 0, done.stdout
    for name in ("own", "child"):
        masks = _masks(job / name)
        assert masks["SigBlk"] & TERM_BIT and masks["SigIgn"] & TERM_BIT, name


# A process that sets a TERM handler of its own (torch's DataLoader workers do), then
# serves the snapshot request as a trainer would.
OWN_HANDLER = """\
import os, signal, time
signal.signal(signal.SIGTERM, signal.SIG_DFL)
open('ready', 'w').close()
while not os.path.exists('snapshot.request'):
    time.sleep(0.02)
open('snapshot.json', 'w').write('{}')
"""


def test_a_term_to_the_group_spares_a_process_with_a_term_handler_of_its_own(tmp_path):
    job = tmp_path / "job"
    python_job(job, OWN_HANDLER)
    runner = start(job)
    try:
        wait_for((job / "ready").exists)
        os.killpg(runner.pid, signal.SIGTERM)
        assert runner.wait(timeout=20) == 0, runner.stdout.read()
        assert (job / "snapshot.json").exists()
    finally:
        runner.kill()
        runner.wait()
        runner.stdout.close()


def test_a_written_request_keeps_its_reason_when_sigterm_follows(tmp_path):
    job = tmp_path / "job"
    write_job(job, WAIT_FOR_REQUEST)
    (job / "snapshot.request").write_text("deadline\n")
    (job / "snapshot.request").unlink()
    runner = start(job)
    try:
        wait_for((job / "metrics.jsonl").exists)
        (job / "snapshot.request").write_text("deadline\n")
        runner.send_signal(signal.SIGTERM)
        assert runner.wait(timeout=20) == 0
        assert (job / "snapshot.request").read_text() == "deadline\n"
    finally:
        runner.kill()
        runner.wait()
        runner.stdout.close()


def test_sigterm_during_a_cancel_kills_the_whole_group_at_once(tmp_path):
    job = tmp_path / "job"
    write_job(job, "sleep 300 & sleep 300 & wait")
    runner = start(job)
    try:
        wait_for((job / "metrics.jsonl").exists)
        time.sleep(0.2)
        (job / "cancelling").touch()
        started = time.monotonic()
        os.killpg(runner.pid, signal.SIGTERM)
        runner.wait(timeout=20)
        wait_for(lambda: not group_alive(runner.pid), timeout=5)
        assert time.monotonic() - started < 5
        assert not (job / "snapshot.request").exists()
    finally:
        runner.kill()
        runner.wait()
        runner.stdout.close()


def test_secrets_by_file_reach_the_stages_and_the_file_is_gone_first(tmp_path):
    job = tmp_path / "job"
    digest = hashlib.sha256(b"hf_abcdefghijklmnop").hexdigest()
    write_job(
        job,
        "ls -a > listing.txt; "
        f'[ "$(printf %s "$HF_TOKEN" | sha256sum | cut -c1-64)" = {digest} ] && echo ok > ok.txt',
    )
    secrets = job / ".secrets.json"
    secrets.write_text(json.dumps({"HF_TOKEN": "hf_abcdefghijklmnop"}))
    secrets.chmod(0o600)
    assert run(job).returncode == 0
    assert (job / "ok.txt").exists()
    assert ".secrets.json" not in (job / "listing.txt").read_text().split()
    assert not secrets.exists()
    for path in job.rglob("*"):
        if path.is_file():
            assert b"hf_abcdefghijklmnop" not in path.read_bytes(), path


def test_the_manifest_covers_what_the_job_wrote_and_verifies(tmp_path):
    job = tmp_path / "job"
    write_job(
        job,
        "mkdir -p output/checkpoint-1 && echo w > output/adapter.bin && "
        "echo c > output/checkpoint-1/state && echo '{}' >> metrics.jsonl",
    )
    assert run(job).returncode == 0
    manifest = parse_manifest((job / MANIFEST_FILE).read_bytes())
    assert set(manifest) == {"output/adapter.bin", "output/checkpoint-1/state", "metrics.jsonl"}
    verify(manifest, job, MANIFEST_ROOTS, ())
    (job / "output" / "adapter.bin").write_text("changed")
    with pytest.raises(ArtifactMismatch, match=r'"output/adapter\.bin" differs'):
        verify(manifest, job, MANIFEST_ROOTS, ())
