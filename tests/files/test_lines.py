"""Lines read linearly within a bound: whole across chunks, a line past the bound an error
naming its file and line (or, for a log, shown cut)."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from overbrainer.lines import CUT, LineSplitter, LineTooLong, read_lines


@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
       st.integers(1, 17))
def test_lines_split_across_chunks_come_whole(lines, size):
    body = b"".join(line + b"\n" for line in lines)
    splitter = LineSplitter("a stream")
    found = []
    for start in range(0, len(body), size):
        found += splitter.feed(body[start : start + size])
    assert splitter.end() is None
    assert found == lines
    assert splitter.number == len(lines)


def test_a_stream_that_ends_without_a_newline_gives_its_last_line():
    splitter = LineSplitter("a stream")
    assert splitter.feed(b"one\ntw") == [b"one"]
    assert splitter.feed(b"o") == []
    assert splitter.end() == b"two"


def test_a_line_past_the_bound_names_the_stream_and_its_line():
    splitter = LineSplitter("the results", 1000)
    assert splitter.feed(b"a\nb\n") == [b"a", b"b"]
    for _ in range(10):
        assert splitter.feed(b"\r" * 100) == []  # carriage returns end no line
    with pytest.raises(LineTooLong, match=r"^the results:3: a line longer than 1000 bytes"):
        splitter.feed(b"\r")


def test_a_line_past_the_bound_in_one_chunk_is_refused_too():
    with pytest.raises(LineTooLong, match="the results:1: "):
        LineSplitter("the results", 10).feed(b"x" * 11 + b"\n")


def test_a_log_line_past_the_bound_is_cut_and_the_next_lines_come():
    splitter = LineSplitter("a log", 10, cut=True)
    found = splitter.feed(b"start\n" + b"x" * 25)
    found += splitter.feed(b"y" * 25 + b"\nnext\n")
    assert found == [b"start", b"x" * 10 + CUT, b"next"]
    assert splitter.end() is None


def test_read_lines_keeps_line_ends_and_a_last_line_without_one():
    file = io.BytesIO(b"a\n\nb")
    assert list(read_lines(file, "f")) == [b"a\n", b"\n", b"b"]


def test_read_lines_refuses_a_line_past_the_bound_with_its_file_and_line():
    file = io.BytesIO(b"ok\n" + b"\r" * 100)  # no newline: one line of carriage returns
    lines = read_lines(file, "data/x.jsonl", 64)
    assert next(lines) == b"ok\n"
    with pytest.raises(LineTooLong, match=r"^data/x.jsonl:2: a line longer than 64 bytes"):
        next(lines)


def test_read_lines_a_line_of_exactly_the_bound_is_read():
    assert list(read_lines(io.BytesIO(b"x" * 64 + b"\n" + b"y" * 64), "f", 64)) == [
        b"x" * 64 + b"\n",
        b"y" * 64,
    ]


def test_read_lines_cuts_a_long_line_and_goes_on():
    file = io.BytesIO(b"a\n" + b"x" * 300 + b"\nb\n")
    assert list(read_lines(file, "f", 64, cut=True)) == [b"a\n", b"x" * 64 + CUT + b"\n", b"b\n"]
