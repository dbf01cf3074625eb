"""Waking the follower when a job's state changes, instead of at its next poll.

A job's state is the presence of a few files of its directory (:data:`WAKE`): its exit code,
a cancel, a snapshot asked for or saved. Two ways to learn of them:

- :class:`DirectoryEvents`: inotify on the directory itself (this machine, Linux);
- :class:`StreamWatches`: one long-lived script per directory on a remote host that prints a
  line whenever that set of files changes (and a heartbeat, so it ends with its channel).

Both answer ``None`` when they cannot wait (no inotify, a dropped stream): the follower
then sleeps its poll interval, as it did before events.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import threading
import time
from typing import TYPE_CHECKING

from loguru import logger

from overbrainer.job.layout import CANCELLED, EXIT_CODE, SNAPSHOT_FILE, SNAPSHOT_REQUEST
from overbrainer.job.scripts import q

if TYPE_CHECKING:
    from overbrainer.job.host import Host

WAKE = (EXIT_CODE, CANCELLED, SNAPSHOT_FILE, SNAPSHOT_REQUEST)
"""The files whose appearance (or disappearance) changes what a poll answers."""
ENDED = (EXIT_CODE, CANCELLED)
SCAN_S = 0.2
"""How often the remote watch script looks at the directory (a few ``[ -e ]``: builtins)."""
HEARTBEAT_EVERY = 25
"""Scans between heartbeats (5 s): a write to a closed channel ends the script."""
RETRY_S = 60.0
"""A stream that dropped is opened again at most this often; meanwhile, polling."""

# inotify(7)
_IN_ATTRIB = 0x4
_IN_CLOSE_WRITE = 0x8
_IN_MOVED_FROM = 0x40
_IN_MOVED_TO = 0x80
_IN_CREATE = 0x100
_IN_DELETE = 0x200
_IN_DELETE_SELF = 0x400
_IN_MOVE_SELF = 0x800
_IN_Q_OVERFLOW = 0x4000
_IN_IGNORED = 0x8000
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
_MASK = (
    _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE
    | _IN_DELETE_SELF | _IN_MOVE_SELF
)  # fmt: skip
_GONE = _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED | _IN_Q_OVERFLOW
_HEADER = struct.Struct("iIII")
_libc: ctypes.CDLL | None = None


def _inotify() -> ctypes.CDLL | None:
    global _libc  # noqa: PLW0603 - loaded once, on first use
    if _libc is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
            libc.inotify_init1  # noqa: B018 - raises AttributeError where there is none
        except (OSError, AttributeError):
            return None
        _libc = libc
    return _libc


class DirectoryEvents:
    """inotify on one directory, for the names of :data:`WAKE`."""

    def __init__(self, directory: str) -> None:
        libc = _inotify()
        if libc is None:
            raise OSError("no inotify here")
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError("inotify_init1 failed")
        if libc.inotify_add_watch(fd, os.fsencode(directory), _MASK) < 0:
            os.close(fd)
            raise OSError(f"cannot watch {directory}")
        self.fd = fd
        # Ended before the watch was set: the change itself will never come as an event.
        self._pending = any(os.path.exists(os.path.join(directory, name)) for name in ENDED)
        self.gone = False

    def wait(self, timeout: float) -> bool:
        """Whether one of the names changed within ``timeout`` seconds (True at once for a
        change since the previous call)."""
        if self._pending or self.gone:
            self._pending = False
            return True
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return False
            try:
                data = os.read(self.fd, 64 << 10)
            except BlockingIOError:
                continue
            if self._relevant(data):
                return True

    def _relevant(self, data: bytes) -> bool:
        found = False
        at = 0
        while at + _HEADER.size <= len(data):
            _, mask, _, length = _HEADER.unpack_from(data, at)
            name = data[at + _HEADER.size : at + _HEADER.size + length].rstrip(b"\0")
            at += _HEADER.size + length
            if mask & _GONE:
                self.gone = True
                found = True
            elif name.decode("utf-8", "replace") in WAKE:
                found = True
        return found

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def watch_script(root: str) -> str:
    """Print ``state`` and the names of :data:`WAKE` present in ``root`` at once and at
    each change, ``beat`` every few seconds; end once the job ended."""
    names = " ".join(WAKE)
    ended = "|".join(f"*{name}*" for name in ENDED)
    return f"""\
cd {q(root)} 2>/dev/null || exit 0
last=-; beat=0
while :; do
  now=
  for n in {names}; do [ -e "$n" ] && now="$now $n"; done
  if [ "$now" != "$last" ]; then echo "state$now" || exit 0; last=$now; beat=0
  elif [ "$beat" -ge {HEARTBEAT_EVERY} ]; then echo beat || exit 0; beat=0; fi
  case "$now" in {ended}) exit 0;; esac
  beat=$((beat + 1))
  sleep {SCAN_S}
done
"""


class StreamWatch:
    """The watch script of one directory, its output read on a thread of its own."""

    def __init__(self, host: Host, root: str) -> None:
        self.host = host
        self.root = root
        self.started = time.monotonic()
        self.changed = threading.Event()
        self.ended = threading.Event()
        self.dropped = False
        self._last: frozenset[str] | None = None
        threading.Thread(target=self._read, daemon=True, name=f"watch {root}").start()

    def _read(self) -> None:
        ended = False  # the job ended: whatever the stream's own end, nothing is lost
        try:
            with self.host.stream_out(watch_script(self.root)) as stream:
                for raw in stream:
                    words = raw.decode("ascii", "replace").split()
                    if not words or words[0] != "state":
                        continue
                    names = frozenset(words[1:])
                    first = self._last is None
                    if (first and names & set(ENDED)) or (not first and names != self._last):
                        self.changed.set()
                    self._last = names
                    ended = ended or bool(names & set(ENDED))
        except Exception as error:  # noqa: BLE001 - any failure means polling again
            if not ended:
                logger.debug(f"the watch of {self.root} ended: {error}")
        finally:
            self.dropped = not ended
            self.ended.set()
            if self.dropped:
                self.changed.set()  # poll at once: the connection may be gone

    def wait(self, timeout: float) -> bool | None:
        """True once something changed, False at ``timeout``; None once the stream is
        gone with nothing left to report (the caller polls)."""
        if self.ended.is_set() and not self.changed.is_set():
            return None
        fired = self.changed.wait(timeout)
        self.changed.clear()
        return fired


class StreamWatches:
    """One :class:`StreamWatch` a directory on ``host``, opened again (at most every
    :data:`RETRY_S`) after its stream dropped."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._watches: dict[str, StreamWatch] = {}

    def wait(self, root: str, timeout: float) -> bool | None:
        watch = self._watches.get(root)
        if watch is None or (
            watch.ended.is_set()
            and watch.dropped
            and not watch.changed.is_set()
            and time.monotonic() - watch.started >= RETRY_S
        ):
            watch = self._watches[root] = StreamWatch(self.host, root)
        return watch.wait(timeout)
