"""JSON Lines files that survive a crash at any byte.

Reading skips blank lines and an unfinished last line (the one a crash was writing);
appending first repairs such a tail, then writes one flushed line a record, so a crash loses
at most the line being written; a rewrite goes to a temporary file, synced, then renamed.

One rule for a line that is JSON but not a valid record, wherever it is, the last line
included: an error naming the file and line, and nothing is cut away. Skipping or cutting
it would lose what someone wrote (a hand edit, another tool's record), and an error loses
nothing: the user fixes the line and runs again. The one line that is dropped is a line cut
short, not JSON at all, at the unterminated end of the file: a crash while it was appended
leaves exactly that, and it holds no complete record to lose.
"""

from __future__ import annotations

import errno
import functools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from loguru import logger

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.lines import MAX_LINE, LineTooLong, read_lines

Check = Callable[[dict[str, Any]], bool]
"""Whether a parsed object is a valid record of its file."""

_CHUNK = 1 << 16


def dumps(record: Mapping[str, Any]) -> str:
    """``record`` as one compact line, UTF-8 kept as is."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


# orjson reads and writes what the standard library does, but for a few values: integers
# of 19 digits or more (read as floats), floats below 1e-4 (written `0.00001`, `1e-9`
# where the standard library writes `1e-05`, `1e-09`), NaN and infinities (refused when
# read). Lines and outputs that may hold those go through the standard library.
# Searched with bytes methods first (a regex over every line costs more than the parse).
_DIGITS = bytes(48 if 48 <= byte <= 57 else 46 for byte in range(256))
"""Maps digits to "0" and everything else to ".": a run of digits is a run of zeros."""
_WIDE = b"0" * 19
_EXPONENTS = bytes(
    48 if 48 <= byte <= 57 else byte if byte in b"e-" else 46 for byte in range(256)
)
"""Maps digits to "0", keeps "e" and "-", and maps the rest to ".": ``0e-0.`` is a
one-digit negative exponent."""


def _wide_int(raw: bytes) -> bool:
    """Whether ``raw`` may hold an integer of 19 digits or more (or digits in a string)."""
    return _WIDE in raw.translate(_DIGITS)


def _small_float(out: bytes) -> bool:
    """Whether orjson's ``out`` may hold a float the standard library writes otherwise."""
    if b"0.0000" in out:
        return True
    if b"e-" not in out:
        return False
    shape = out.translate(_EXPONENTS)  # one pass in C: a regex search costs twice that
    return any(f in shape for f in (b"0e-0.", b"0e-0e", b"0e-0-")) or shape.endswith(b"0e-0")


def _orjson() -> Any:
    try:
        import orjson  # noqa: PLC0415 - the standard library serves where it is missing
    except ImportError:  # pragma: no cover - a core dependency; kept optional in spirit
        return None
    return orjson


def loads(raw: bytes) -> tuple[Any, bool]:
    """``json.loads(raw)`` and whether ``encode`` may write it back with the fast codec
    (orjson read it, so it holds no NaN, infinity, wide integer or lone surrogate)."""
    orjson = _orjson()
    if orjson is not None and not _wide_int(raw):
        try:
            return orjson.loads(raw), True
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw), False


def encode(record: dict[str, Any], fast: bool) -> bytes:
    """``dumps(record)`` as UTF-8 bytes, the same bytes; ``fast``: as ``loads`` said."""
    if fast:
        out: bytes = _orjson().dumps(record)
        if not _small_float(out):
            return out
    return dumps(record).encode()


class _CutShort:
    """A line that is not JSON: what a crash leaves at the end of a file."""


CUT_SHORT = _CutShort()


def _parse(raw: bytes, check: Check | None) -> dict[str, Any] | _CutShort | None:
    """The record on the line ``raw``; ``CUT_SHORT`` when it is not JSON at all; None
    when it is JSON but not a valid record."""
    return _parse_fast(raw, check)[0]


def _parse_fast(raw: bytes, check: Check | None) -> tuple[dict[str, Any] | _CutShort | None, bool]:
    try:
        record, fast = loads(raw)
    except (ValueError, UnicodeDecodeError):
        return CUT_SHORT, False
    if not isinstance(record, dict) or (check is not None and not check(record)):
        return None, False
    return record, fast


def invalid(shown: str, line: int) -> UserError:
    return UserError(f"{shown}:{line}: invalid record")


def read_jsonl(path: Path, shown: str, check: Check | None = None) -> list[dict[str, Any]]:
    """The records of ``path`` (none when it is missing); ``shown`` names it in messages.

    An invalid line is an error ("<shown>:<line>: invalid record"), except an unterminated
    last line cut short (not JSON), which is skipped with a warning.
    """
    data = files.read_regular(path, shown)
    if data is None:
        return []
    lines = data.split(b"\n")
    terminated = lines[-1] == b""
    if terminated:
        lines.pop()
    records = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        record = _parse(raw, check)
        if record is CUT_SHORT and number == len(lines) and not terminated:
            logger.warning(f"{shown}: ignoring an incomplete last line")
            continue
        if not isinstance(record, dict):
            raise invalid(shown, number)
        records.append(record)
    return records


