"""Lines of a file or a stream, read in time linear in their bytes and within a bound.

A file can hold anything: one line of gigabytes with no newline (or only carriage returns)
is read by a plain ``for line in file`` whole into memory, and by a reader that re-joins
what it holds at each chunk in quadratic time. Every line reader of the project goes
through here: a line longer than its bound is an error naming the file and line, or, for a
log shown to a person, cut at the bound.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import BinaryIO

from overbrainer.errors import UserError

MAX_LINE = 64 << 20
"""The longest line read (64 MiB: an answer of a million tokens is far less)."""
CUT = b" [... line cut: longer than the bound]"
"""What ends a line of a log cut at its bound."""


class LineTooLong(UserError):
    """A line longer than its bound: not read."""

    def __init__(self, shown: str, number: int, limit: int) -> None:
        super().__init__(
            f"{shown}:{number}: a line longer than {_size(limit)} (no line end: not a file "
            "of lines, or a damaged one): not read"
        )
        self.number = number


def read_lines(
    file: BinaryIO, shown: str, limit: int = MAX_LINE, *, cut: bool = False
) -> Iterator[bytes]:
    """The lines of ``file`` from where it is, each with its ``\\n`` (the last one may have
    none). A line longer than ``limit`` bytes raises :class:`LineTooLong`; with ``cut``
    it is given cut at ``limit`` (and ``CUT`` appended) and the rest of it skipped."""
    number = 0
    for raw in iter(partial(file.readline, limit + 1), b""):
        number += 1
        if len(raw) <= limit or raw.endswith(b"\n"):
            yield raw
            continue
        if not cut:
            raise LineTooLong(shown, number, limit)
        for rest in iter(partial(file.readline, limit + 1), b""):
            if rest.endswith(b"\n"):
                break
        yield raw[:limit] + CUT + b"\n"


class LineSplitter:
    """Splits a stream, chunk by chunk, into its lines (without their ``\\n``).

    Linear in the stream: a chunk is split on its own, and the pieces of a line not ended
    yet are kept apart until its end comes (never re-joined at each chunk). A line longer
    than ``limit`` raises :class:`LineTooLong`, or with ``cut`` is given cut at ``limit``
    (``CUT`` appended) and the rest of it dropped.
    """

    def __init__(self, shown: str, limit: int = MAX_LINE, *, cut: bool = False) -> None:
        self.shown = shown
        self.limit = limit
        self.cut = cut
        self.number = 0
        """Lines given so far."""
        self._pending: list[bytes] = []
        self._size = 0
        self._dropping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` ends."""
        *ended, tail = chunk.split(b"\n")
        lines = []
        for piece in ended:
            line = self._joined(piece)
            if line is not None:
                lines.append(line)
        if tail and not self._dropping:
            self._pending.append(tail)
            self._size += len(tail)
            if self._size > self.limit:
                if not self.cut:
                    raise LineTooLong(self.shown, self.number + 1, self.limit)
                lines.append(b"".join(self._pending)[: self.limit] + CUT)
                self.number += 1
                self._pending, self._size, self._dropping = [], 0, True
        return lines

    def end(self) -> bytes | None:
        """The last line when the stream ended without its ``\\n`` (None when it did not)."""
        if not self._pending:
            return None
        line = b"".join(self._pending)
        self._pending, self._size = [], 0
        self.number += 1
        return line

    def _joined(self, piece: bytes) -> bytes | None:
        if self._dropping:  # the end of a line already given cut
            self._dropping = False
            return None
        if self._size + len(piece) > self.limit:
            if not self.cut:
                raise LineTooLong(self.shown, self.number + 1, self.limit)
            line = b"".join([*self._pending, piece[: self.limit]])[: self.limit] + CUT
        else:
            line = b"".join([*self._pending, piece]) if self._pending else piece
        self._pending, self._size = [], 0
        self.number += 1
        return line


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 and not limit % (1 << 20) else f"{limit} bytes"
