"""Where Slurm's commands run: on this machine, or on a login node through OpenSSH.

One small interface, :class:`Commands`, so the executor does not care which; the SSH one
is the OpenSSH client in BatchMode (no prompt ever waits for a person), which reads the
user's ``~/.ssh/config`` for the host, its key and its known host key. Only commands
travel: the spool is seen here and on the nodes at the same path.

A follower polls for hours and a cancel asks Slurm ten times a second: one connection a
command would be a login (a handshake, a log line, MaxStartups and fail2ban's count) each
time. So the commands of one overbrainer process share one master connection (OpenSSH's
ControlMaster), in a private directory, ended when the executor is released and, after a
crash, by its own ``ControlPersist`` idle timeout.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from loguru import logger

from overbrainer.plugin import TransientError, UserError

COMMAND_TIMEOUT_S = 60.0
PERSIST_S = 60
"""How long a master connection outlives its last command: it spans a follower's polls,
and ends on its own when the process that made it was killed before its release."""
ALIVE_S = 15
"""How often a master connection asks the login node whether it is there: after three
unanswered asks (a dropped network, a node gone) it ends, and the next command connects
anew instead of waiting on a connection that is dead."""
SOCKET_ROOM = 100
"""The longest control path used: a Unix socket's path holds 107 bytes, and ssh binds a
name 17 bytes longer first."""
PASSED = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "SLURM_CONF")
"""What Slurm's commands get of overbrainer's environment: enough to find the cluster (and,
through ssh, the user's config, keys and agent), never the rest (the shell's secrets)."""


@dataclass(frozen=True)
class Completed:
    """A command's exit status and output."""

    code: int
    out: str
    err: str


class Commands(Protocol):
    """Runs one Slurm command (``argv``), feeding it ``input``."""

    @property
    def where(self) -> str:
        """Where the commands run, for messages: ``this machine`` or the login node."""

    def run(self, argv: Sequence[str], input: str = "") -> Completed: ...

    def close(self) -> None:
        """Ends what the commands kept open between them (an ssh master connection)."""


def command_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The part of ``env`` a Slurm command (or ssh) is started with."""
    names = (*PASSED, "SSH_AUTH_SOCK")
    return {name: env[name] for name in names if name in env}


@dataclass
class LocalCommands:
    """Slurm's commands on this machine."""

    env: Mapping[str, str]
    where: str = "this machine"

    def run(self, argv: Sequence[str], input: str = "") -> Completed:
        env = command_environment(self.env)
        program = shutil.which(argv[0], path=env.get("PATH", os.defpath))
        if program is None:
            raise UserError(
                f"`{argv[0]}` is not on this machine's PATH: run overbrainer on a node of the "
                "cluster, or set the target's login node in the environment "
                "(OVERBRAINER_TARGETS__NAME__LOGIN=user@host)"
            )
        return _run([program, *argv[1:]], input, env, argv[0])

    def close(self) -> None:
        pass


@dataclass
class SshCommands:
    """Slurm's commands on the login node ``login``, through ``ssh -o BatchMode=yes``."""

    login: str
    env: Mapping[str, str]
    control: Path | None = field(default=None, init=False)
    """The master connection's socket (None: each command connects on its own)."""
    _chosen: bool = field(default=False, init=False, repr=False)

    @property
    def where(self) -> str:
        return f"login node {self.login}"

    def run(self, argv: Sequence[str], input: str = "") -> Completed:
        ssh = self._ssh()
        options = [*self._config(), "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"]
        if not self._chosen:
            self.control, self._chosen = control_path(self.login, self.env), True
        if self.control is not None:
            # Options on the command line win over the user's config for this host.
            shared = ("ControlMaster=auto", f"ControlPath={self.control}",
                      f"ControlPersist={PERSIST_S}", f"ServerAliveInterval={ALIVE_S}",
                      "ServerAliveCountMax=3")  # fmt: skip
            options += [word for option in shared for word in ("-o", option)]
        done = _run(
            [ssh, *options, "--", self.login, shlex.join(argv)],
            input,
            command_environment(self.env),
            argv[0],
        )
        if done.code == 255:
            # ssh's own failure (the command's codes are below): no connection, a host key
            # or a login refused.
            reason = done.err.strip().splitlines()[-1] if done.err.strip() else "no message"
            raise TransientError(f"cannot reach {self.where} by ssh: {reason}")
        if done.code == 127 and "not found" in done.err:
            raise UserError(f"`{argv[0]}` is not on the PATH of {self.where}")
        return done

    def close(self) -> None:
        """Ends this process's master connection (the commands of another process, which
        have their own, go on)."""
        control, self.control, self._chosen = self.control, None, False
        if control is None or not control.exists():
            return
        argv = [self._ssh(), *self._config(), "-o", f"ControlPath={control}"]
        try:
            subprocess.run(
                [*argv, "-O", "exit", "--", self.login],
                env=command_environment(self.env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            logger.debug(f"cannot end the ssh master connection to {self.login}: {error}")

    def _config(self) -> list[str]:
        config = Path(self.env.get("HOME", "~")).expanduser() / ".ssh" / "config"
        # ssh reads the passwd entry's home, not $HOME: overbrainer's HOME decides.
        return ["-F", str(config)] if config.is_file() else []

    def _ssh(self) -> str:
        ssh = shutil.which("ssh", path=self.env.get("PATH", os.defpath))
        if ssh is None:
            raise UserError("`ssh` (the OpenSSH client) is not installed on this machine")
        return ssh


def control_path(login: str, env: Mapping[str, str]) -> Path | None:
    """The master connection's socket for ``login`` in this process: in a directory only
    this user can enter (another could otherwise put a socket of theirs in its place), or
    None, with a warning, where there is none (then each command connects on its own)."""
    # /tmp is safe here: the directory is checked below, not trusted.
    shared = Path("/tmp")  # noqa: S108
    base = Path(env.get("XDG_RUNTIME_DIR") or env.get("TMPDIR") or shared)
    where = base / f"overbrainer-ssh-{os.getuid()}"
    name = f"{os.getpid()}-{hashlib.sha256(login.encode()).hexdigest()[:8]}"
    if len(str(where / name)) > SOCKET_ROOM:
        where = shared / where.name
    try:
        where.mkdir(mode=0o700, exist_ok=True)
        info = where.lstat()
    except OSError as error:
        logger.warning(f"each ssh command to {login} connects anew: cannot create {where}: "
                       f"{error.strerror}")  # fmt: skip
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        logger.warning(f"each ssh command to {login} connects anew: {where} is not a "
                       "directory that only you can open")  # fmt: skip
        return None
    return where / name


def _run(argv: list[str], input: str, env: dict[str, str], name: str) -> Completed:
    try:
        done = subprocess.run(
            argv,
            input=input,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise TransientError(f"`{name}` did not answer in {COMMAND_TIMEOUT_S:.0f} s") from None
    return Completed(done.returncode, done.stdout, done.stderr)
