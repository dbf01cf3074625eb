"""The fake Vault's record and token: a KV v2 store on loopback (the ``vault`` fixture of
tests/fixtures/vault.py serves it)."""

from __future__ import annotations

from dataclasses import dataclass, field

# The one token the fake Vault lets in.
TOKEN = "s.test-token-0123456789"


@dataclass
class Vault:
    """A Vault KV v2 store: ``secrets[(mount, path)]`` is the data of a secret."""

    address: str
    secrets: dict[tuple[str, str], dict[str, object]] = field(default_factory=dict)
    requests: list[tuple[str, str | None]] = field(default_factory=list)
