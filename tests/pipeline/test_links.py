"""Issue 26: the dataset stages never write through a link nor wait on a special file.

Every FIFO here is opened by nobody else: code that opened one to read it would block
forever, so each test returning at all is the proof (the suite's timeout is the backstop).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from overbrainer.errors import UserError
from overbrainer.pipeline.history import append_history
from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl, rewrite_jsonl, scan_jsonl

TOKEN = b"hf_abcdefSECRETtoken"  # a token file ends without a newline


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file out of the project that must survive untouched: a token, no final newline."""
    path = tmp_path / "elsewhere" / "token"
    path.parent.mkdir()
    path.write_bytes(TOKEN)
    return path


def entry() -> dict:
    return {"stage": "split", "status": "ok", "done": 0}


def test_a_stage_never_appends_its_history_through_a_link(run_cli, project_dir, outside):
    state = project_dir / ".overbrainer"
    state.mkdir()
    (state / "history.jsonl").symlink_to(outside)
    result = run_cli("split")
    assert result.exit_code != 0
    assert (
        ".overbrainer/history.jsonl is a symbolic link: refusing to write through it"
        in result.stderr
    )
    assert "Traceback" not in result.stderr
    assert outside.read_bytes() == TOKEN  # neither appended to nor its last line cut


def test_no_appended_data_file_is_written_through_a_link(project_dir, outside):
    data = project_dir / "data"
    data.mkdir()
    (data / "rejected.jsonl").symlink_to(outside)
    writer = JsonlWriter(data / "rejected.jsonl", shown="data/rejected.jsonl")
    with pytest.raises(UserError) as refused:
        writer.append({"id": "x"})
    assert str(refused.value) == (
        "data/rejected.jsonl is a symbolic link: refusing to write through it"
    )
    assert outside.read_bytes() == TOKEN


def test_a_data_directory_that_is_a_link_is_not_written_through(project_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere-data"
    elsewhere.mkdir()
    (project_dir / "data").symlink_to(elsewhere)
    append_history(project_dir, entry())  # its own directory is fine
    with pytest.raises(UserError) as refused:
        rewrite_jsonl(project_dir / "data" / "questions.jsonl", [{"id": "q"}])
    assert "is a symbolic link: refusing to write through it" in str(refused.value)
    assert list(elsewhere.iterdir()) == []


def test_a_rewrite_replaces_a_link_and_leaves_its_target(project_dir, outside):
    data = project_dir / "data"
    data.mkdir()
    (data / "answers.jsonl").symlink_to(outside)
    rewrite_jsonl(data / "answers.jsonl", [{"id": "a"}])
    assert not (data / "answers.jsonl").is_symlink()
    assert (data / "answers.jsonl").read_text() == '{"id":"a"}\n'
    assert outside.read_bytes() == TOKEN


def test_answers_never_waits_on_a_fifo_of_questions(run_cli, project_dir):
    (project_dir / "data").mkdir(exist_ok=True)
    os.mkfifo(project_dir / "data" / "questions.jsonl")
    result = run_cli("answers")
    assert result.exit_code != 0
    assert "data/questions.jsonl is a FIFO: refusing to read it" in result.stderr
    assert "Traceback" not in result.stderr


def test_history_never_waits_on_a_fifo(run_cli, project_dir):
    (project_dir / ".overbrainer").mkdir()
    os.mkfifo(project_dir / ".overbrainer" / "history.jsonl")
    for args in (("history",), ("split",)):
        result = run_cli(*args)
        assert result.exit_code != 0
        assert ".overbrainer/history.jsonl is a FIFO: refusing to" in result.stderr


def test_history_linked_to_a_device_is_refused_not_read_forever(run_cli, project_dir):
    (project_dir / ".overbrainer").mkdir()
    (project_dir / ".overbrainer" / "history.jsonl").symlink_to("/dev/zero")
    result = run_cli("history")
    assert result.exit_code != 0
    assert ".overbrainer/history.jsonl is a device: refusing to read it" in result.stderr


def test_every_reader_refuses_a_fifo(tmp_path):
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"^f\.jsonl is a FIFO: refusing to read it$"):
        read_jsonl(fifo, "f.jsonl")
    with pytest.raises(UserError, match=r"^f\.jsonl is a FIFO: refusing to read it$"):
        list(scan_jsonl(fifo, "f.jsonl"))
    with pytest.raises(UserError, match=r"^f\.jsonl is a FIFO: refusing to write to it$"):
        JsonlWriter(fifo, shown="f.jsonl").append({"id": 1})
