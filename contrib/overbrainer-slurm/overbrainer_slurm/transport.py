"""Where Slurm's commands run: on this machine, or on a login node through OpenSSH.

One small interface, :class:`Commands`, so the executor does not care which; the SSH one
is the OpenSSH client in BatchMode (no prompt ever waits for a person), which reads the
user's ``~/.ssh/config`` for the host, its key and its known host key. Only commands
travel: the spool is seen here and on the nodes at the same path.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from overbrainer.plugin import TransientError, UserError

COMMAND_TIMEOUT_S = 60.0
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
                'cluster, or set login = "user@host" (a login node) in the target'
            )
        return _run([program, *argv[1:]], input, env, argv[0])


@dataclass
class SshCommands:
    """Slurm's commands on the login node ``login``, through ``ssh -o BatchMode=yes``."""

    login: str
    env: Mapping[str, str]

    @property
    def where(self) -> str:
        return f"login node {self.login}"

    def run(self, argv: Sequence[str], input: str = "") -> Completed:
        ssh = shutil.which("ssh", path=self.env.get("PATH", os.defpath))
        if ssh is None:
            raise UserError("`ssh` (the OpenSSH client) is not installed on this machine")
        options = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=20"]
        config = Path(self.env.get("HOME", "~")).expanduser() / ".ssh" / "config"
        if config.is_file():
            # ssh reads the passwd entry's home, not $HOME: overbrainer's HOME decides.
            options[:0] = ["-F", str(config)]
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
