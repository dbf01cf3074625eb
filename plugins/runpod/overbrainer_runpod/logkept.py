"""A pod's logs kept in its run directory, so they outlive the pod: ``pod/pod.log`` (JSON
lines ``{ts, source, line}``, mode 0600, capped) and ``pod/pod.log.cursor`` (the stream's
last event id), beside the ``boot.log``, ``watchdog.log`` and ``sshd.log`` the executor
brings home.

Results extracted from a pod land in the run directory, so nothing here follows a symbolic
link: ``pod/`` and each file are opened with ``O_NOFOLLOW`` relative to their directory,
and a file with a second hard link is refused.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from datetime import UTC, datetime
from pathlib import Path

from loguru import logger

from overbrainer.plugin.files import register_secret
from overbrainer_runpod.logstream import (
    OURS,
    TAIL_MAX,
    LogClient,
    LogError,
    LogQuery,
    PodLogLine,
    snapshot,
    valid_cursor,
)

POD_DIR = "pod"
POD_LOG = "pod.log"
CURSOR = "pod.log.cursor"
POD_LOG_CAP = 20 * 1024 * 1024
"""Largest ``pod.log`` kept: past it, one line says so and nothing more is kept."""
CAP_RESERVE = 512
"""Room kept under the cap for that line."""
DRAIN_S = 5.0
"""Longest the last read before a delete waits for the lines not kept yet."""
CURSOR_EVERY_S = 1.0
"""How often, at most, the cursor is written while lines keep coming."""


class UnsafePath(OSError):
    """A kept file or ``pod/`` is a symbolic link, a hard link or not a regular file."""


def _dir_fd(run_dir: Path, create: bool) -> int | None:
    """``pod/`` of ``run_dir`` opened (made, mode 0700, when ``create``); None when absent."""
    try:
        run = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if not create:
            return None
        raise
    try:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(POD_DIR, 0o700, dir_fd=run)
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(POD_DIR, flags, dir_fd=run)
        except FileNotFoundError:
            return None
        except OSError as error:
            if isinstance(error, NotADirectoryError) or error.errno == errno.ELOOP:
                raise UnsafePath(f"refusing to use {run_dir / POD_DIR}: not a directory") from None
            raise
    finally:
        os.close(run)


def _open_in(dir_fd: int, dir_path: Path, name: str, flags: int) -> int:
    """``name`` in ``pod/``, never through a link; a file opened to write is made 0600."""
    path = dir_path / name
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP:  # a symbolic link
            raise UnsafePath(f"refusing to use {path}: it is a symbolic link") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise UnsafePath(f"refusing to use {path}: not a regular file with one link")
    if flags & (os.O_WRONLY | os.O_RDWR):
        os.fchmod(fd, 0o600)
    return fd


def read_kept(run_dir: Path, name: str) -> bytes | None:
    """The kept file ``pod/<name>`` of ``run_dir``; None when absent. ``UnsafePath`` for a
    link."""
    dir_fd = _dir_fd(run_dir, create=False)
    if dir_fd is None:
        return None
    try:
        fd = _open_in(dir_fd, run_dir / POD_DIR, name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def kept_cursor(run_dir: Path) -> str | None:
    """The event id the kept log ends at, if any (a link or a bad value: none)."""
    try:
        data = read_kept(run_dir, CURSOR)
    except OSError:
        return None
    cursor = (data or b"").decode("utf-8", "replace").strip()
    return cursor if valid_cursor(cursor) else None


def kept_lines(run_dir: Path) -> list[PodLogLine]:
    """The lines of the kept log, oldest first; one that cannot be read is skipped."""
    lines = []
    for text in (read_kept(run_dir, POD_LOG) or b"").decode("utf-8", "replace").splitlines():
        try:
            line = PodLogLine.from_json(json.loads(text))
        except ValueError:
            continue
        if line is not None:
            lines.append(line)
    return lines


def _write_atomic(dir_fd: int, dir_path: Path, name: str, data: bytes) -> None:
    temporary = f"{name}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary, dir_fd=dir_fd)
    fd = _open_in(dir_fd, dir_path, temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(temporary, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


class Capture:
    """Appends a pod's log lines to ``pod/pod.log`` and keeps its cursor. The cursor is
    written after the lines it ends at (at most once a second, and at ``close``): a
    cursor behind the log repeats a few lines on the next drain, never loses one."""

    def __init__(self, run_dir: Path, cap: int | None = None) -> None:
        self.run_dir = run_dir
        self.cap = POD_LOG_CAP if cap is None else cap
        dir_fd = _dir_fd(run_dir, create=True)
        assert dir_fd is not None
        self._dir = dir_fd
        try:
            flags = os.O_RDWR | os.O_APPEND | os.O_CREAT
            self._fd = _open_in(dir_fd, run_dir / POD_DIR, POD_LOG, flags)
        except BaseException:
            os.close(dir_fd)
            raise
        self.size = os.fstat(self._fd).st_size
        if self.size and os.pread(self._fd, 1, self.size - 1) != b"\n":
            self._append(b"\n")  # a line left half written
        self.cursor = kept_cursor(run_dir)
        self._unsaved = False
        self._saved_at: float | None = None
        self.capped = self._full(0) or self._ends_capped()

    def query(self) -> LogQuery:
        """Where the stream starts for this capture: after its cursor, or the longest
        replay."""
        return LogQuery(tail=None if self.cursor else TAIL_MAX, cursor=self.cursor)

    def _full(self, adding: int) -> bool:
        return self.size + adding > self.cap - CAP_RESERVE

    def _ends_capped(self) -> bool:
        start = max(self.size - 1024, 0)
        tail = os.pread(self._fd, self.size - start, start).decode("utf-8", "replace")
        last = tail.splitlines()[-1] if tail.strip() else ""
        return f'"source": "{OURS}"' in last

    def _append(self, data: bytes) -> None:
        os.write(self._fd, data)
        self.size += len(data)

    def take(self, lines: list[PodLogLine], cursor: str | None) -> None:
        """Append ``lines``, then keep ``cursor``; at the cap, one line saying so instead
        of the rest, and nothing after it."""
        if self.capped:
            return
        text = []
        adding = 0
        for line in lines:
            json_line = line.to_json() + "\n"
            if self._full(adding + len(json_line.encode())):
                self.capped = True
                text.append(self._cap_line())
                break
            text.append(json_line)
            adding += len(json_line.encode())
        if text:
            self._append("".join(text).encode())
        if self.capped:
            return
        if cursor is not None and cursor != self.cursor:
            self.cursor, self._unsaved = cursor, True
        if self._saved_at is None or time.monotonic() - self._saved_at >= CURSOR_EVERY_S:
            self.save_cursor()

    def _cap_line(self) -> str:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        mib = self.cap / (1024 * 1024)
        line = f"the pod's log reached {mib:g} MiB: later lines are not kept"
        return PodLogLine(now, OURS, line).to_json() + "\n"

    def save_cursor(self) -> None:
        if self._unsaved and self.cursor is not None:
            _write_atomic(self._dir, self.run_dir / POD_DIR, CURSOR, self.cursor.encode())
            self._unsaved = False
            self._saved_at = time.monotonic()

    def close(self) -> None:
        try:
            self.save_cursor()
        finally:
            os.close(self._fd)
            os.close(self._dir)


def drain(client: LogClient, run_dir: Path, pod_id: str, wait: float = DRAIN_S) -> None:
    """The last read of the log of ``pod_id`` into ``run_dir``, before the pod is deleted:
    what the stream has after the kept cursor (or its last 5000 lines), within ``wait``.
    Best effort: a failure is logged, never raised."""
    register_secret(client.key)
    try:
        capture = Capture(run_dir)
    except OSError as error:
        logger.warning(f"runpod: cannot keep the log of pod {pod_id}: {error}")
        return
    try:
        if not capture.capped:
            snapshot(client, pod_id, capture.query(), capture.take, max_wait=wait)
    except LogError as error:
        logger.debug(f"runpod: the log of pod {pod_id} was not read before its deletion: {error}")
    except OSError as error:
        logger.warning(f"runpod: cannot keep the log of pod {pod_id}: {error}")
    finally:
        try:
            capture.close()
        except OSError as error:
            logger.warning(f"runpod: cannot keep the cursor of the log of pod {pod_id}: {error}")
