"""A real OpenSSH server on 127.0.0.1 (its own keys, its own remote ``$HOME``) and the
client configuration that knows it, for the SSH tests; stopped by its pid."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.jobs import write_job
from tests.helpers.tools import find

from overbrainer.plugin import JobPoll, JobSpec, JobState, RunRecord
from overbrainer.plugin.host import HostExecutor

ALIAS = "box"


@dataclass(frozen=True)
class Keys:
    """The server's host key and the client's key (ed25519, no passphrase)."""

    dir: Path

    @property
    def host_key(self) -> Path:
        return self.dir / "host_ed25519"

    @property
    def client_key(self) -> Path:
        return self.dir / "client_ed25519"

    def public(self, key: Path) -> str:
        """``type base64`` of a key's public half."""
        return " ".join(key.with_suffix(".pub").read_text().split()[:2])


def make_keys(directory: Path, ssh_keygen: str = "ssh-keygen") -> Keys:
    keys = Keys(directory)
    for key in (keys.host_key, keys.client_key):
        subprocess.run(
            [ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)], check=True
        )
    return keys


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Sshd:
    """``sshd -D`` on 127.0.0.1:``port``, configured and logging in ``dir``. Logins are as
    ``user`` with the client key; sessions get ``home`` as ``$HOME``. ``options``: more
    ``sshd_config`` lines and ``env``: more variables of every session (``PATH``...), both
    read at the next ``start()``. ``program``: the absolute path of sshd."""

    dir: Path
    keys: Keys
    program: str = field(default_factory=lambda: find("sshd") or "/usr/sbin/sshd")
    port: int = field(default_factory=free_port)
    user: str = field(default_factory=getpass.getuser)
    options: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def log(self) -> Path:
        return self.dir / "sshd.log"

    def host_key_line(self) -> str:
        """The server's ``known_hosts`` line."""
        return f"[127.0.0.1]:{self.port} {self.keys.public(self.keys.host_key)}\n"

    def write_config(self) -> Path:
        self.home.mkdir(parents=True, exist_ok=True)
        authorized = self.dir / "authorized_keys"
        authorized.write_text(self.keys.public(self.keys.client_key) + "\n")
        config = self.dir / "sshd_config"
        config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {self.keys.host_key}\n"
            f"PidFile {self.dir / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {authorized}\n"
            "StrictModes no\n"
            "UsePAM no\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
            "PermitRootLogin prohibit-password\n"
            # Nothing of the real home of the login user is read, nor written through $HOME.
            "PermitUserRC no\n"
            "PermitUserEnvironment no\n"
            # Only the first SetEnv line counts: every variable goes on this one.
            f"SetEnv {' '.join(f'{k}={v}' for k, v in {'HOME': self.home, **self.env}.items())}\n"
            "MaxStartups 64\n"
            "MaxSessions 64\n"
            "Subsystem sftp internal-sftp\n" + "".join(f"{line}\n" for line in self.options)
        )
        return config

    def start(self) -> None:
        """Start the server (again, on the same port) and wait until it accepts."""
        assert self.process is None, "sshd is already running"
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # its privilege-separation dir
        config = self.write_config()
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [self.program, "-D", "-e", "-f", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + 10
        while True:
            if self.process.poll() is not None:
                code, self.process = self.process.returncode, None
                raise RuntimeError(f"sshd exited with {code}: {self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def stop(self) -> None:
        """Stop the server and every connection it serves, by pid: the listener is
        suspended (a client reconnecting meanwhile would get a session that outlives it),
        its ``sshd`` descendants are ended, then the listener. A session's other
        processes, a job's included, are left running."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGSTOP)
        sshd = os.path.realpath(self.program)  # what /proc/<pid>/exe says
        for pid in reversed(_descendants(self.process.pid, only_exe=sshd)):
            _signal(pid, signal.SIGTERM)
            _wait_gone(pid)
        self.process.terminate()
        self.process.send_signal(signal.SIGCONT)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children


def _descendants(pid: int, only_exe: str) -> list[int]:
    children = _children()
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                if os.readlink(f"/proc/{child}/exe") == only_exe:
                    found.append(child)
            except OSError:
                pass
    return found


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _wait_gone(pid: int, timeout: float = 5) -> None:
    """Until ``pid`` is gone or a zombie; then KILL it if it is still there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            return
        if state == "Z":
            return
        time.sleep(0.01)
    _signal(pid, signal.SIGKILL)


def write_client_config(home: Path, server: Sshd, alias: str = ALIAS, known: bool = True) -> str:
    """``alias`` in ``home/.ssh/config`` for ``server``, its key trusted when ``known``."""
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    key = ssh_dir / "overbrainer_test_key"  # not a default name: only IdentityFile finds it
    shutil.copyfile(server.keys.client_key, key)
    key.chmod(0o600)
    known_hosts = ssh_dir / "known_hosts"
    known_hosts.write_text(server.host_key_line() if known else "")
    with (ssh_dir / "config").open("a") as config:
        config.write(
            f"Host {alias}\n"
            "  HostName 127.0.0.1\n"
            f"  Port {server.port}\n"
            f"  User {server.user}\n"
            f"  IdentityFile {key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known_hosts}\n"
            "  StrictHostKeyChecking yes\n"
            "  BatchMode yes\n"
        )
    return alias


@dataclass
class Bench:
    """Runs jobs through a ``HostExecutor`` over SSH, in the server's home."""

    executor: HostExecutor
    tmp: Path

    def new_run(self, run_id: str = "demo_20260101-000000") -> RunRecord:
        remote = self.executor.claim(run_id)
        assert remote
        (self.tmp / "runs" / run_id).mkdir(parents=True, exist_ok=True)
        return RunRecord(id=run_id, target="box", created="2026-01-01T00:00:00Z", remote_dir=remote)

    def launch(
        self, run: RunRecord, script: str, secrets: dict[str, str] | None = None
    ) -> RunRecord:
        from pydantic import SecretStr

        local = self.tmp / "runs" / run.id
        write_job(local, script)
        job = JobSpec(
            run_id=run.id,
            local_dir=local,
            secrets={name: SecretStr(value) for name, value in (secrets or {}).items()},
        )
        handle = self.executor.launch(run, job)
        return run.evolve(job=handle, state="running", snapshots=True)

    def wait(
        self, run: RunRecord, until: Callable[[JobPoll], bool] | None = None, timeout: float = 20
    ) -> tuple[JobPoll, list[str]]:
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            poll = self.executor.poll(run)
            lines += poll.lines
            if until(poll) if until else poll.status.state is not JobState.RUNNING:
                return poll, lines
            assert time.monotonic() < deadline, f"timed out; last status {poll.status}"
            time.sleep(0.05)


def cmdlines_holding(secret: bytes) -> list[str]:
    """Every process (of this machine: client and server both) whose command line holds
    ``secret``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if secret in cmdline:
                found.append(f"{entry.name}: {cmdline!r}")
    return found
