"""A POSIX machine as a transport sees it: run a script, stream bytes in and out, spawn.

``LocalHost`` (subprocess) and the SSH plugin's host (fabric) implement the four
primitives; the tree and file operations the job protocol needs are built on them here.
"""

from __future__ import annotations

import tarfile
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from overbrainer.errors import TransientError
from overbrainer.job import scripts


@dataclass(frozen=True)
class Completed:
    """A finished script: its exit status and output."""

    code: int
    stdout: bytes
    stderr: bytes

    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")


class HostError(TransientError):
    """A transport failure or a script that failed on the host: worth retrying."""


class Host(ABC):
    """A POSIX host reached by some transport.

    ``local``: the host is this machine, so a job there sees this machine's files.
    """

    local: bool = False

    @abstractmethod
    def run(self, script: str, input: bytes = b"", timeout: float | None = 60) -> Completed:
        """Run ``script`` with ``sh`` on the host, ``input`` on its stdin."""

    @abstractmethod
    def stream_out(self, script: str, input: bytes = b"") -> AbstractContextManager[IO[bytes]]:
        """Run ``script`` and read its stdout as a stream; a failure raises on exit."""

    @abstractmethod
    def stream_in(self, script: str, write: Callable[[IO[bytes]], None]) -> Completed:
        """Run ``script`` with ``write`` producing its stdin as a stream."""

    @abstractmethod
    def spawn(self, script: str, cwd: str, log: str, secrets: Mapping[str, str]) -> None:
        """Start ``script`` detached in a new session, in ``cwd``, its stdout and stderr
        appended to ``log``, stdin empty; ``secrets`` join its environment and never a
        command line. Returns once it is started."""

    def close(self) -> None:  # noqa: B027 - a transport without a connection has nothing to do
        """Release the connection, if any."""

    def wait_for_change(self, root: str, timeout: float) -> bool | None:
        """Wait up to ``timeout`` seconds for the job in ``root`` to change state (its exit
        code, a cancel, a snapshot asked for or saved: ``changes.WAKE``); True when it did,
        False at the timeout. None (this default): the transport cannot wait on events,
        and the follower sleeps its poll interval instead."""
        return None

    def forward(self, port: int) -> int:
        """A port on this machine's loopback that reaches ``port`` on the host's loopback,
        open until ``close``: the port itself for this machine (this default), a
        forwarded one over a remote host's transport."""
        if self.local:
            return port
        raise HostError(f"{type(self).__name__} cannot forward a port")

    def same_place(self, local: Path, path: str) -> bool:
        """Whether ``path`` on the host is the local directory ``local`` itself, so that
        nothing needs copying."""
        return False

    # Built on the primitives; transports may override them with faster ones.

    def check(self, script: str, input: bytes = b"", timeout: float | None = 60) -> str:
        """Run ``script`` and return its stdout, raising ``HostError`` on failure."""
        done = self.run(script, input=input, timeout=timeout)
        if done.code != 0:
            detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise HostError(detail[-1] if detail else f"a script exited with code {done.code}")
        return done.text()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes of ``path`` from ``offset``; empty when it is missing."""
        q = scripts.q
        script = f"[ -f {q(path)} ] && tail -c +{offset + 1} {q(path)} | head -c {length}; exit 0\n"
        return self.run(script).stdout

    def write_file(self, path: str, data: bytes) -> None:
        """Write ``path`` atomically (a temporary file, then a rename)."""
        q = scripts.q
        temp = f"{path}.tmp"
        self.check(f"cat > {q(temp)} && mv -f {q(temp)} {q(path)}\n", input=data)

    def upload(self, source: Path, root: str, skip: tuple[str, ...] = ()) -> None:
        """Copy the tree ``source`` into ``root`` as one tar stream (``skip``: top-level
        names left out)."""

        def write(stream: IO[bytes]) -> None:
            with tarfile.open(fileobj=stream, mode="w|") as tar:
                for entry in sorted(source.iterdir()):
                    if entry.name not in skip:
                        tar.add(entry, arcname=entry.name)

        done = self.stream_in(scripts.tar_in_script(root), write)
        if done.code != 0:
            raise HostError(
                f"upload to {root} failed: {done.stderr.decode('utf-8', 'replace').strip()}"
            )

    def download(self, root: str, files: list[str], dest: Path) -> None:
        """Copy ``files`` (relative to ``root``) into ``dest`` as one tar stream.

        Extraction refuses absolute names, ``..`` and links leading out of ``dest``.
        """
        names = b"".join(name.encode("utf-8", "surrogateescape") + b"\0" for name in files)
        with (
            self.stream_out(scripts.tar_out_script(root), input=names) as stream,
            tarfile.open(fileobj=stream, mode="r|") as tar,
        ):
            tar.extractall(dest, filter="data")
