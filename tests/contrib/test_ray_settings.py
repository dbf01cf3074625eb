"""The ray target's settings, in the core's environment (no Ray needed: the package imports
it only when it talks to a cluster)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from tests.helpers.project import LOCAL_PROVIDER

RAY_TABLE = """
[targets.cluster]
kind = "ray"
storage = "/srv/overbrainer"
"""


def _configure(run_cli, extra: str) -> None:
    config = run_cli.project_dir / "overbrainer.toml"
    config.write_text(config.read_text() + RAY_TABLE + extra)


def test_a_ray_target_is_listed_and_loaded_with_its_defaults(ray_installed, run_cli):
    env = {"OVERBRAINER_LOAD_PLUGINS": "local,ray", **LOCAL_PROVIDER}
    assert "ray  overbrainer-ray 0.1.0  kinds: ray" in run_cli("plugins", env=env).stdout
    _configure(run_cli, 'venv = "/opt/axolotl"\nnum_gpus = 1\n')
    result = run_cli("config", "check", env=env)
    assert result.exit_code == 0, result.stderr
    assert "targets.cluster.address = http://127.0.0.1:8265" in result.stdout
    assert "targets.cluster.num_gpus = 1.0" in result.stdout
    assert "targets.cluster.workers = 1" in result.stdout


def test_the_address_is_overridden_by_the_environment(ray_installed, run_cli):
    _configure(run_cli, "")
    result = run_cli(
        "config",
        "check",
        env={
            "OVERBRAINER_LOAD_PLUGINS": "local,ray",
            "OVERBRAINER_TARGETS__CLUSTER__ADDRESS": "http://head.internal:8265",
            **LOCAL_PROVIDER,
        },
    )
    assert result.exit_code == 0, result.stderr
    assert "targets.cluster.address = http://head.internal:8265" in result.stdout


def test_bad_ray_settings_are_each_named(ray_installed, run_cli):
    _configure(
        run_cli,
        'address = "head:6379"\nworkers = 0\n'
        '[targets.cluster.runtime_env]\nworking_dir = "."\n'
        '[targets.cluster.runtime_env.env_vars]\nHF_TOKEN = "hf_abcdef"\n',
    )
    result = run_cli("config", "check", env={"OVERBRAINER_LOAD_PLUGINS": "local,ray"})
    assert result.exit_code == 1
    error = result.stderr
    assert error.startswith("error: invalid configuration:\n")
    assert "targets.cluster.workers: must be at least 1" in error
    assert "targets.cluster.address: must be the dashboard's http:// or https:// address" in error
    assert "working_dir is managed by the ray target: the job runs in storage" in error
    assert "env_vars.HF_TOKEN looks like a secret: the Ray dashboard shows runtime_env" in error
    assert "hf_abcdef" not in result.stdout + error  # values are never echoed


def test_venv_and_python_together_are_refused(ray_installed, run_cli):
    _configure(run_cli, 'venv = "/opt/a"\npython = "/usr/bin/python3"\n')
    result = run_cli("config", "check", env={"OVERBRAINER_LOAD_PLUGINS": "local,ray"})
    assert result.exit_code == 1
    assert "targets.cluster: give venv or python, not both" in result.stderr


def test_importing_the_plugin_does_not_import_ray(ray_installed):
    probe = "import sys, overbrainer_ray; print('ray' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": ray_installed},
    )
    assert out.stdout.strip() == "False"


def test_more_than_one_worker_switches_on_axolotls_ray_train(ray_installed):
    import yaml

    from overbrainer_ray.workers import ray_train_settings

    settings = yaml.safe_load("base_model: m\n" + ray_train_settings(2, "cpu"))
    assert settings == {
        "base_model": "m",
        "use_ray": True,
        "ray_num_workers": 2,
        "resources_per_worker": {"CPU": 1},
    }
    assert yaml.safe_load(ray_train_settings(4, "gpu"))["resources_per_worker"] == {"GPU": 1}


def test_without_ray_a_command_that_needs_it_says_what_to_install(ray_installed):
    if importlib.util.find_spec("ray") is not None:
        pytest.skip("Ray is installed here")
    from overbrainer.plugin import UserError
    from overbrainer_ray.client import RayClient

    with pytest.raises(UserError, match="target `cluster` needs Ray's Jobs client") as error:
        RayClient("cluster", "http://127.0.0.1:8265").info("job")
    assert 'install overbrainer-ray with its dependencies (pip install "overbrainer-ray")' in str(
        error.value
    )


def test_every_secret_looking_name_is_kept_off_the_dashboard():
    from overbrainer_ray.target import SECRET_NAME

    for name in ("OPENAI_KEY", "DB_PASS", "SERVICE_AUTH", "GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY",
                 "WANDB_API_KEY", "MY_APIKEY", "PRIVATE_PEM", "SESSION_COOKIE", "DB_PASSWORD",
                 "KEY", "SIGNING_KEYS"):
        assert SECRET_NAME.search(name), name
    for name in ("OMP_NUM_THREADS", "NCCL_DEBUG", "HF_HOME", "SSL_CERT_FILE", "MONKEY_MODE"):
        assert not SECRET_NAME.search(name), name
