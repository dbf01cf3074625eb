"""The project lock: one writing overbrainer process per project at a time.

An OS lock (``flock``) on ``.overbrainer/lock``, released by the kernel when the process
dies, so a crash never leaves the project locked. The holder's pid is written inside so
the refusal can name it. Symbolic and hard links are refused: the lock file must be the
project's own.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from types import TracebackType

from overbrainer.errors import UserError

LOCK_FILE = "lock"


class LockHeld(UserError):
    def __init__(self, pid: int | None) -> None:
        who = f"another overbrainer (pid {pid})" if pid else "another overbrainer"
        super().__init__(f"{who} is using this project")
        self.pid = pid


class ProjectLock:
    """Exclusive use of the project at ``project_dir``; a context manager."""

    def __init__(self, project_dir: Path) -> None:
        self.dir = project_dir / ".overbrainer"
        self.path = self.dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise ``LockHeld`` naming the process that has it."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise LockHeld(pid) from None
        os.ftruncate(fd, 0)
        try:
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError as error:  # a full disk: the lock holds all the same (flock)
            if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                os.close(fd)
                raise
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        os.ftruncate(self._fd, 0)
        os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = None

    def holder(self) -> int | None:
        """The pid of the process holding the lock, or None when it is free."""
        fd = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or 0
        else:
            return None
        finally:
            os.close(fd)

    def _open(self) -> int:
        if self.dir.is_symlink():
            raise UserError(f"{self.dir} is a symbolic link: refusing to lock through it")
        try:
            self.dir.mkdir(exist_ok=True)
        except FileNotFoundError:
            raise UserError(f"no project directory {self.dir.parent}") from None
        except OSError as error:
            raise UserError(f"cannot use {self.dir}: {error.strerror}") from None
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise UserError(
                    f"{self.path} is a symbolic link: refusing to lock through it"
                ) from None
            raise UserError(f"cannot open {self.path}: {error.strerror}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise UserError(f"{self.path} is not a regular file: refusing to lock through it")
        if info.st_nlink != 1:
            os.close(fd)
            raise UserError(f"{self.path} has other hard links: refusing to lock through it")
        return fd

    def __enter__(self) -> ProjectLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None
