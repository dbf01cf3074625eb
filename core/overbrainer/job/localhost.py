"""This machine as a host: scripts through ``sh``, jobs in sessions of their own.

Scripts and jobs get an allowlisted copy of overbrainer's environment: what finding
programs, libraries, GPUs, caches, certificates and proxies needs, and nothing else, so the
shell's other secrets (``OPENAI_API_KEY``, ``AWS_*``...) never reach Axolotl. A target adds
names with ``pass_env``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from overbrainer.job.changes import DirectoryEvents
from overbrainer.job.host import Completed, Host, HostError

ALLOWED = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
    "HOSTNAME", "LD_LIBRARY_PATH", "CC", "CXX",
    "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED", "PYTHONIOENCODING",
    "HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
    "HF_ENDPOINT", "HF_HUB_ENABLE_HF_TRANSFER", "TRANSFORMERS_CACHE", "TRANSFORMERS_OFFLINE",
    "TOKENIZERS_PARALLELISM", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
    "AXOLOTL_DO_NOT_TRACK", "DO_NOT_TRACK",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
})  # fmt: skip
ALLOWED_PREFIXES = (
    "LC_", "XDG_", "CUDA_", "NVIDIA_", "NCCL_", "TORCH_", "PYTORCH_", "TRITON_",
    "ACCELERATE_", "PIP_", "UV_", "PYENV_",
)  # fmt: skip
NEVER = ("OVERBRAINER_", "VAULT_")
"""overbrainer's own settings and Vault credentials: never passed, whatever asks."""


REDIRECTING = frozenset({
    "HF_ENDPOINT", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "all_proxy",
})  # fmt: skip
REDIRECTING_PREFIXES = ("PIP_", "UV_")
"""What says where the job's requests go, and whom they trust: the Hub's address, proxies,
CA bundles, package indexes. The job carries the user's Hugging Face token: these come from
the shell only, never from a project's ``.env``, which could point the token anywhere."""


def job_environment(
    env: Mapping[str, str], shell: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The part of ``env`` a script or job on this machine may see: the allowlist, and of
    it what redirects requests only where ``shell`` (the process's own environment) set it."""
    shell = os.environ if shell is None else shell
    return {
        key: value
        for key, value in env.items()
        if (key in ALLOWED or key.startswith(ALLOWED_PREFIXES))
        and not key.startswith(NEVER)
        and (
            not (key in REDIRECTING or key.startswith(REDIRECTING_PREFIXES))
            or shell.get(key) == value
        )
    }


class LocalHost(Host):
    """This machine. ``env`` is overbrainer's environment; scripts and jobs start from its
    allowlisted part (:func:`job_environment`)."""

    local = True

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = job_environment(env)
        self._events: dict[str, DirectoryEvents] = {}

    def wait_for_change(self, root: str, timeout: float) -> bool | None:
        """inotify on the job directory; None (polling) where there is none."""
        events = self._events.get(root)
        if events is None or events.gone:
            if events is not None:
                events.close()
                self._events.pop(root)
                return None
            try:
                events = self._events[root] = DirectoryEvents(root)
            except OSError:
                return None
        return events.wait(timeout)

    def close(self) -> None:
        for events in self._events.values():
            events.close()
        self._events.clear()

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
