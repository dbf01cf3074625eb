"""Secrets: literal values, or ``vault:<mount>/<path>#<field>`` references resolved late.

A reference is read from Vault (or OpenBao) KV v2 only when a command needs the value,
with ``VAULT_ADDR`` and ``VAULT_TOKEN`` (or ``~/.vault-token``). Every resolved value is
registered with the redactor so no log line can show it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import SecretStr

from overbrainer.config.listen import is_loopback_url
from overbrainer.errors import UserError
from overbrainer.redact import mask_url, register_secret

_REFERENCE = re.compile(r"^vault:(?P<mount>[^/#\s]+)/(?P<path>[^#\s]+)#(?P<field>[^#\s]+)$")


def resolve_secret(secret: SecretStr, key: str, env: Mapping[str, str]) -> SecretStr:
    """The value of ``secret`` (the setting ``key``), reading Vault when it is a reference."""
    value = secret.get_secret_value()
    if not value.startswith("vault:"):
        register_secret(value)
        return secret
    match = _REFERENCE.match(value)
    if match is None:
        raise UserError(
            f"{key}: a vault reference reads vault:<mount>/<path>#<field>"
        )
    resolved = _read_vault(key, match["mount"], match["path"], match["field"], env)
    register_secret(resolved)
    return SecretStr(resolved)


def _read_vault(key: str, mount: str, path: str, field: str, env: Mapping[str, str]) -> str:
    address = env.get("VAULT_ADDR")
    if not address:
        raise UserError(f"{key}: cannot resolve the vault reference: VAULT_ADDR is not set")
    token = env.get("VAULT_TOKEN") or _token_file(env)
    if not token:
        raise UserError(
            f"{key}: cannot resolve the vault reference: set VAULT_TOKEN or write ~/.vault-token"
        )
    shell_token = "VAULT_TOKEN" in os.environ or not env.get("VAULT_TOKEN")  # or the file
    if shell_token and "VAULT_ADDR" not in os.environ and not is_loopback_url(address):
        raise UserError(
            f"{key}: your Vault token comes from your shell (or ~/.vault-token), and "
            "VAULT_ADDR from the project's .env: it is not sent to a host the project names; "
            "set VAULT_ADDR in the shell too if that Vault is yours"
        )
    import hvac  # lazily: only a command that resolves a reference pays for it
    import hvac.exceptions
    import requests

    client = hvac.Client(url=address, token=token, timeout=30)
    try:
        reply = client.secrets.kv.v2.read_secret_version(
            path=path, mount_point=mount, raise_on_deleted_version=True
        )
    except hvac.exceptions.Forbidden:
        raise UserError(f"{key}: vault denied access to {mount}/{path}") from None
    except hvac.exceptions.InvalidPath:
        raise UserError(f"{key}: vault has no secret at {mount}/{path}") from None
    except hvac.exceptions.VaultError as error:
        raise UserError(f"{key}: vault error: {type(error).__name__}") from None
    except requests.RequestException as error:
        raise UserError(
            f"{key}: cannot reach vault at {mask_url(address)}: {type(error).__name__}"
        ) from None
    data = (reply or {}).get("data", {}).get("data", {})
    value = data.get(field)
    if not isinstance(value, str) or not value:
        raise UserError(f"{key}: the vault secret {mount}/{path} has no field `{field}`")
    return value


def _token_file(env: Mapping[str, str]) -> str | None:
    home = env.get("HOME")
    if not home:
        return None
    try:
        return (Path(home) / ".vault-token").read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
