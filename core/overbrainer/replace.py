"""Replacing a file atomically: a temporary file beside it, synced, then renamed over it.

The new file keeps the mode of the one it replaces (or, for a new one, the mode the umask
gives any file the user creates): ``mkstemp`` alone would leave every rewritten file 0600,
unreadable to the group that could read it before.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

_UMASK = re.compile(rb"^Umask:\s*([0-7]+)$", re.M)


def replace_file(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Replace ``path`` with what ``write`` writes to the file it is given; on any failure
    the old file stays and no temporary file is left."""
    mode = _mode_for(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)


def _mode_for(path: Path) -> int:
    try:
        info = os.stat(path)
    except OSError:
        info = None
    if info is not None and stat.S_ISREG(info.st_mode):
        return stat.S_IMODE(info.st_mode)
    return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process umask, read without changing it (Linux), else set and set back."""
    try:
        found = _UMASK.search(Path("/proc/self/status").read_bytes())
    except OSError:
        found = None
    if found is not None:
        return int(found[1], 8)
    mask = os.umask(0o022)  # not thread-safe: only where /proc is missing
    os.umask(mask)
    return mask
