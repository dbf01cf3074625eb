"""Project files on disk, the one way they are read and written.

A project may come from someone else, and any of its files may be a symbolic link, a FIFO
or a device. So: appends open with ``O_NOFOLLOW`` (an append through a link would write,
and its tail repair truncate, a file outside the project); whole-file writes go to a
temporary file renamed over the name, in a directory that is not a link; directories are
made one level at a time, never through a link; reads open with ``O_NONBLOCK`` (opening a
FIFO blocks until a writer comes) and go on only for a regular file, within a size bound;
a path taken from a record is used only when it is inside the project. Every refusal is a
``UserError`` naming the file and why.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from overbrainer.errors import UserError
from overbrainer.redact import escape_controls
from overbrainer.replace import replace_file

READ_LIMIT = 1 << 30
"""The default bound of a whole-file read: 1 GiB (the largest dataset files hold less)."""
RECORD_LIMIT = 16 << 20
"""The bound of a small record (``run.json``, ``pod.json``, a compare or export record)."""

_READ = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
_APPEND = os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _refuse(shown: str, what: str, doing: str) -> UserError:
    if what == "a directory":  # worded as the error of reading one always was
        verb = "read" if doing == "read" else "write"
        return UserError(f"cannot {verb} {shown}: {os.strerror(errno.EISDIR)}")
    if what == "not a regular file":
        return UserError(f"{shown} is not a regular file: refusing to {doing} it")
    return UserError(f"{shown} is {what}: refusing to {doing} it")


def _regular_fd(fd: int, shown: str, doing: str) -> os.stat_result:
    """``fstat`` of ``fd``, closed and refused unless it is a regular file."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _refuse(shown, _kind(info.st_mode), doing)
    os.set_blocking(fd, True)
    return info


def open_regular(path: Path, shown: str, *, follow: bool = True) -> int | None:
    """A descriptor of ``path`` open for reading, or None when it does not exist; a FIFO,
    device, directory (or, without ``follow``, a symbolic link) is refused before anything
    is read from it."""
    flags = _READ | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refuse(shown, "a symbolic link", "read") from None
        if error.errno == errno.EISDIR:
            raise _refuse(shown, "a directory", "read") from None
        raise UserError(f"cannot read {shown}: {error.strerror}") from None
    _regular_fd(fd, shown, "read")
    return fd


def open_read(path: Path, shown: str, *, follow: bool = True) -> io.BufferedReader | None:
    """``open_regular`` as a buffered binary file (None when missing)."""
    fd = open_regular(path, shown, follow=follow)
    return None if fd is None else os.fdopen(fd, "rb")


def read_regular(
    path: Path, shown: str, limit: int = READ_LIMIT, *, follow: bool = True
) -> bytes | None:
    """The bytes of the regular file ``path`` (None when missing), refused when it holds
    more than ``limit`` bytes: a file that could be anything is never read whole unbounded."""
    fd = open_regular(path, shown, follow=follow)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > limit:
            raise UserError(f"{shown} is larger than {limit} bytes: refusing to read it")
        try:
            data = file.read(size + 1)  # read(n) allocates n bytes: the size, not the bound
            if len(data) > size:  # it grew since: the rest, within the bound
                data += file.read(limit + 1 - len(data))
        except OSError as error:
            raise UserError(f"cannot read {shown}: {error.strerror}") from None
    if len(data) > limit:
        raise UserError(f"{shown} is larger than {limit} bytes: refusing to read it")
    return data


def read_text(path: Path, shown: str, limit: int = RECORD_LIMIT) -> str | None:
    """``read_regular`` decoded as UTF-8 (errors replaced), for records read leniently."""
    data = read_regular(path, shown, limit)
    return None if data is None else data.decode("utf-8", "replace")


def open_append(path: Path, shown: str) -> int:
    """A descriptor of ``path`` open for appending (made if missing, in a directory made
    without following links): never through a symbolic link, only to a regular file."""
    mkdir_nofollow(path.parent, _parent_shown(path, shown))
    try:
        fd = os.open(path, _APPEND, 0o666)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _refuse(shown, "a symbolic link", "write through") from None
        if error.errno == errno.EISDIR:
            raise _refuse(shown, "a directory", "write to") from None
        raise UserError(f"cannot write {shown}: {error.strerror}") from None
    _regular_fd(fd, shown, "write to")
    return fd


