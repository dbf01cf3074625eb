"""Which directory is the project: ``-C DIR``, or the first one upwards holding
``overbrainer.toml``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from overbrainer.errors import UserError

CONFIG_FILE = "overbrainer.toml"  # as config.load names it: not imported, for --help's sake


def find_project(given: Path, explicit: bool) -> Path:
    """The project directory: ``given`` itself when ``explicit`` (``-C``), else the first
    of ``given`` and its parents that holds ``overbrainer.toml``, as a path relative to
    ``given`` (``.``, ``..``) so that messages stay short. Raises ``UserError`` when there
    is none."""
    if explicit:
        _not_a_file(given / CONFIG_FILE)
        if not (given / CONFIG_FILE).is_file():
            raise UserError(f"no {CONFIG_FILE} in {given}: create one with `overbrainer init`")
        return given
    start = Path(os.path.abspath(given))
    for directory in (start, *start.parents):
        config = directory / CONFIG_FILE
        _not_a_file(config)
        if config.is_file():
            if directory != start and config.stat().st_uid != os.getuid():
                # As git's safe.directory: a project above is used only if it is one's own
                # (its .env could point the providers, and so their keys, anywhere).
                raise UserError(
                    f"{config} belongs to another user: not used as this directory's "
                    f"project; name it with -C {directory} if it is to be"
                )
            return Path(os.path.relpath(directory, start)) if directory != start else given
    raise UserError(
        f"no {CONFIG_FILE} in {start} or any directory above it: create a project with "
        "`overbrainer init DIR`, or name one with -C DIR"
    )


def _not_a_file(config: Path) -> None:
    """Refuse an ``overbrainer.toml`` that is there but is no regular file (a FIFO, a
    directory, a device): it is not missing, and saying so would mislead."""
    try:
        mode = config.stat().st_mode
    except OSError:
        return  # missing (or a dangling link): looked for further up
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, a device)"
        raise UserError(f"{config} is {kind}: move it away, or make it the project's settings")