class Line:
    """A record of a JSON Lines file, its line (``body``, no newline) and where it is:
    ``offset`` and ``length`` (the newline included); ``fast``: whether ``encode`` may use
    the fast codec on the record; ``small``: whether the line may hold a float the fast
    codec writes otherwise (``_small_float`` of the line)."""

    __slots__ = ("body", "fast", "length", "offset", "record", "small")

    def __init__(
        self,
        offset: int,
        length: int,
        body: bytes,
        record: dict[str, Any],
        fast: bool,
        *,
        small: bool = True,
    ) -> None:
        self.offset = offset
        self.length = length
        self.body = body
        self.record = record
        self.fast = fast
        self.small = small


Scanned = tuple[int, int, bytes, dict[str, Any], bool, bool]
"""A ``Line``'s fields as a tuple, in its order: what ``scan_records`` yields."""


def scan_jsonl(path: Path, shown: str, check: Check | None = None) -> Iterator[Line]:
    """The records of ``path`` one at a time, as ``read_jsonl`` reads them (the same
    errors and warning), never holding more than a line."""
    file = files.open_read(path, shown)
    if file is None:
        return
    with file:
        for offset, length, body, record, fast, small in scan_records(file, shown, check):
            yield Line(offset, length, body, record, fast, small=small)


def scan_records(file: BinaryIO, shown: str, check: Check | None = None) -> Iterator[Scanned]:
    """``scan_jsonl`` of an open file, from its start, a tuple a record (no ``Line`` to
    make: this loop runs for every line of a 100,000-answer file). ``loads`` and
    ``_parse`` inlined; ``small`` is computed only where ``fast`` (it means nothing else)."""
    orjson = _orjson()
    fast_loads = orjson.loads if orjson is not None else None
    shapes, wide, slow_loads = _EXPONENTS, _WIDE, json.loads
    offset = 0
    number = 0
    # read_lines inlined (a line at most MAX_LINE, never the whole file held as one line)
    for raw in iter(functools.partial(file.readline, MAX_LINE + 1), b""):
        number += 1
        length = len(raw)
        terminated = raw.endswith(b"\n")
        if length > MAX_LINE and not terminated:
            raise LineTooLong(shown, number, MAX_LINE)
        body = raw[:-1] if terminated else raw
        if not body or body.isspace():
            offset += length
            continue
        record: Any = CUT_SHORT
        fast = False
        # One pass for both screens: wide integers, and floats orjson writes otherwise.
        shape = body.translate(shapes)
        if fast_loads is not None and wide not in shape:
            try:
                record = fast_loads(body)
                fast = True
            except ValueError:
                pass
        if not fast:
            try:
                record = slow_loads(body)
            except (ValueError, UnicodeDecodeError):
                record = CUT_SHORT
        if record is CUT_SHORT:
            if terminated:
                raise invalid(shown, number)
            logger.warning(f"{shown}: ignoring an incomplete last line")
        elif not isinstance(record, dict) or (check is not None and not check(record)):
            raise invalid(shown, number)
        else:
            # A negative exponent needs a "-": one memchr spares most lines the search
            # of the shape, whose digits and "e"s make it slow.
            small = fast and (
                b"0.0000" in body or (b"-" in body and b"0e-0" in shape and _small_float(body))
            )
            yield offset, length, body, record, fast, small
        offset += length


def ids_of(path: Path, shown: str, check: Check) -> set[str]:
    """The ``id`` of every record of ``path``, read as ``scan_jsonl`` reads them (the same
    errors and warning). Only ids: no screen for what the fast codec would write
    otherwise, since nothing is written (the standard library still reads what orjson
    refuses)."""
    file = files.open_read(path, shown)
    if file is None:
        return set()
    orjson = _orjson()
    fast_loads = orjson.loads if orjson is not None else json.loads
    ids = set()
    number = 0
    with file:
        for raw in read_lines(file, shown):
            number += 1
            terminated = raw.endswith(b"\n")
            body = raw[:-1] if terminated else raw
            if not body or body.isspace():
                continue
            try:
                record = fast_loads(body)
            except ValueError:
                try:
                    record = json.loads(body)
                except (ValueError, UnicodeDecodeError):
                    if terminated:
                        raise invalid(shown, number) from None
                    logger.warning(f"{shown}: ignoring an incomplete last line")
                    continue
            if not isinstance(record, dict) or not check(record):
                raise invalid(shown, number)
            ids.add(record["id"])
    return ids