def _parent_shown(path: Path, shown: str) -> str:
    """How the directory of ``path`` (shown as ``shown``) is shown."""
    parent = Path(shown).parent
    return str(path.parent) if parent == Path() else str(parent)


def mkdir_nofollow(path: Path, shown: str, levels: int = 1) -> None:
    """Make ``path`` and its missing parents (as ``mkdir -p`` would), refusing any of its
    last ``levels`` components that is a symbolic link or not a directory: a directory
    made, or a file written, through a link lands wherever the link points."""
    chain = [path, *list(path.parents)[: levels - 1]]
    try:
        os.makedirs(chain[-1].parent, exist_ok=True)  # above the checked levels: as before
    except OSError as error:
        raise UserError(f"cannot make {shown}: {error.strerror}") from None
    for directory in reversed(chain):
        try:
            info = os.lstat(directory)
        except FileNotFoundError:
            try:
                os.mkdir(directory)
            except FileExistsError:
                info = os.lstat(directory)
            except OSError as error:
                raise UserError(f"cannot make {shown}: {error.strerror}") from None
            else:
                continue
        if not stat.S_ISDIR(info.st_mode):
            name = shown if directory == path else str(directory)
            what = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a directory"
            raise UserError(f"{name} is {what}: refusing to write through it")


def mkdir_unique(parent: Path, name: str, shown: str) -> str:
    """Make ``parent/name`` as a new directory, or ``name-2``, ``name-3``… when that is
    taken (two commands named by the same second); the name made. ``parent`` must be
    made already (``mkdir_nofollow``): a taken name, a link included, is never entered."""
    for number in range(1, 1000):
        candidate = name if number == 1 else f"{name}-{number}"
        try:
            os.mkdir(parent / candidate)
        except FileExistsError:
            continue
        except OSError as error:
            raise UserError(f"cannot make {shown}/{candidate}: {error.strerror}") from None
        return candidate
    raise UserError(f"cannot make {shown}/{name}: 999 directories of that name exist")


def check_dir(path: Path, shown: str) -> None:
    """Refuse ``path`` when it exists and is a symbolic link or not a directory."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise UserError(f"{shown} is a symbolic link: refusing to use it")
    if not stat.S_ISDIR(info.st_mode):
        raise UserError(f"{shown} is not a directory: refusing to use it")


def write_atomic(path: Path, data: bytes | Callable[[BinaryIO], object], shown: str) -> None:
    """Replace ``path`` with ``data`` (bytes, or a function writing to the file it is
    given): a temporary file beside it, synced, renamed over the name (a link there is
    replaced, never followed), in a directory made or checked without following links."""
    mkdir_nofollow(path.parent, _parent_shown(path, shown))
    write = data if callable(data) else (lambda file: file.write(data))

    try:
        replace_file(path, write)
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFull(
                shown,
                f"cannot write {shown}: the disk is full; the file is as it was: free some "
                "space, then run again",
            ) from None
        # A directory in the file's place, a read-only disk, no right to write there: the
        # user's to fix, and the old file (or whatever is there) is as it was.
        raise UserError(f"cannot write {shown}: {error.strerror or error}") from None


class DiskFull(UserError):
    """A write refused for want of space (``ENOSPC``, a quota): what was on disk is kept;
    ``shown`` names the file."""

    def __init__(self, shown: str, message: str) -> None:
        super().__init__(message)
        self.shown = shown


def own_path(path: str | Path, root: Path, shown: str) -> Path:
    """``path``, taken from a record, if it is ``root`` or inside it once resolved (links
    followed), else a ``UserError``: a record someone else wrote, or one copied from
    another project, must not point the command at any other directory."""
    candidate = Path(path)
    resolved = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if not resolved.is_relative_to(root.resolve()):
        shown_path = escape_controls(str(path))  # a record's text: never a terminal control
        raise UserError(f"{shown} ({shown_path}) is not inside {root}: refusing to use it")
    return resolved
