"""This machine as a host: scripts through ``sh``, jobs in sessions of their own."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from overbrainer.job.host import Completed, Host, HostError

STRIPPED_PREFIXES = ("OVERBRAINER_", "VAULT_")


def job_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without overbrainer's own settings and Vault credentials."""
    return {key: value for key, value in env.items() if not key.startswith(STRIPPED_PREFIXES)}


class LocalHost(Host):
    """This machine. ``env`` is the environment jobs and scripts start from."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = job_environment(env)

    def run(self, script: str, input: bytes = b"", timeout: float | None = 60) -> Completed:
        try:
            done = subprocess.run(
                ["sh", "-c", script],
                input=input,
                capture_output=True,
                timeout=timeout,
                env=self.env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise HostError(f"a script on this machine took more than {timeout:.0f} s") from None
        return Completed(done.returncode, done.stdout, done.stderr)

    @contextmanager
    def stream_out(self, script: str, input: bytes = b"") -> Iterator[IO[bytes]]:
        process = subprocess.Popen(
            ["sh", "-c", script],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
        )
        if process.stdin is None or process.stdout is None:  # never: both are pipes
            raise HostError("no pipe to the script")
        process.stdin.write(input)
        process.stdin.close()
        try:
            yield process.stdout
        finally:
            process.stdout.close()
            error = process.stderr.read() if process.stderr else b""
            code = process.wait()
        if code != 0:
            raise HostError(error.decode("utf-8", "replace").strip() or f"exit code {code}")

    def stream_in(self, script: str, write: Callable[[IO[bytes]], None]) -> Completed:
        # Output goes to files, not pipes: a chatty script could otherwise block on a full
        # pipe while this process is still writing its input.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(
                ["sh", "-c", script], stdin=subprocess.PIPE, stdout=out, stderr=err, env=self.env
            )
            assert process.stdin is not None
            try:
                write(process.stdin)
            finally:
                process.stdin.close()
                code = process.wait()
            out.seek(0)
            err.seek(0)
            return Completed(code, out.read(), err.read())

    def spawn(self, script: str, cwd: str, log: str, secrets: Mapping[str, str]) -> None:
        with open(log, "ab") as output:
            process = subprocess.Popen(
                ["sh", "-c", script],
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                env={**self.env, **secrets},
                # A session of its own: the terminal's Ctrl-C never reaches the job, and
                # it outlives this process.
                start_new_session=True,
            )
        # Reap it if it ends while this process lives, so a finished job's group never
        # looks alive because of a zombie.
        threading.Thread(target=process.wait, daemon=True).start()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        try:
            with open(path, "rb") as file:
                file.seek(offset)
                return file.read(length)
        except FileNotFoundError:
            return b""

    def same_place(self, local: Path, path: str) -> bool:
        try:
            return os.path.samefile(local, path)
        except OSError:
            return False
