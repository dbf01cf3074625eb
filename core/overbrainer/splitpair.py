"""``data/split.json``: which ``train.jsonl`` and ``eval.jsonl`` were written together.

Each file is replaced atomically, but one after the other: a ``kill -9`` between the two
renames pairs a new train file with the old eval file (examples in both, or in neither).
So ``split`` marks the pair as being written before the first rename, and records both
files' size and hash after the second; ``train`` refuses a pair the record does not
vouch for. A project split before this record existed has none, and is trusted as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import xxhash

from overbrainer import files
from overbrainer.errors import UserError

RECORD = "split.json"
PAIR = ("train.jsonl", "eval.jsonl")
INTERRUPTED = (
    "data/train.jsonl and data/eval.jsonl are not a pair: a split was interrupted between "
    "writing the two; run `overbrainer split` again"
)
CHANGED = (
    "data/{name} is not the file `overbrainer split` wrote with the other (data/split.json "
    "records another): run `overbrainer split` again, or, to train on the files as they "
    "are, remove data/split.json"
)
_CHUNK = 1 << 20


def fingerprint(path: Path) -> dict[str, Any] | None:
    """The size and XXH3-128 of ``path``, or None when it is missing."""
    file = files.open_read(path, f"data/{path.name}")
    if file is None:
        return None
    digest = xxhash.xxh3_128()
    size = 0
    with file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return {"size": size, "xxh3_128": digest.hexdigest()}


def begin(data_dir: Path) -> None:
    """Mark the pair as being written: until :func:`commit`, neither file is to be used."""
    _write(data_dir, {"state": "writing"})


def commit(data_dir: Path) -> None:
    """Record the pair just written."""
    _write(data_dir, {"state": "written", **{n: fingerprint(data_dir / n) for n in PAIR}})


def check(data_dir: Path) -> None:
    """Raise unless ``train.jsonl`` and ``eval.jsonl`` are the pair the last split wrote
    (nothing is checked where no split recorded one)."""
    raw = files.read_regular(data_dir / RECORD, f"data/{RECORD}", 1 << 16)
    if raw is None:
        return
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    if not isinstance(record, dict) or record.get("state") not in ("writing", "written"):
        raise UserError(f"data/{RECORD}: invalid record: run `overbrainer split` again")
    if record["state"] != "written":
        raise UserError(INTERRUPTED)
    for name in PAIR:
        if fingerprint(data_dir / name) != record.get(name):  # edited since, by hand or a tool
            raise UserError(CHANGED.format(name=name))


def remove_stale(data_dir: Path) -> int:
    """Remove the temporary files a killed split left (``.train.jsonl.*``, …): how many."""
    removed = 0
    for name in (*PAIR, RECORD):
        for stale in data_dir.glob(f".{name}.*"):
            if stale.is_file() and not stale.is_symlink():
                stale.unlink(missing_ok=True)
                removed += 1
    return removed


def _write(data_dir: Path, record: dict[str, Any]) -> None:
    files.write_atomic(data_dir / RECORD, json.dumps(record).encode() + b"\n", f"data/{RECORD}")
