"""SSH keys made for one pod: its host key (pinned before the pod exists) and the client's.

Both are ed25519, made here with ``cryptography`` (paramiko's own dependency).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CLIENT_KEY = "client_ed25519"
KNOWN_HOSTS = "known_hosts"
CONFIG = "config"


@dataclass(frozen=True)
class KeyPair:
    private: bytes
    """OpenSSH PEM."""
    public: str
    """``ssh-ed25519 AAAA...``."""


def new_key() -> KeyPair:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return KeyPair(private, public.decode("ascii"))


def write_private(path: Path, data: bytes) -> None:
    """A private key file, mode 0600 from its creation."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def public_of(path: Path) -> str:
    """The public half of the private key file at ``path``."""
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_ssh_private_key(path.read_bytes(), password=None)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode("ascii")
    )


def write_ssh_files(
    ssh_dir: Path, alias: str, host: str, port: int, *, user: str, host_key: str
) -> Path:
    """``config`` and ``known_hosts`` of the run, so that
    ``ssh -F runs/<id>/ssh/config overbrainer-<id>`` reaches the pod with its key pinned.
    The paths are quoted: a project's path may hold spaces."""
    ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    known = ssh_dir / KNOWN_HOSTS
    where = host if port == 22 else f"[{host}]:{port}"
    known.write_text(f"{where} {host_key}\n", encoding="utf-8")
    config = ssh_dir / CONFIG
    config.write_text(
        f"Host {alias}\n"
        f"  HostName {host}\n"
        f"  Port {port}\n"
        f"  User {user}\n"
        f'  IdentityFile "{ssh_dir.resolve() / CLIENT_KEY}"\n'
        "  IdentitiesOnly yes\n"
        f'  UserKnownHostsFile "{known.resolve()}"\n'
        "  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n"
        "  BatchMode yes\n",
        encoding="utf-8",
    )
    return config
