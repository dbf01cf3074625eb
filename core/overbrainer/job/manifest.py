"""Verified retrieval: the target's SHA-256 manifest compared with the files at home."""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from overbrainer.errors import UserError


@dataclass(frozen=True)
class Entry:
    sha256: str
    size: int


def parse_manifest(data: bytes) -> dict[str, Entry]:
    """The ``<sha256> <size> <path>\\0`` records the manifest script printed."""
    entries = {}
    for record in data.split(b"\0"):
        if not record:
            continue
        digest, size, raw_path = record.split(b" ", 2)
        path = os.path.normpath(raw_path.decode("utf-8", "surrogateescape"))
        entries[path] = Entry(digest.decode("ascii"), int(size))
    return entries


def local_files(dest: Path, roots: tuple[str, ...], exclude: tuple[str, ...]) -> dict[str, Path]:
    """The regular files under ``roots`` of ``dest`` (symlinks not followed), by relative
    path, skipping any path with a component matching ``exclude``."""
    found = {}
    for root in roots:
        start = dest / root
        if start.is_file() and not start.is_symlink():
            found[root] = start
            continue
        for directory, dirs, files in os.walk(start):
            dirs[:] = [d for d in dirs if not _excluded(d, exclude)]
            for name in files:
                path = Path(directory) / name
                if _excluded(name, exclude) or path.is_symlink() or not path.is_file():
                    continue
                found[os.path.normpath(path.relative_to(dest))] = path
    return found


def verify(
    manifest: dict[str, Entry], dest: Path, roots: tuple[str, ...], exclude: tuple[str, ...]
) -> None:
    """Raise ``UserError`` unless ``dest`` holds exactly the manifest's files, byte for byte."""
    here = local_files(dest, roots, exclude)
    problems = []
    for path, entry in sorted(manifest.items()):
        local = here.get(path)
        if local is None:
            problems.append(f"{_quoted(path)} is missing locally")
        elif local.stat().st_size != entry.size or sha256_file(local) != entry.sha256:
            problems.append(f"{_quoted(path)} differs from the target (SHA-256 mismatch)")
    problems += [
        f"{_quoted(path)} is not on the target" for path in sorted(set(here) - set(manifest))
    ]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserError(problems[0] + more)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _excluded(name: str, exclude: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude)


def _quoted(path: str) -> str:
    return json.dumps(path, ensure_ascii=False)
