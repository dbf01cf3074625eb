"""`config check --resolve`: literal secrets, and `vault:` references read from a loopback server
speaking the Vault KV v2 read API."""

from __future__ import annotations

import socket

from tests.helpers.fake_vault import TOKEN

SECRET = "sk-from-vault-abcdefghijklmnop"
REFERENCE = "vault:secret/overbrainer/main#api_key"


def key_env(value: str = REFERENCE) -> dict[str, str]:
    """The key, and a URL: without one config check reports the provider as unreachable."""
    return {
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY": value,
        "OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "https://llm.example.invalid/v1",
    }


def test_a_literal_secret_resolves_without_vault(run_cli):
    result = run_cli("config", "check", "--resolve", env=key_env("0123"))
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "providers.main.api_key = ***" in lines
    assert lines[-1] == "providers.main.api_key: resolved"
    assert "0123" not in result.stdout
    assert result.stderr == ""


def test_unset_secrets_are_not_resolved_but_a_provider_without_url_or_key_is_a_problem(run_cli):
    result = run_cli("config", "check", "--resolve")
    assert result.exit_code == 1
    assert "resolved" not in result.stdout
    assert result.stderr.splitlines() == [
        "problem: providers.main (used by roles.generator) has no URL: set "
        "OVERBRAINER_PROVIDERS__MAIN__BASE_URL",
        "error: 1 problem(s): the configuration cannot run as it is",
    ]
    url = {"OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "https://llm.example.invalid/v1"}
    result = run_cli("config", "check", env=url)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        "problem: providers.main (used by roles.generator) has no API key: set "
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY"
    )
    local = {"OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "http://127.0.0.1:8080/v1"}
    result = run_cli("config", "check", env=local)  # a server on this machine: no key needed
    assert result.exit_code == 0, result.stderr


def test_a_vault_reference_is_read_with_the_token(run_cli, vault):
    vault.secrets["secret", "overbrainer/main"] = {"api_key": SECRET}
    result = run_cli(
        "config",
        "check",
        "--resolve",
        env={**key_env(), "VAULT_ADDR": vault.address, "VAULT_TOKEN": TOKEN},
    )
    assert result.exit_code == 0, result.stderr
    assert "providers.main.api_key = *** (vault reference)" in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "providers.main.api_key: resolved"
    assert SECRET not in result.stdout + result.stderr
    assert vault.requests == [("/v1/secret/data/overbrainer/main", TOKEN)]


def test_the_token_may_come_from_the_vault_token_file(run_cli, vault, isolated_env):
    vault.secrets["secret", "overbrainer/main"] = {"api_key": SECRET}
    (isolated_env / ".vault-token").write_text(TOKEN + "\n")
    result = run_cli("config", "check", "--resolve", env={**key_env(), "VAULT_ADDR": vault.address})
    assert result.exit_code == 0, result.stderr
    assert vault.requests == [("/v1/secret/data/overbrainer/main", TOKEN)]


def test_vault_settings_may_come_from_dotenv(run_cli, vault, project_dir):
    vault.secrets["kv", "hf"] = {"token": "hf_abcdefghijklmnopqrstu"}
    (project_dir / ".env").write_text(
        f"VAULT_ADDR={vault.address}\nVAULT_TOKEN={TOKEN}\nOVERBRAINER_HF_TOKEN=vault:kv/hf#token\n"
    )
    result = run_cli("config", "check", "--resolve", env=key_env("0123"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "hf_token: resolved"


def resolve_failure(run_cli, env: dict[str, str]) -> str:
    result = run_cli("config", "check", "--resolve", env=env)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[-1] == "error: 1 secret(s) could not be resolved"
    assert "resolved" not in result.stdout
    assert SECRET not in result.stdout + result.stderr
    assert TOKEN not in result.stdout + result.stderr
    return "\n".join(lines[:-1])


def test_a_wrong_token_is_denied(run_cli, vault):
    vault.secrets["secret", "overbrainer/main"] = {"api_key": SECRET}
    env = {**key_env(), "VAULT_ADDR": vault.address, "VAULT_TOKEN": "s.wrong"}
    assert resolve_failure(run_cli, env) == (
        "providers.main.api_key: vault denied access to secret/overbrainer/main"
    )


def test_a_missing_secret(run_cli, vault):
    env = {**key_env(), "VAULT_ADDR": vault.address, "VAULT_TOKEN": TOKEN}
    assert resolve_failure(run_cli, env) == (
        "providers.main.api_key: vault has no secret at secret/overbrainer/main"
    )


def test_a_missing_field(run_cli, vault):
    vault.secrets["secret", "overbrainer/main"] = {"other": "x", "api_key": ""}
    env = {**key_env(), "VAULT_ADDR": vault.address, "VAULT_TOKEN": TOKEN}
    assert resolve_failure(run_cli, env) == (
        "providers.main.api_key: the vault secret secret/overbrainer/main has no field `api_key`"
    )


def test_no_vault_address(run_cli):
    assert resolve_failure(run_cli, {**key_env(), "VAULT_TOKEN": TOKEN}) == (
        "providers.main.api_key: cannot resolve the vault reference: VAULT_ADDR is not set"
    )


def test_no_token(run_cli, vault):
    assert resolve_failure(run_cli, {**key_env(), "VAULT_ADDR": vault.address}) == (
        "providers.main.api_key: cannot resolve the vault reference: "
        "set VAULT_TOKEN or write ~/.vault-token"
    )
    assert vault.requests == []


def test_an_unreachable_vault(run_cli):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening
        message = resolve_failure(
            run_cli, {**key_env(), "VAULT_ADDR": address, "VAULT_TOKEN": TOKEN}
        )
    assert message == f"providers.main.api_key: cannot reach vault at {address}: ConnectionError"


def test_a_malformed_reference(run_cli):
    env = {**key_env("vault:secret-without-field"), "VAULT_ADDR": "http://127.0.0.1:9"}
    assert resolve_failure(run_cli, env) == (
        "providers.main.api_key: a vault reference reads vault:<mount>/<path>#<field>"
    )


def test_without_resolve_no_reference_is_read(run_cli, vault):
    result = run_cli(
        "config", "check", env={**key_env(), "VAULT_ADDR": vault.address, "VAULT_TOKEN": TOKEN}
    )
    assert result.exit_code == 0, result.stderr
    assert vault.requests == []


def test_an_unreachable_vault_is_named_without_the_secrets_in_its_address(run_cli):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        address = f"http://admin:hunter2@127.0.0.1:{port}/?token=abc123"
        message = resolve_failure(
            run_cli, {**key_env(), "VAULT_ADDR": address, "VAULT_TOKEN": TOKEN}
        )
    assert message == (
        f"providers.main.api_key: cannot reach vault at http://***@127.0.0.1:{port}/?token=***: "
        "ConnectionError"
    )


def test_a_projects_env_file_does_not_send_the_shells_vault_token_elsewhere(
    run_cli, project_dir
):
    (project_dir / ".env").write_text("VAULT_ADDR=https://vault.example.invalid\n")
    env = {**key_env(), "VAULT_TOKEN": TOKEN}
    assert resolve_failure(run_cli, env) == (
        "providers.main.api_key: your Vault token comes from your shell (or ~/.vault-token), "
        "and VAULT_ADDR from the project's .env: it is not sent to a host the project names; "
        "set VAULT_ADDR in the shell too if that Vault is yours"
    )
