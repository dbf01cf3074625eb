"""``data/logprobs.bin``: the parent's top-k logprobs of each answer, beside answers.jsonl.

Append-only records, one an answer, the later record of an id the one that counts (as in
answers.jsonl). A record::

    b"OBLP" | version u8 | 3 zero bytes | header u32 | payload u32 | crc32 u32
    header: JSON {"id", "n" tokens, "k" candidates, "vocab" fingerprint}
    payload: zlib of the chosen ids (n uint32), the candidates a place has (n uint8),
             the candidates' ids (n*k uint32), both id arrays as byte planes (every id's
             low byte, then the next...), and their logprobs quantised (-logprob * 16,
             rounded, as n*k uint8 steps from the candidate before: they come most likely
             first, so the steps are small and never negative)

Byte planes put the ids' high bytes, nearly all zero, together, where zlib takes them to
almost nothing; a 16th of a nat is finer than the difference a KD loss can see. Absent
candidates (a server gave fewer than k) come last in their place, with id 0. A record
is written whole with one append: a ``kill -9`` leaves at most a torn last record, cut off
at the next append (its answer, written after it, is not in answers.jsonl: it is asked
again). A torn or altered record elsewhere is an error naming the file and its offset.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy
from numpy.typing import NDArray

from overbrainer import files
from overbrainer.errors import UserError

LOGPROBS = "logprobs.bin"
MAGIC = b"OBLP"
VERSION = 1
_HEAD = struct.Struct("<4sB3xIII")
STEPS_PER_NAT = 16
MOST_STEPS = 254
MAX_HEADER = 4096
MAX_PAYLOAD = 256 * 1024 * 1024


@dataclass(frozen=True)
class AnswerLogits:
    """One answer's tokens as the parent wrote them, and its top-k for each place.

    ``chosen``: (n,) token ids; ``ids``: (n, k) candidate ids, most likely first;
    ``logprobs``: (n, k) float32, ``-inf`` where a candidate is absent (always after the
    present ones of its place)."""

    answer_id: str
    vocab: str
    chosen: NDArray[numpy.uint32]
    ids: NDArray[numpy.uint32]
    logprobs: NDArray[numpy.float32]


def quantise(logprobs: NDArray[numpy.float32]) -> NDArray[numpy.uint8]:
    """Steps of a 16th of a nat below 0, at most ``MOST_STEPS`` (-15.9 nats); -inf too."""
    steps = numpy.rint(-numpy.nan_to_num(logprobs, neginf=-1e9) * STEPS_PER_NAT)
    return numpy.clip(steps, 0, MOST_STEPS).astype(numpy.uint8)


def _planes(ids: NDArray[numpy.uint32]) -> bytes:
    return ids.astype("<u4").reshape(-1, 1).view(numpy.uint8).T.tobytes()


def _unplanes(data: bytes, count: int) -> NDArray[numpy.uint32]:
    planes = numpy.frombuffer(data, numpy.uint8).reshape(4, count)
    return numpy.ascontiguousarray(planes.T).view("<u4").reshape(count).astype(numpy.uint32)


def encode(record: AnswerLogits) -> bytes:
    """``record`` as the bytes of one record of the file."""
    n, k = record.ids.shape
    present = numpy.isfinite(record.logprobs)
    counts = present.sum(axis=1).astype(numpy.uint8)
    steps = quantise(record.logprobs)
    steps = numpy.maximum.accumulate(numpy.where(present, steps, 0), axis=1)  # most likely first
    deltas = numpy.diff(steps, axis=1, prepend=0).astype(numpy.uint8)
    deltas[~present] = 0
    header = json.dumps(
        {"id": record.answer_id, "n": n, "k": k, "vocab": record.vocab}, ensure_ascii=False
    ).encode()
    raw = _planes(record.chosen) + counts.tobytes() + _planes(record.ids) + deltas.tobytes()
    payload = zlib.compress(raw, 6)
    crc = zlib.crc32(header + payload)
    return _HEAD.pack(MAGIC, VERSION, len(header), len(payload), crc) + header + payload


def decode(header: bytes, payload: bytes) -> AnswerLogits:
    meta = json.loads(header)
    n, k = int(meta["n"]), int(meta["k"])
    raw = zlib.decompress(payload)
    if len(raw) != 4 * n + n + 4 * n * k + n * k:
        raise ValueError("payload size")
    chosen = _unplanes(raw[: 4 * n], n)
    counts = numpy.frombuffer(raw[4 * n : 5 * n], numpy.uint8)
    ids = _unplanes(raw[5 * n : 5 * n + 4 * n * k], n * k).reshape(n, k)
    deltas = numpy.frombuffer(raw[5 * n + 4 * n * k :], numpy.uint8).reshape(n, k)
    steps = numpy.cumsum(deltas, axis=1, dtype=numpy.int32)
    logprobs = (-steps / STEPS_PER_NAT).astype(numpy.float32)
    logprobs[numpy.arange(k)[None, :] >= counts[:, None]] = -numpy.inf
    return AnswerLogits(str(meta["id"]), str(meta["vocab"]), chosen, ids, logprobs)


@dataclass(frozen=True)
class Entry:
    """Where one record lies: its answer's id, its offset and its length."""

    answer_id: str
    offset: int
    length: int


