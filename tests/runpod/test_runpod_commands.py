"""``overbrainer pod`` against the fake Runpod, the GraphQL escaping of the create, and
``--help`` importing no SDK."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.helpers.fake_runpod import API_KEY, FakeRunpod, argument
from tests.helpers.fake_vault import TOKEN as VAULT_TOKEN
from tests.helpers.tools import need

from overbrainer_runpod.api import RunpodApi, gql_input


@pytest.fixture
def project(project_dir, fake_runpod):
    return project_dir


def test_pod_gpus_filters_and_sorts_cheapest_first(project, run_cli, fake_runpod):
    fake_runpod.stock = {"NVIDIA L40S": "None"}
    result = run_cli("pod", "gpus", "--min-vram", "40", "--in-stock")
    assert result.exit_code == 0, result.stderr
    ids = [line.split("  ")[0].strip() for line in result.stdout.splitlines()]
    assert ids == ["NVIDIA A40", "NVIDIA H100 80GB HBM3"]
    cheap = run_cli("pod", "gpus", "--max-price", "0.5")
    assert [line.split("  ")[0].strip() for line in cheap.stdout.splitlines()] == [
        "NVIDIA RTX A5000",
        "NVIDIA A40",
    ]


def test_pod_datacenters_volumes_and_ls(project, run_cli):
    assert "EU-RO-1  Romania" in run_cli("pod", "datacenters").stdout
    assert "vol123  models  100 GB  EU-RO-1" in run_cli("pod", "volumes").stdout
    assert run_cli("pod", "ls").stdout == "pod: no overbrainer pod on this account\n"


def test_pod_rm_of_a_run_without_pod(project, run_cli):
    result = run_cli("pod", "rm", "demo_20260101-000000")
    assert result.exit_code == 1
    assert "error: run demo_20260101-000000 has no pod" in result.stderr


def test_pod_rm_takes_latest_and_a_prefix_of_this_project_s_runs(project, run_cli):
    assert run_cli("pod", "rm", "latest").stderr == (
        "error: no run in runs/ yet: `latest` names none\n"
    )
    run_dir = project / "runs" / "demo_20260101-000000"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(
        '{"id": "demo_20260101-000000", "target": "pod", "created": "2026-01-01T00:00:00Z", '
        '"remote_dir": "/workspace/r", "state": "failed"}'
    )
    result = run_cli("pod", "rm", "demo_2026")
    assert "error: run demo_20260101-000000 has no pod" in result.stderr


def test_a_create_is_escaped_by_graphql_rules(fake_runpod: FakeRunpod):
    tricky = 'sh -c \'echo "a\\\\b"\n}) { id } mutation { podTerminate(input: {podId: "x"}) }'
    spec = {"name": 'n"1', "dockerArgs": tricky, "env": [{"key": "K", "value": "é\t\u2028"}]}
    text = f"mutation {{ podFindAndDeployOnDemand(input: {gql_input(spec)}) {{ id }} }}"
    assert argument(text, "podFindAndDeployOnDemand") == spec
    api = RunpodApi(API_KEY, fake_runpod.url)
    assert api.pods() == []
    assert api.calls == 1


def test_runs_ls_loads_no_plugin_and_pod_help_no_sdk(project_dir):
    code = (
        "import json, sys\n"
        "from overbrainer.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    for args, plugin_loaded in ((["runs", "ls"], False), (["pod", "--help"], True)):
        result = subprocess.run(
            [sys.executable, "-c", code, "-C", str(project_dir), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        modules = {name.split(".")[0] for name in json.loads(result.stderr.splitlines()[-1])}
        assert ("overbrainer_runpod" in modules) is plugin_loaded, args
        assert "runpod" not in modules, args


def test_the_run_s_ssh_config_reads_right_under_a_path_with_spaces(tmp_path):
    from overbrainer_runpod.keys import write_ssh_files

    ssh = need("ssh")
    ssh_dir = tmp_path / "my projects" / "runs" / "r1" / "ssh"
    config = write_ssh_files(
        ssh_dir, "overbrainer-r1", "127.0.0.1", 2200, user="root", host_key="ssh-ed25519 AAAA"
    )
    done = subprocess.run(
        [ssh, "-G", "-F", str(config), "overbrainer-r1"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"identityfile {ssh_dir / 'client_ed25519'}" in lines
    assert f"userknownhostsfile {ssh_dir / 'known_hosts'}" in lines


def test_a_plugin_command_does_not_stay_on_the_core_group(project, run_cli):
    from overbrainer.cli import cli

    assert run_cli("pod", "datacenters").exit_code == 0
    assert "pod" not in cli.commands
    # Listed by --help all the same: from what loading the plugins kept, not from the group.
    assert "pod" in run_cli("--help").stdout.split("Commands:")[1].split()
    assert "pod" not in cli.commands


def test_importing_the_sdk_leaves_the_loggers_levels_alone(monkeypatch, fake_runpod):
    import logging

    monkeypatch.delitem(sys.modules, "runpod", raising=False)
    paramiko = logging.getLogger("paramiko")
    monkeypatch.setattr(paramiko, "level", logging.NOTSET)
    RunpodApi(API_KEY, fake_runpod.url).sdk()
    assert paramiko.level == logging.NOTSET


def test_the_api_key_may_be_a_vault_reference(project, run_cli, vault):
    """The key is read from Vault when the API is called: the reference itself never goes
    to Runpod."""
    vault.secrets[("secret", "overbrainer/runpod")] = {"api_key": API_KEY}
    env = {
        "OVERBRAINER_RUNPOD__API_KEY": "vault:secret/overbrainer/runpod#api_key",
        "VAULT_ADDR": vault.address,
        "VAULT_TOKEN": VAULT_TOKEN,
    }
    result = run_cli("pod", "ls", env=env)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "pod: no overbrainer pod on this account\n"
    assert [path for path, _ in vault.requests] == ["/v1/secret/data/overbrainer/runpod"]
    refused = run_cli("pod", "ls", env={**env, "VAULT_TOKEN": "s.wrong"})
    assert refused.exit_code == 1
    assert "runpod.api_key: vault denied access to secret/overbrainer/runpod" in refused.stderr
