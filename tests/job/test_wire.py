"""The job's wire protocol: each script's answer read back by its parser, exit codes by name."""

from __future__ import annotations

import json
import os
import subprocess
import threading

import pytest

from overbrainer.job import wire
from overbrainer.job.host import HostError
from overbrainer.job.spec import CANCELLED, LOST, RUNNING, JobStatus


def _sh(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("status running", RUNNING),
        ("status cancelled", CANCELLED),
        ("status lost", LOST),
        ("status exited 3", JobStatus.exited(3)),
        ("status exited -9", JobStatus.exited(-9)),
    ],
)
def test_each_status_line_is_read(line, status):
    assert wire.status_line(line) == status


@pytest.mark.parametrize("line", ["", "status", "status exited x", "running", "status gone"])
def test_another_answer_is_refused(line):
    with pytest.raises(HostError, match="the status script answered something unexpected"):
        wire.status_line(line)


def test_the_status_script_is_read_by_its_parser(tmp_path):
    (tmp_path / "exit_code").write_text("0\n")
    (tmp_path / "snapshot.request").write_text("deadline\n")
    (tmp_path / "metrics.jsonl").write_text('{"a": 1}\n{"b": 2}\n')
    done = _sh(wire.status_script(str(tmp_path), offset=9))
    status, request, snapshot, _, size, rest = wire.parse_status(done.stdout.encode())
    assert (status, request, snapshot, size, rest) == (
        JobStatus.exited(0), "deadline", None, 18, b'{"b": 2}\n'
    )


def test_the_status_script_reads_each_file_once_and_says_its_length(tmp_path):
    # Trailing newlines and a multi-byte character are counted as the bytes they are.
    (tmp_path / "machine.json").write_text('{"gpu": "é"}\n\n')
    (tmp_path / "snapshot.json").write_text('{"step": 4}\n')
    (tmp_path / "metrics.jsonl").write_text('{"a": 1}\n')
    done = subprocess.run(
        ["sh", "-c", wire.status_script(str(tmp_path), offset=0)], capture_output=True,
        check=False,
    )  # fmt: skip
    _, _, snapshot, machine, size, rest = wire.parse_status(done.stdout)
    assert (snapshot, machine) == ('{"step": 4}\n', '{"gpu": "é"}\n\n')
    assert (size, rest) == (9, b'{"a": 1}\n')


def test_a_machine_sample_replaced_while_the_status_is_read_is_never_misread(tmp_path):
    # The runner renames a new machine.json over the old one with each sample. A script
    # that read it twice (to count, then to print) said one sample's length and printed
    # another's: the answer misread, the metrics read again from the start (duplicated
    # lines in the raw-hook and ssh tests under load).
    lines = b'{"event": "log", "step": 1}\n{"event": "log", "step": 2}\n'
    (tmp_path / "metrics.jsonl").write_bytes(lines)
    stop = threading.Event()

    def sample() -> None:
        size = 0
        while not stop.is_set():
            size = (size + 7) % 50
            (tmp_path / "machine.tmp").write_text(json.dumps({"cpu": "x" * size}))
            os.replace(tmp_path / "machine.tmp", tmp_path / "machine.json")

    writer = threading.Thread(target=sample)
    writer.start()
    try:
        script = wire.status_script(str(tmp_path), offset=0)
        answers = []
        for _ in range(50):
            done = subprocess.run(["sh", "-c", script], capture_output=True, check=True)
            answers.append(wire.parse_status(done.stdout))
    finally:
        stop.set()
        writer.join()
    for _, _, _, machine, size, rest in answers:
        assert machine is not None and "cpu" in json.loads(machine)
        assert (size, rest) == (len(lines), lines)


def test_an_answer_misread_keeps_the_metrics_for_the_next_look():
    # A machine sample said longer than the bytes that follow it (the file replaced between
    # two reads): the metrics line is swallowed. That says nothing of the metrics; before,
    # it read as an empty file, and the next look read every line again from the start.
    output = b'status running\nmachine 40\n{"gpu": 1}\nmetrics 120\n{"a": 1}\n'
    status, _, _, _, size, rest = wire.parse_status(output)
    assert (status, size, rest) == (RUNNING, -1, b"")


def test_a_cancel_without_a_pid_exits_with_its_named_code(tmp_path):
    done = _sh(wire.cancel_script(str(tmp_path), None, None, token="t"))
    assert done.returncode == wire.CANCEL_NO_PID
    assert done.stdout.strip() == "no job.pid"
    (tmp_path / "job.pid").write_text("1\n")
    done = _sh(wire.cancel_script(str(tmp_path), None, None, token="t"))
    assert (done.returncode, done.stdout.strip()) == (wire.CANCEL_NO_PID, "invalid job.pid")


def test_a_group_that_is_not_the_job_is_never_signalled(tmp_path):
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        done = _sh(wire.cancel_script(str(tmp_path), other.pid, None, token="not-its-token"))
        assert done.returncode == wire.CANCEL_NOT_THE_JOB
        assert "is not this job's" in done.stdout
        assert other.poll() is None
        assert not (tmp_path / "cancelled").exists()
    finally:
        other.kill()
        other.wait()
