"""Cutting ``metrics.jsonl`` reads into complete lines, and reading the events in them."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

from overbrainer.lines import read_lines

_TERMINATORS = re.compile(rb"[\r\n]")
EVENT_LINE = 1 << 20
"""The longest metrics line read (1 MiB: an event is a few hundred bytes)."""


def complete_lines(chunk: bytes, capped: bool) -> tuple[list[str], int]:
    """The complete lines of ``chunk`` and how many bytes they used.

    A line ends with ``\\n`` or ``\\r``; the unterminated rest waits for the next read.
    When a read filled its cap with no terminator at all, the chunk is taken as one line
    cut at a UTF-8 boundary, so a giant line can never stall the follower.
    """
    end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
    if end < 0:
        if not capped or not chunk:
            return [], 0
        cut = utf8_boundary(chunk)
        return [chunk[:cut].decode("utf-8", "replace")], cut
    lines = [
        part.decode("utf-8", "replace") for part in _TERMINATORS.split(chunk[: end + 1]) if part
    ]
    return lines, end + 1


def utf8_boundary(data: bytes) -> int:
    """The largest length <= len(data) that does not split a UTF-8 character."""
    start = len(data) - 1
    while start > 0 and len(data) - start < 4 and data[start] & 0xC0 == 0x80:
        start -= 1  # back over continuation bytes to the last character's lead byte
    if start < 0:
        return 0
    lead = data[start]
    width = 1 if lead < 0x80 else 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4
    return len(data) if start + width <= len(data) else start


def parse_event(line: str) -> dict[str, Any] | None:
    """The event a metrics line holds, or None when it is not one."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or not isinstance(event.get("event"), str):
        return None
    return event


def read_events(file: BinaryIO, shown: str) -> Iterator[dict[str, Any]]:
    """The events of the metrics file ``file`` from where it is. A line ends with ``\\n``
    or ``\\r``, as in :func:`complete_lines`; one longer than ``EVENT_LINE`` is no event
    (skipped, never read whole), nor is anything else ``parse_event`` refuses."""
    for raw in read_lines(file, shown, EVENT_LINE, cut=True):
        for part in raw.split(b"\r"):
            event = parse_event(part.decode("utf-8", "replace"))
            if event is not None:
                yield event
