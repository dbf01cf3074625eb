"""The job directory a target reads here (spool, Ray, Slurm): what the runner wrote, read
the way the contract asks — complete lines only, torn files as nothing yet, secrets 0600."""

from __future__ import annotations

import stat
from pathlib import Path

from pydantic import SecretStr

from overbrainer.plugin import (
    CANCELLED,
    RUNNING,
    JobDirectory,
    JobSpec,
    JobStatus,
    layout,
)


def _spec(tmp_path: Path, secrets: dict[str, str]) -> JobSpec:
    local = tmp_path / "home"
    local.mkdir()
    (local / layout.CONFIG_FILE).write_text("base_model: tiny\n")
    return JobSpec("run-1", local, {name: SecretStr(value) for name, value in secrets.items()})


def test_fill_copies_the_job_and_keeps_its_secrets_private(tmp_path):
    where = JobDirectory(tmp_path / "job")
    secrets = where.fill(_spec(tmp_path, {"HF_TOKEN": "hf_secret"}))
    assert (where.path / layout.CONFIG_FILE).read_text() == "base_model: tiny\n"
    assert secrets == where.path / layout.SECRETS_FILE
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    assert b"hf_secret" in secrets.read_bytes()
    where.forget_secrets()
    assert not secrets.exists()
    where.forget_secrets()  # twice: nothing to forget is fine


def test_a_job_without_secrets_gets_no_secrets_file(tmp_path):
    where = JobDirectory(tmp_path / "job")
    assert not where.fill(_spec(tmp_path, {})).exists()


def test_poll_returns_complete_lines_and_goes_on_from_its_offset(tmp_path):
    where = JobDirectory(tmp_path)
    metrics = tmp_path / layout.METRICS_FILE
    metrics.write_bytes(b'{"step": 1}\n{"step": 2}\n{"st')
    first, offset = where.poll(RUNNING, 0)
    assert first.lines == ('{"step": 1}', '{"step": 2}')
    assert first.status == RUNNING and first.snapshot is None and first.machine is None
    with metrics.open("ab") as file:
        file.write(b'ep": 3}\n')
    second, offset = where.poll(RUNNING, offset)
    assert second.lines == ('{"step": 3}',)
    assert where.poll(RUNNING, offset)[0].lines == ()


def test_poll_reads_the_snapshot_request_the_snapshot_and_the_gauges(tmp_path):
    where = JobDirectory(tmp_path)
    where.request_snapshot("deadline")
    assert (tmp_path / layout.SNAPSHOT_REQUEST).read_text() == "deadline\n"
    assert [p.name for p in tmp_path.iterdir()] == [layout.SNAPSHOT_REQUEST]  # no temporary
    (tmp_path / layout.SNAPSHOT_FILE).write_text('{"step": 4}')
    (tmp_path / layout.MACHINE_FILE).write_text('{"gpus": []}')
    found, _ = where.poll(RUNNING, 0)
    assert found.snapshot_request == "deadline"
    assert found.snapshot == '{"step": 4}' and found.machine == '{"gpus": []}'


def test_the_files_say_how_the_job_ended_and_a_torn_exit_code_says_nothing_yet(tmp_path):
    where = JobDirectory(tmp_path)
    assert where.ended() is None
    (tmp_path / layout.EXIT_CODE).write_text("")  # the runner is writing it
    assert where.exit_code() is None and where.ended() is None
    (tmp_path / layout.EXIT_CODE).write_text("garbage")
    assert where.ended() is None
    (tmp_path / layout.EXIT_CODE).write_text("3\n")
    assert where.ended() == JobStatus.exited(3)
    where.mark(layout.CANCELLED)
    assert where.ended() == CANCELLED  # a cancel is the last word


def test_read_log_goes_on_from_the_offset_it_returns(tmp_path):
    where = JobDirectory(tmp_path)
    assert where.read_log(0).data == b""
    (tmp_path / layout.JOB_LOG).write_bytes(b"one\ntwo\n")
    chunk = where.read_log(4)
    assert (chunk.data, chunk.offset) == (b"two\n", 8)