class Torn(Exception):
    """The file ends inside a record (a write cut short): ``offset`` is where it starts."""

    def __init__(self, offset: int) -> None:
        super().__init__(offset)
        self.offset = offset


def _scan(fd: int, shown: str) -> Iterator[Entry]:
    """Each whole record of the file at ``fd``, in order; raises ``Torn`` at a torn last
    record, ``UserError`` at a damaged one before the end."""
    size = os.fstat(fd).st_size
    offset = 0
    while offset < size:
        head = os.pread(fd, _HEAD.size, offset)
        if len(head) < _HEAD.size:
            raise Torn(offset)
        magic, version, header_len, payload_len, crc = _HEAD.unpack(head)
        if magic != MAGIC or version != VERSION or header_len > MAX_HEADER or (
            payload_len > MAX_PAYLOAD
        ):
            raise _damaged(shown, offset)
        end = offset + _HEAD.size + header_len + payload_len
        if end > size:
            raise Torn(offset)
        body = os.pread(fd, header_len + payload_len, offset + _HEAD.size)
        if zlib.crc32(body) != crc:
            if end == size:
                raise Torn(offset)
            raise _damaged(shown, offset)
        try:
            answer_id = str(json.loads(body[:header_len])["id"])
        except (ValueError, KeyError, TypeError):
            raise _damaged(shown, offset) from None
        yield Entry(answer_id, offset, end - offset)
        offset = end


def _damaged(shown: str, offset: int) -> UserError:
    return UserError(
        f"{shown} is damaged at byte {offset} (not a record of the parent's logprobs): "
        "remove it and run `overbrainer answers --force` to ask for them again"
    )


class LogitsFile:
    """``data/logprobs.bin`` of a project: appended to, and read by answer id.

    Each append opens the file and closes it again (no descriptor to hand back when a
    stage ends); the first cuts off a torn record a crash left."""

    def __init__(self, path: Path, shown: str) -> None:
        self.path = path
        self.shown = shown
        self._repaired = False

    def append(self, record: AnswerLogits) -> None:
        """Write ``record`` whole."""
        data = encode(record)
        fd = files.open_append(self.path, self.shown)
        try:
            if not self._repaired:
                self._repair(fd)
            while data:
                data = data[os.write(fd, data) :]
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise files.DiskFull(
                    self.shown, f"cannot write {self.shown}: the disk is full; what was "
                    "written before is kept: free some space, then run again",
                ) from None
            raise
        finally:
            os.close(fd)

    def _repair(self, fd: int) -> None:
        try:
            for _ in _scan(fd, self.shown):
                pass
        except Torn as torn:
            os.ftruncate(fd, torn.offset)
        self._repaired = True

    def index(self) -> dict[str, Entry]:
        """Each answer's latest whole record (a torn last one is not there)."""
        fd = files.open_regular(self.path, self.shown, follow=False)
        if fd is None:
            return {}
        found: dict[str, Entry] = {}
        try:
            for entry in _scan(fd, self.shown):
                found[entry.answer_id] = entry
        except Torn:
            pass
        finally:
            os.close(fd)
        return found

    def read(self, entry: Entry) -> AnswerLogits:
        """The record at ``entry`` (from ``index``)."""
        fd = files.open_regular(self.path, self.shown, follow=False)
        if fd is None:
            raise UserError(f"{self.shown} is gone: run `overbrainer answers --force`")
        try:
            data = os.pread(fd, entry.length, entry.offset)
        finally:
            os.close(fd)
        _, _, header_len, _, _ = _HEAD.unpack(data[: _HEAD.size])
        body = data[_HEAD.size :]
        try:
            return decode(body[:header_len], body[header_len:])
        except (ValueError, KeyError, TypeError, zlib.error):
            raise _damaged(self.shown, entry.offset) from None