def fast_codec() -> Any:
    """orjson, or None: what ``loads`` and ``encode`` use where they may."""
    return _orjson()


def encode_line(record: Mapping[str, Any]) -> bytes:
    """``dumps(record)`` and a newline, as UTF-8 bytes, the same bytes, for a record that
    holds no float that is not finite (orjson writes ``null`` where the standard library
    writes ``NaN``, and nothing in its output tells them apart): by orjson, a tenth of
    the CPU of ``dumps``, which a stage pays on every answer it appends. What orjson
    refuses (a lone surrogate, an integer past 64 bits, a subclass of a JSON type) or
    writes otherwise (a small float) goes through ``dumps``, and raises as it does."""
    orjson = _orjson()
    if orjson is not None:
        try:
            out: bytes = orjson.dumps(record, option=_write_options())
        except TypeError:
            pass
        else:
            if not _small_float(out):
                return out
    return (dumps(record) + "\n").encode()


@functools.cache
def _write_options() -> int:
    """orjson's options for ``encode_line``: a newline appended, and the types the
    standard library refuses or writes another way (dataclasses, datetimes, subclasses of
    str, int, dict and list) refused, so that they go through ``dumps``."""
    orjson = _orjson()
    if orjson is None:  # pragma: no cover - a core dependency
        return 0
    return int(
        orjson.OPT_APPEND_NEWLINE
        | orjson.OPT_PASSTHROUGH_DATACLASS
        | orjson.OPT_PASSTHROUGH_DATETIME
        | orjson.OPT_PASSTHROUGH_SUBCLASS
    )


class DiskFull(files.DiskFull):
    """A line that could not be written for want of space: the lines before it are kept
    (a line cut short is cut off at the next append)."""

    def __init__(self, shown: str) -> None:
        super().__init__(
            shown,
            f"cannot write {shown}: the disk is full; what was written before is kept: "
            "free some space, then run again (it resumes where it stopped)",
        )


class JsonlWriter:
    """Appends records to ``path``, each line written and flushed on its own.

    The file is opened, and its tail repaired, at the first append: a stage that writes
    nothing leaves no file behind. ``finite``: the records never hold a NaN or an
    infinity, so that they are encoded by ``encode_line`` (an answer's: ints and strings).
    """

    def __init__(
        self,
        path: Path,
        check: Check | None = None,
        shown: str | None = None,
        *,
        finite: bool = False,
    ) -> None:
        self.path = path
        self.shown = shown or str(path)
        self._check = check
        self._fd: int | None = None
        self._finite = finite

    def append(self, record: Mapping[str, Any]) -> None:
        if self._fd is None:
            self._fd = self._open()
        data = encode_line(record) if self._finite else (dumps(record) + "\n").encode()
        try:
            while data:
                written = os.write(self._fd, data)
                data = data[written:]
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise DiskFull(self.shown) from None
            raise

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> int:
        fd = files.open_append(self.path, self.shown)  # never through a link, only to a file
        try:
            _repair_tail(fd, self._check, self.shown)
        except BaseException:
            os.close(fd)
            raise
        return fd


def _repair_tail(fd: int, check: Check | None, shown: str) -> None:
    """End the file with a newline: terminate a valid last line, cut one cut short; an
    invalid record is an error, as it is anywhere else."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = size
    while start > 0:
        begin = max(0, start - _CHUNK)
        at = os.pread(fd, start - begin, begin).rfind(b"\n")
        if at >= 0:
            start = begin + at + 1
            break
        start = begin
        if size - start > MAX_LINE:  # no record is that long: never read whole
            raise LineTooLong(shown, _line_number(fd, start), MAX_LINE)
    if size - start > MAX_LINE:
        raise LineTooLong(shown, _line_number(fd, start), MAX_LINE)
    tail = os.pread(fd, size - start, start)
    record = _parse(tail, check) if tail.strip() else CUT_SHORT
    if record is None:
        raise invalid(shown, _line_number(fd, start))
    if record is CUT_SHORT:
        os.ftruncate(fd, start)
    else:
        os.write(fd, b"\n")


def _line_number(fd: int, offset: int) -> int:
    """The number of the line that starts at ``offset``."""
    count, position = 1, 0
    while position < offset:
        chunk = os.pread(fd, min(_CHUNK, offset - position), position)
        count += chunk.count(b"\n")
        position += len(chunk)
    return count


def rewrite_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Replace ``path`` with ``records``, atomically: temp file, fsync, rename; the file
    keeps its mode; a link at ``path`` is replaced, never written through."""

    def write(file: BinaryIO) -> None:
        for record in records:
            file.write((dumps(record) + "\n").encode())

    files.write_atomic(path, write, str(path))
