"""The system programs the tests run (sshd, busybox, curl...), asked for in one way.

``need("busybox")`` returns the program's absolute path. When it is missing the test is
skipped with the command that installs it, except under CI (``CI`` set, and not ``0`` or
``false``), where it fails: a CI whose install step broke must not pass by skipping.
``.ci/prereqs`` installs every Debian package named here.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

PREREQS = ".ci/prereqs"

PACKAGES: dict[str, str] = {
    "sshd": "openssh-server",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
    "busybox": "busybox",
    "dash": "dash",
    "curl": "curl",
    "ps": "procps",
    "munged": "munge",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "go": "golang-go",
    "unshare": "util-linux",
    "ip": "iproute2",
}
"""Each program the tests run and the Debian package that has it."""

OTHERS: dict[str, str] = {
    "python3": "install Python 3.11+, as the README says",
    "uv": "see https://docs.astral.sh/uv/getting-started/installation/",
}
"""Programs no Debian package of ours holds, and how to get them."""


def search_path(path: str) -> str:
    """``path`` with the ``sbin`` beside each of its ``bin`` directories added: a user's
    PATH often lacks ``/usr/sbin``, where sshd lives."""
    dirs = [entry for entry in path.split(os.pathsep) if entry]
    beside = [str(Path(entry).with_name("sbin")) for entry in dirs if Path(entry).name == "bin"]
    return os.pathsep.join(dict.fromkeys(dirs + beside))


def find(program: str, path: str | None = None) -> str | None:
    """The absolute path of ``program`` on ``path`` (this process's PATH) or beside it, or
    None. Absolute because sshd refuses to start from a relative one."""
    if path is None:
        path = os.environ.get("PATH", os.defpath)
    found = shutil.which(program, path=search_path(path))
    return os.path.abspath(found) if found else None


def install_hint(program: str) -> str:
    """How to install ``program``, as its skip message says it."""
    if program in PACKAGES:
        return f"apt-get install {PACKAGES[program]} (or run {PREREQS})"
    return OTHERS[program]


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether this is CI, as most CI services say it (``CI=true``)."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false")


def need(program: str) -> str:
    """The absolute path of ``program``; the test is skipped when it is missing (failed
    under CI), with the reason and the command that installs it."""
    found = find(program)
    if found is not None:
        return found
    reason = f"{program} is not installed: {install_hint(program)}"
    if in_ci():
        pytest.fail(f"{reason} [CI is set: a missing tool fails]", pytrace=False)
    pytest.skip(reason)
