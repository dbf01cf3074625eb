"""JSON Lines that survive a crash: the read rules, tail repair, atomic rewrites."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from overbrainer.errors import UserError
from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl, rewrite_jsonl


def has_id(record):
    return isinstance(record.get("id"), str)


def test_a_missing_file_is_empty(tmp_path):
    assert read_jsonl(tmp_path / "none.jsonl", "none.jsonl") == []


def test_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}\n\n   \n{"id":"2"}\n')
    assert [r["id"] for r in read_jsonl(path, "a.jsonl", has_id)] == ["1", "2"]


def test_an_unterminated_valid_last_line_is_kept(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}\n{"id":"2"}')
    assert [r["id"] for r in read_jsonl(path, "a.jsonl", has_id)] == ["1", "2"]


def test_an_incomplete_last_line_is_skipped_with_a_warning(tmp_path, capsys):
    from overbrainer.logs import configure_logging

    configure_logging()
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}\n{"id":"2","te')
    assert [r["id"] for r in read_jsonl(path, "data/a.jsonl", has_id)] == ["1"]
    assert "data/a.jsonl: ignoring an incomplete last line" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ['{"id":"2"', "[1, 2]", '{"no_id": 1}', "\xff"])
def test_any_other_bad_line_is_an_invalid_record(tmp_path, bad):
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"id":"1"}\n' + bad.encode("latin-1") + b'\n{"id":"3"}\n')
    with pytest.raises(UserError) as caught:
        read_jsonl(path, "data/a.jsonl", has_id)
    assert caught.value.message == "data/a.jsonl:2: invalid record"


def test_append_terminates_a_valid_last_line(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}')
    with JsonlWriter(path, has_id) as writer:
        writer.append({"id": "2"})
    assert path.read_text() == '{"id":"1"}\n{"id":"2"}\n'


def test_append_cuts_an_invalid_tail(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}\n{"id":"2","te')
    with JsonlWriter(path, has_id) as writer:
        writer.append({"id": "3", "text": "é"})
    assert path.read_text(encoding="utf-8") == '{"id":"1"}\n{"id":"3","text":"é"}\n'


def test_append_cuts_a_tail_with_no_newline_at_all(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("x" * 100_000)
    with JsonlWriter(path) as writer:
        writer.append({"id": "1"})
    assert path.read_text() == '{"id":"1"}\n'


def test_each_record_is_on_disk_as_soon_as_it_is_appended(tmp_path):
    path = tmp_path / "sub" / "a.jsonl"
    writer = JsonlWriter(path)
    assert not path.exists()  # nothing written, nothing created
    writer.append({"id": "1"})
    assert path.read_text() == '{"id":"1"}\n'
    writer.close()


def test_rewrite_replaces_the_file_atomically(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"old"}\n')
    before = os.stat(path).st_ino
    rewrite_jsonl(path, [{"id": "1"}, {"id": "2"}])
    assert path.read_text() == '{"id":"1"}\n{"id":"2"}\n'
    assert os.stat(path).st_ino != before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.jsonl"]


@pytest.fixture
def umask():
    """Set the process umask for one test: ``umask(0o002)``."""
    previous = os.umask(0o022)
    yield os.umask
    os.umask(previous)


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o664, 0o600])
def test_rewrite_keeps_the_mode_of_the_file_it_replaces(tmp_path, umask, mode):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"old"}\n')
    path.chmod(mode)
    rewrite_jsonl(path, [{"id": "1"}])
    assert os.stat(path).st_mode & 0o7777 == mode


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_file_gets_the_mode_the_umask_gives(tmp_path, umask, mask, mode):
    umask(mask)
    rewrite_jsonl(tmp_path / "new.jsonl", [{"id": "1"}])
    with JsonlWriter(tmp_path / "appended.jsonl") as writer:
        writer.append({"id": "1"})
    assert os.stat(tmp_path / "new.jsonl").st_mode & 0o7777 == mode
    assert os.stat(tmp_path / "appended.jsonl").st_mode & 0o7777 == mode


# One rule for an invalid record, wherever it is: an error naming it, and nothing cut away.
# Only a line cut short (not JSON at all) at the unterminated end is what a crash leaves.


@pytest.mark.parametrize("bad", ['{"no_id": 1}', "[1, 2]", "3", '"text"'])
def test_an_invalid_record_as_the_unterminated_last_line_is_an_error_too(tmp_path, bad):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}\n' + bad)
    with pytest.raises(UserError) as caught:
        read_jsonl(path, "data/a.jsonl", has_id)
    assert caught.value.message == "data/a.jsonl:2: invalid record"


def test_appending_after_an_invalid_last_record_refuses_and_cuts_nothing(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"id":"1"}\n{"no_id": 1}')
    with pytest.raises(UserError) as caught, JsonlWriter(path, has_id, "data/a.jsonl") as writer:
        writer.append({"id": "2"})
    assert caught.value.message == "data/a.jsonl:2: invalid record"
    assert path.read_text() == '{"id":"1"}\n{"no_id": 1}'


def test_a_stage_refuses_an_invalid_last_answer_and_keeps_it(run_cli, project_dir, provider):
    from tests.helpers.pipeline_data import answer, seed_questions

    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2"]})
    broken = dict(answer(questions[0]), meta="hand-edited")
    text = json.dumps(broken)  # the last line, unterminated
    (project_dir / "data" / "answers.jsonl").write_text(text)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: data/answers.jsonl:1: invalid record\n")
    assert (project_dir / "data" / "answers.jsonl").read_text() == text
    assert provider.chats() == []


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="0123456789e-.,:\"x ", max_size=40))
def test_the_small_float_screen_is_the_regex_it_replaced(text):
    import re

    from overbrainer.pipeline.jsonl import _small_float

    out = text.encode()
    regex = re.compile(rb"[0-9]e-[0-9](?![0-9])")
    assert _small_float(out) == (b"0.0000" in out or regex.search(out) is not None)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.text()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([1e-5, 2.5e-7, 1e16, 1e22, -0.0, 5e-324, 1.7976931348623157e308]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=3000, deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=6))
def test_a_finite_record_is_encoded_as_the_standard_library_writes_it(record):
    from overbrainer.pipeline.jsonl import dumps, encode_line

    try:
        expected = (dumps(record) + "\n").encode()
    except UnicodeEncodeError:  # a lone surrogate: refused the same way
        with pytest.raises(UnicodeEncodeError):
            encode_line(record)
        return
    assert encode_line(record) == expected


def test_what_orjson_would_write_otherwise_goes_through_the_standard_library():
    import dataclasses
    import datetime
    import enum

    from overbrainer.pipeline.jsonl import dumps, encode_line

    class Name(str):
        pass

    class Kind(enum.IntEnum):
        ONE = 1

    @dataclasses.dataclass
    class Point:
        x: int

    for record in ({"a": Name("x")}, {"a": Kind.ONE}, {"a": (1, 2)}, {"a": 2**64},
                   {"a": 1e-9}, {"a": "\u2028\x7f\x1f"}):
        assert encode_line(record) == (dumps(record) + "\n").encode()
    for refused in ({"a": Point(1)}, {"a": datetime.date(2026, 1, 1)}, {1: "x"} | {"a": Point(1)}):
        with pytest.raises(TypeError):
            encode_line(refused)


def test_a_finite_writer_writes_the_lines_the_standard_library_writes(tmp_path):
    records = [{"id": "1", "text": "é \u2028 \"q\"", "n": 2**65}, {"id": "2", "f": 1e-7}]
    with JsonlWriter(tmp_path / "a.jsonl", finite=True) as fast, \
            JsonlWriter(tmp_path / "b.jsonl") as plain:
        for record in records:
            fast.append(record)
            plain.append(record)
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()


def test_an_append_after_a_tail_past_the_bound_is_refused_and_cuts_nothing(tmp_path):
    """A tail with no newline longer than any record is no torn line: it was cut away
    whole (gigabytes, read into memory first); now it is an error, and the file is kept."""
    from overbrainer.lines import MAX_LINE

    path = tmp_path / "a.jsonl"
    body = b'{"id":"1"}\n' + b"x" * (MAX_LINE + 1)
    path.write_bytes(body)
    writer = JsonlWriter(path, has_id, "a.jsonl")
    with pytest.raises(UserError, match=r"^a.jsonl:2: a line longer than 64 MiB"):
        writer.append({"id": "2"})
    writer.close()
    assert path.stat().st_size == len(body)
