"""Verified retrieval: a SHA-256 manifest of the job's files compared with the files at home.

The runner writes ``manifest.sha256`` when the job ends (``layout.MANIFEST_ROOTS``); a host
computes one for what it does not cover (``job.log``) or when the job never wrote it (a
cancelled job). Both are ``<sha256> <size> <path>`` records, each ended by a NUL.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from overbrainer.errors import ArtifactMismatch, MissingArtifact
from overbrainer.job.layout import MANIFEST_FILE, MANIFEST_ROOTS

if TYPE_CHECKING:
    from overbrainer.job.spec import ArtifactSpec


@dataclass(frozen=True)
class Entry:
    """One file of a manifest."""

    sha256: str
    size: int


Manifest = dict[str, Entry]
"""Entries by path relative to the job directory."""


def parse_manifest(data: bytes) -> Manifest:
    """The ``<sha256> <size> <path>\\0`` records of ``data``.

    Raises:
        ArtifactMismatch: a record is not of that form.
    """
    entries = {}
    for record in data.split(b"\0"):
        if not record:
            continue
        try:
            digest, size, raw_path = record.split(b" ", 2)
            entry = Entry(digest.decode("ascii"), int(size))
        except (ValueError, UnicodeDecodeError):
            raise ArtifactMismatch("the manifest of the job's files is malformed") from None
        if len(entry.sha256) != 64 or entry.size < 0:
            raise ArtifactMismatch("the manifest of the job's files is malformed")
        path = os.path.normpath(raw_path.decode("utf-8", "surrogateescape"))
        entries[path] = entry
    return entries


def covered(path: str) -> bool:
    """Whether the runner's manifest accounts for ``path`` (everything under it)."""
    return any(path == root or path.startswith(root + "/") for root in MANIFEST_ROOTS)


def select(manifest: Manifest, paths: tuple[str, ...], exclude: tuple[str, ...]) -> Manifest:
    """The entries of ``manifest`` under ``paths``, without those having a path component
    that matches ``exclude``."""
    return {
        path: entry
        for path, entry in manifest.items()
        if any(path == top or path.startswith(top + "/") for top in paths)
        and not any(_excluded(part, exclude) for part in path.split("/"))
    }


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


def manifest_of(root: Path, paths: tuple[str, ...], exclude: tuple[str, ...]) -> Manifest:
    """The manifest of the files under ``paths`` of ``root``, computed here: for a target
    whose job directory this machine can read."""
    return {
        path: Entry(sha256_file(file), file.stat().st_size)
        for path, file in local_files(root, paths, exclude).items()
    }


def verify(
    manifest: Manifest, dest: Path, roots: tuple[str, ...], exclude: tuple[str, ...]
) -> None:
    """Raise ``ArtifactMismatch`` unless ``dest`` holds exactly the manifest's files under
    ``roots`` (less ``exclude``), byte for byte."""
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
        raise ArtifactMismatch(problems[0] + more)


def collect_directory(where: Path, dest: Path, artifacts: ArtifactSpec) -> list[str]:
    """Copy ``artifacts`` from a job directory this machine can read (a spool, a shared
    path) into ``dest`` and verify them; the sorted relative paths brought home.

    The runner's ``manifest.sha256`` vouches for what it covers; the rest (``job.log``, or
    everything of a job killed before it wrote its own) is hashed here. What an earlier
    try left under ``dest`` is replaced, never mixed in.
    """
    written = _head(where / MANIFEST_FILE, 64 << 20)
    by_runner = parse_manifest(written) if written else None
    manifest = {} if by_runner is None else select(by_runner, artifacts.paths, artifacts.exclude)
    rest = tuple(p for p in artifacts.paths if by_runner is None or not covered(p))
    manifest.update(manifest_of(where, rest, artifacts.exclude))
    for required in artifacts.required:
        if not any(p == required or p.startswith(required + "/") for p in manifest):
            raise MissingArtifact(required)
    for top in artifacts.paths:
        stale = dest / top
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        elif stale.exists() or stale.is_symlink():
            stale.unlink()
    for path in manifest:
        (dest / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(where / path, dest / path)
    verify(manifest, dest, artifacts.paths, artifacts.exclude)
    return sorted(manifest)


def _head(path: Path, length: int) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(length)
    except FileNotFoundError:
        return b""


def sha256_file(path: Path) -> str:
    """The hex SHA-256 of the file at ``path``."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _excluded(name: str, exclude: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in exclude)


def _quoted(path: str) -> str:
    return json.dumps(path, ensure_ascii=False)
