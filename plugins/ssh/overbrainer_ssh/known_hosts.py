"""Host keys as OpenSSH checks them: the known-hosts files of the SSH config, and its
StrictHostKeyChecking.

paramiko reads ``~/.ssh/known_hosts`` before any file the config names, and what it finds
there wins: an alias whose UserKnownHostsFile is empty was trusted through the default file,
and a key only in the named file refused as changed when the default file held another for
the same address. So no key is loaded into paramiko: every host key reaches the policy,
which reads the files OpenSSH would read, and nothing else.

- UserKnownHostsFile (default ``~/.ssh/known_hosts ~/.ssh/known_hosts2``; ``none``: none)
  and GlobalKnownHostsFile (default ``/etc/ssh/ssh_known_hosts`` and ``…2``), with ``~``
  and the ``%d %u %h %p %r %n %i %l %%`` tokens; hashed names, patterns and negations.
- A key listed for the host is known; one under ``@revoked`` is refused; another key of
  the same type is a changed key, refused.
- StrictHostKeyChecking ``yes`` and ``ask`` (the default: there is no one to ask) refuse an
  unknown key; ``accept-new``, ``no`` and ``off`` add it to the first user file. A changed
  key is refused whatever it says: OpenSSH's ``no`` lets one through with password and
  forwarding off, which has no equivalent here.

Host certificates (``@cert-authority``) are not supported by paramiko: such lines are
skipped, so a host known only that way reads as unknown.

This module imports paramiko: import it only when an SSH host is used.
"""

from __future__ import annotations

import getpass
import os
import re
import shlex
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import paramiko
from paramiko.hostkeys import HostKeyEntry, HostKeys, InvalidHostKey

DEFAULT_USER_FILES = "~/.ssh/known_hosts ~/.ssh/known_hosts2"
DEFAULT_GLOBAL_FILES = "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2"
ADDS_NEW = frozenset({"accept-new", "no", "off"})
REVOKED_MARKER = "@revoked"


class Verdict(Enum):
    KNOWN = "known"
    UNKNOWN = "unknown"
    CHANGED = "changed"
    REVOKED = "revoked"


@dataclass(frozen=True)
class _Entry:
    patterns: list[str]
    key: paramiko.PKey
    revoked: bool


class KnownHosts:
    """What the known-hosts files of the SSH config ``config`` (a host's looked-up
    options) say of the host ``host`` at ``port``, reached as ``user``; ``alias``: the
    name the user wrote (``%n``)."""

    def __init__(
        self, config: Mapping[str, Any], host: str, port: int, user: str, alias: str
    ) -> None:
        self.name = host if port == 22 else f"[{host}]:{port}"
        tokens = {
            "d": os.path.expanduser("~"),
            "u": getpass.getuser(),
            "h": host,
            "p": str(port),
            "r": user,
            "n": alias,
            "i": str(os.getuid()),
            "l": socket.gethostname(),
            "%": "%",
        }
        self.user_files = _files(config.get("userknownhostsfile", DEFAULT_USER_FILES), tokens)
        self.global_files = _files(
            config.get("globalknownhostsfile", DEFAULT_GLOBAL_FILES), tokens
        )
        self.strict = str(config.get("stricthostkeychecking", "ask")).lower()
        self.hash_names = str(config.get("hashknownhosts", "no")).lower() == "yes"
        self._entries = [
            entry
            for path in (*self.user_files, *self.global_files)
            for entry in _read(path)
            if _matches(self.name, entry.patterns)
        ]

    @property
    def adds_new(self) -> bool:
        """Whether an unknown key is to be added rather than refused."""
        return self.strict in ADDS_NEW

    def key_types(self) -> list[str]:
        """The key types known for the host, in file order: the ones to ask for first."""
        found = [entry.key.get_name() for entry in self._entries if not entry.revoked]
        return list(dict.fromkeys(found))

    def verdict(self, key: paramiko.PKey) -> tuple[Verdict, paramiko.PKey | None]:
        """Whether ``key`` is known, unknown, revoked, or changed (with the key expected)."""
        if any(entry.revoked and entry.key == key for entry in self._entries):
            return Verdict.REVOKED, None
        listed = [entry.key for entry in self._entries if not entry.revoked]
        if key in listed:
            return Verdict.KNOWN, None
        same_type = [known for known in listed if known.get_name() == key.get_name()]
        if same_type:
            return Verdict.CHANGED, same_type[0]
        return Verdict.UNKNOWN, None

    def add(self, key: paramiko.PKey) -> Path | None:
        """Add ``key`` to the first user file; None when there is none to write."""
        if not self.user_files:
            return None
        path = self.user_files[0]
        name = HostKeys.hash_host(self.name) if self.hash_names else self.name
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as file:
            file.write(f"{name} {key.get_name()} {key.get_base64()}\n")
        return path


def _files(value: str, tokens: Mapping[str, str]) -> list[Path]:
    try:
        names = shlex.split(value)
    except ValueError:
        names = value.split()
    if [name.lower() for name in names] == ["none"]:
        return []
    return [Path(os.path.expanduser(_expand(name, tokens))) for name in names]


def _expand(text: str, tokens: Mapping[str, str]) -> str:
    """``text`` with ``%x`` tokens replaced; an unknown token stays as written."""
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char == "%" and index + 1 < len(text) and text[index + 1] in tokens:
            out.append(tokens[text[index + 1]])
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _read(path: Path) -> list[_Entry]:
    """The usable lines of a known-hosts file; none when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    entries = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        marker, _, rest = line.partition(" ") if line.startswith("@") else ("", "", line)
        if marker and marker != REVOKED_MARKER:
            continue  # @cert-authority: no host certificates here
        try:
            entry = HostKeyEntry.from_line(rest.strip())
        except (InvalidHostKey, paramiko.SSHException, ValueError):
            entry = None
        if entry is not None and entry.key is not None:
            entries.append(_Entry(entry.hostnames, entry.key, bool(marker)))
    return entries


def _matches(name: str, patterns: list[str]) -> bool:
    """OpenSSH's rule: a negated pattern that matches excludes the line; else any pattern
    (wildcards ``*`` and ``?``, or a hashed name) that matches includes it."""
    name = name.lower()
    found = False
    for written in patterns:
        negated = written.startswith("!")
        pattern = written.removeprefix("!")
        if pattern.startswith("|1|"):
            hit = HostKeys.hash_host(name, pattern) == pattern
        else:
            hit = _wildcard(pattern.lower()).fullmatch(name) is not None
        if hit and negated:
            return False
        found = found or hit
    return found


def _wildcard(pattern: str) -> re.Pattern[str]:
    """``pattern`` with OpenSSH's two wildcards; ``[`` and ``]`` are plain characters."""
    parts = (".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern)
    return re.compile("".join(parts))
