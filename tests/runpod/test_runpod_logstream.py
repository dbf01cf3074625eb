"""The pieces of the pod log reader that need no server: the event-stream parser, the
event payloads, the cursors and the backoff between reconnects."""

from __future__ import annotations

from overbrainer_runpod.logstream import (
    MAX_LINE,
    Backoff,
    Frame,
    LogError,
    PodLogLine,
    SseParser,
    parse_data,
    valid_cursor,
)


def frames(*chunks: str) -> list[Frame]:
    parser = SseParser()
    return [frame for chunk in chunks for frame in parser.feed(chunk.encode())]


def test_events_are_read_across_chunks_and_line_endings():
    assert frames("id: a/1\nda", 'ta: {"x":1}\n\nid: a/2\r\ndata: two\r\n', "\r\n") == [
        Frame("a/1", '{"x":1}'),
        Frame("a/2", "two"),
    ]


def test_comments_and_other_fields_are_skipped_and_an_id_alone_is_an_event():
    assert frames(": ping\n\nevent: log\nretry: 5\nid: k/9\n\n") == [Frame("k/9", None)]


def test_data_lines_join_and_an_event_cut_before_its_blank_line_is_dropped():
    assert frames("data: a\ndata:b\ndata:  c\n\nid: x/2\ndata: half") == [
        Frame(None, "a\nb\n c")
    ]


def test_an_oversized_line_is_cut_and_marked():
    long = "x" * (MAX_LINE + 10)
    events = frames("data: ", long, "\n\ndata: next\n\n")
    assert events[0].truncated and len(events[0].data or "") == MAX_LINE - len("data: ")
    assert events[1] == Frame(None, "next")


def test_payloads_are_cleaned_or_kept_raw():
    line = '{"ts":"2026-06-01T12:02:03.5Z","source":"container","line":"hi"}'
    assert parse_data(line) == PodLogLine("2026-06-01T12:02:03.5Z", "container", "hi")
    forged = '{"ts":"\\u001b[2Jnow","source":"\\u001b]0;x","line":"hi"}'
    assert parse_data(forged) == PodLogLine("", "raw", "hi")
    assert parse_data("not json", truncated=True) == PodLogLine("", "raw", "not json [truncated]")
    assert parse_data("null") == PodLogLine("", "raw", "null")
    assert parse_data("  ") is None


def test_a_line_is_shown_redacted_on_one_line():
    line = PodLogLine("2026-06-01T12:02:03Z", "system", "a\r\nb\tc\x1b[0m \u202eevil HF_TOKEN=x")
    assert line.display() == (
        "2026-06-01T12:02:03Z sys a\\x0d\\x0ab\tc\\x1b[0m \\u202eevil HF_TOKEN=***"
    )
    assert PodLogLine("\x1b[31m", "\x1b[2J", "x").display() == " raw x"
    assert PodLogLine("", "overbrainer", "capped").display() == " obr capped"


def test_cursors_must_be_printable_and_short():
    assert valid_cursor("2026-06-01T12:02:03Z/000000000001")
    assert not valid_cursor("")
    assert not valid_cursor("a b")
    assert not valid_cursor("a\nb")
    assert not valid_cursor("a" * 201)


def test_the_backoff_grows_until_a_connection_delivers_and_honours_retry_after():
    backoff = Backoff()
    dropped = LogError("broke")
    assert [backoff.wait(False, dropped) for _ in range(7)] == [
        0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0,
    ]  # fmt: skip
    assert backoff.wait(True, None) == 0.5
    assert backoff.wait(False, LogError("busy", 429, retry_after=5)) == 5
    assert backoff.wait(False, LogError("busy", 429, retry_after=3600)) == 60
    assert not LogError("busy", 503).permanent and LogError("gone", 404).permanent
