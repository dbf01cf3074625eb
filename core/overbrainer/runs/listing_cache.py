"""What ``runs ls`` last read of each finished run, kept in ``runs/.listing.json`` so a
thousand runs list in about the time of ``--help``.

An entry holds what the listing prints of a run (its record's fields, its target's note,
its figures) with what it was read from: the run directory's modification time (a file
made, renamed over or removed there changes it: ``run.json`` is always saved by a rename),
and ``run.json``'s inode, size and modification time (an edit in place), and for a run not
finished its metrics file's size and modification time too (it grows in place). The entry
is used only while all are the same, so a listing is never staler than the files. Not
kept: a run with exports or compares (made in directories of their own), and a run whose
files changed in the last two seconds (a change within the file system's clock tick would
not show).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import FOLLOWED_METRICS, METRICS_FILE

CACHE = ".listing.json"
"""In ``runs/``: a name no run id can take (ids start with a letter or digit)."""
VERSION = 2
"""Of the entries' layout: a file of another version is not read."""
SETTLED_S = 2.0
"""How long a run's files must have been still before their entry is kept."""
FINISHED = frozenset({"succeeded", "failed", "cancelled", "stopped"})

Key = list[int]
"""The run directory's mtime, then ``run.json``'s inode, size and mtime (ns); for a run
not finished, then its metrics file's size and mtime."""


def key_of(directory: str, record: str) -> Key | None:
    """The key of a run's directory and record now, or None when they cannot be read."""
    try:
        folder = os.stat(directory, follow_symlinks=False)
        held = os.stat(record, follow_symlinks=False)
    except OSError:
        return None
    return [folder.st_mtime_ns, held.st_ino, held.st_size, held.st_mtime_ns]


def metrics_key(directory: str) -> Key:
    """The size and modification time of the run's metrics file ([] for none)."""
    for name in (METRICS_FILE, FOLLOWED_METRICS):
        try:
            found = os.stat(f"{directory}/{name}", follow_symlinks=False)
        except OSError:
            continue
        return [found.st_size, found.st_mtime_ns]
    return []


def settled(key: Key, now: float | None = None) -> bool:
    """Whether no time in the key (every one but inodes and sizes) is within the last
    ``SETTLED_S`` seconds."""
    limit = ((time.time() if now is None else now) - SETTLED_S) * 1e9
    times = [key[0], key[3], *key[5:6]]
    return all(at < limit for at in times)


def _well_formed(fields: Any) -> bool:
    """Whether ``fields`` are a listing's (the file is ours, but anyone may write it):
    the record's six fields, the note, the figures' five, the line after the id. Exact
    types (JSON gives no subclasses), no loop: it runs for every run listed."""
    if type(fields) is not list or len(fields) != 4:
        return False
    listed, note, figures, tail = fields
    return (
        type(listed) is list
        and len(listed) == 6
        and type(listed[0]) is str
        and type(listed[1]) is str
        and type(listed[2]) is str
        and type(listed[3]) is str
        and type(note) is str
        and type(figures) is list
        and len(figures) == 5
        and type(tail) is str
    )


class ListingCache:
    """The entries of ``runs/.listing.json``, by run id; a missing, unreadable or foreign
    file is an empty cache (it is only ever a shortcut)."""

    def __init__(self, root: Path) -> None:
        self.path = root / CACHE
        self.entries: dict[str, list[Any]] = {}
        self.changed = False
        self._load()

    def _load(self) -> None:
        import orjson

        raw = None
        with contextlib.suppress(OSError, UserError):
            raw = files.read_regular(self.path, f"runs/{CACHE}", 64 << 20, follow=False)
        if raw is None:
            return
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if isinstance(data, dict) and data.get("version") == VERSION:
            entries = data.get("runs")
            if isinstance(entries, dict):
                self.entries = entries

    def get(self, run_id: str, directory: str, key: Key) -> list[Any] | None:
        """The fields kept for ``run_id`` if its files still have ``key`` (and, for a run
        not finished, its metrics file the size and time it had)."""
        entry = self.entries.get(run_id)
        if type(entry) is not list or len(entry) != 2:
            return None
        held, fields = entry
        if type(held) is not list or held[:4] != key or not _well_formed(fields):
            return None
        if fields[0][1] not in FINISHED and held[4:] != metrics_key(directory):
            return None
        return fields

    def put(self, run_id: str, key: Key, fields: list[Any]) -> None:
        entry = [key, fields]
        if self.entries.get(run_id) != entry:
            self.entries[run_id] = entry
            self.changed = True

    def keep_only(self, run_ids: set[str]) -> None:
        """Forget the runs not listed (removed, or no longer to be kept)."""
        gone = self.entries.keys() - run_ids
        for run_id in gone:
            del self.entries[run_id]
        self.changed = self.changed or bool(gone)

    def save(self) -> None:
        """Writes the file if an entry changed; a runs/ that cannot be written is left."""
        if not self.changed:
            return
        import orjson

        data = orjson.dumps({"version": VERSION, "runs": self.entries})
        with contextlib.suppress(OSError, UserError):
            files.write_atomic(self.path, data, f"runs/{CACHE}")
