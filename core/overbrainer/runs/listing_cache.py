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

An entry is one flat list (``KEY_LEN`` numbers, then ``FIELDS`` values) read with the
standard ``json``, which ``--help`` has imported already: ``orjson`` parses faster but
costs more to import than a thousand entries take to parse (it writes the file, after a
listing that read the runs' files).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

import orjson

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import FOLLOWED_METRICS, METRICS_FILE

CACHE = ".listing.json"
"""In ``runs/``: a name no run id can take (ids start with a letter or digit)."""
VERSION = 4
"""Of the entries' layout: a file of another version is not read."""
SETTLED_S = 2.0
"""How long a run's files must have been still before their entry is kept."""
FINISHED = frozenset({"succeeded", "failed", "cancelled", "stopped"})

Key = list[int | None]
"""The run directory's mtime, then ``run.json``'s inode, size and mtime (ns), then the
metrics file's size and mtime for a run not finished (None and None for a finished run or
no metrics file)."""
KEY_LEN = 6
FIELDS = 13
"""After the key: the record's state, target, created, snapshot step and reason; the
target's note; the figures' six; the line after the id (``Row``'s fields)."""
ENTRY_LEN = KEY_LEN + FIELDS
NO_METRICS: Key = [None, None]


def metrics_key(directory: str) -> Key:
    """The size and modification time of the run's metrics file (``NO_METRICS``: none)."""
    for name in (METRICS_FILE, FOLLOWED_METRICS):
        try:
            found = os.stat(f"{directory}/{name}", follow_symlinks=False)
        except OSError:
            continue
        return [found.st_size, found.st_mtime_ns]
    return NO_METRICS


def settled(key: Key, now: float | None = None) -> bool:
    """Whether no time in the key (every one but inodes and sizes) is within the last
    ``SETTLED_S`` seconds."""
    limit = ((time.time() if now is None else now) - SETTLED_S) * 1e9
    times = [key[0], key[3], key[5]]
    return all(at < limit for at in times if at is not None)


def _well_formed(entry: Any) -> bool:
    """Whether ``entry`` is a listing's (the file is ours, but anyone may write it): the
    key, then the fields with strings where the listing needs them. Exact types (JSON
    gives no subclasses), no loop: it runs for every run listed."""
    return (
        type(entry) is list
        and len(entry) == ENTRY_LEN
        and type(entry[6]) is str  # state
        and type(entry[7]) is str  # target
        and type(entry[8]) is str  # created
        and type(entry[11]) is str  # note
        and type(entry[18]) is str  # the line after the id
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
        raw = None
        with contextlib.suppress(OSError, UserError):
            raw = files.read_regular(self.path, f"runs/{CACHE}", 64 << 20, follow=False)
        if raw is None:
            return
        try:
            data = json.loads(raw)
        except ValueError:  # not JSON, not UTF-8
            return
        if isinstance(data, dict) and data.get("version") == VERSION:
            entries = data.get("runs")
            if isinstance(entries, dict):
                self.entries = entries

    def get(self, run_id: str, directory: str, key: Key) -> list[Any] | None:
        """The entry kept for ``run_id`` (its key, then its fields) if its files still have
        ``key`` (the first four numbers) and, for a run not finished, its metrics file the
        size and time it had."""
        entry = self.entries.get(run_id)
        if entry is None or not _well_formed(entry) or entry[:4] != key:
            return None
        if entry[6] not in FINISHED and entry[4:6] != metrics_key(directory):
            return None
        return entry

    def put(self, run_id: str, key: Key, fields: list[Any]) -> None:
        """Keep ``fields`` for ``run_id``, read from files that had ``key`` (all six)."""
        entry = [*key, *fields]
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

        data = orjson.dumps({"version": VERSION, "runs": self.entries})  # figures are finite
        with contextlib.suppress(OSError, UserError):
            files.write_atomic(self.path, data, f"runs/{CACHE}")
