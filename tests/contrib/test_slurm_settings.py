"""The slurm target's settings and what it submits, without a cluster."""

from __future__ import annotations

import pytest
from tests.helpers.project import LOCAL_PROVIDER

SLURM_TABLE = """
[targets.cluster]
kind = "slurm"
spool = "/shared/overbrainer"
"""
ENV = {"OVERBRAINER_LOAD_PLUGINS": "local,slurm", **LOCAL_PROVIDER}


def _configure(run_cli, extra: str) -> None:
    config = run_cli.project_dir / "overbrainer.toml"
    config.write_text(config.read_text() + SLURM_TABLE + extra)


def test_a_slurm_target_is_listed_and_loaded_with_its_defaults(slurm_installed, run_cli):
    assert "slurm  overbrainer-slurm 0.1.0  kinds: slurm" in run_cli("plugins", env=ENV).stdout
    _configure(run_cli, 'venv = "/opt/axolotl"\npartition = "gpu"\ntime_limit = "4:00:00"\n')
    result = run_cli("config", "check", env=ENV)
    assert result.exit_code == 0, result.stderr
    assert "targets.cluster.partition = gpu" in result.stdout
    assert "targets.cluster.time_limit = 4:00:00" in result.stdout
    assert "targets.cluster.snapshot_margin_s = 300" in result.stdout


def test_bad_slurm_settings_are_each_named(slurm_installed, run_cli):
    _configure(
        run_cli,
        'time_limit = "four hours"\ngpus = -1\nlogin = "-oProxyCommand=x"\n'
        'sbatch_args = ["--export=ALL", "--mem=4G", "-o/tmp/x", "--requeue"]\n'
        'pass_env = ["HF_HOME", "WANDB_API_KEY"]\nvenv = "/a"\npython = "/b"\n',
    )
    result = run_cli("config", "check", env=ENV)
    assert result.exit_code == 1
    error = result.stderr
    assert error.startswith("error: invalid configuration:\n")
    assert "targets.cluster.time_limit: must be in Slurm's --time format" in error
    assert "targets.cluster.gpus: must be at least 0" in error
    assert "targets.cluster.login: must be user@host or an ssh alias" in error
    assert (
        "targets.cluster.sbatch_args: --export=ALL, -o/tmp/x, --requeue: set by the slurm target"
    ) in error
    assert "targets.cluster.pass_env: WANDB_API_KEY looks like a secret" in error


def test_venv_and_python_together_are_refused(slurm_installed, run_cli):
    _configure(run_cli, 'venv = "/opt/a"\npython = "/usr/bin/python3"\n')
    result = run_cli("config", "check", env=ENV)
    assert result.exit_code == 1
    assert "targets.cluster: give venv or python, not both" in result.stderr


def test_the_batch_script_and_options_hold_the_targets_settings_and_no_secret(slurm_installed):
    from overbrainer_slurm.batch import batch_script, sbatch_options
    from overbrainer_slurm.target import SlurmTarget

    target = SlurmTarget.model_validate(
        {
            "kind": "slurm",
            "spool": "/shared/ob",
            "venv": "~/venvs/axolotl",
            "partition": "gpu",
            "account": "lab",
            "qos": "high",
            "gpus": 2,
            "time_limit": "1-00",
            "sbatch_args": ["--mem=64G"],
            "pass_env": ["HF_*"],
        }
    )
    env = {"HF_HOME": "/cache/hf it's", "HF_TOKEN": "hf_secret", "PATH": "/bin"}
    assert sbatch_options(target, "r1", "/shared/ob/r1") == [
        "--job-name=overbrainer-r1",
        "--chdir=/shared/ob/r1",
        "--output=/shared/ob/r1/job.log",
        "--open-mode=append",
        "--export=NONE",
        "--no-requeue",
        "--signal=B:TERM@300",
        "--partition=gpu",
        "--account=lab",
        "--qos=high",
        "--gres=gpu:2",
        "--time=1-00",
        "--mem=64G",
    ]
    # HF_TOKEN matches the glob but looks like a secret: it reaches the job by file only.
    assert batch_script(target, "r1", "/shared/ob/r1", env) == (
        "#!/bin/sh\n"
        "# overbrainer run r1: the job's runner, in its directory on the node.\n"
        'export PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"\n'
        "export HF_HOME='/cache/hf it'\"'\"'s'\n"
        "cd /shared/ob/r1 || exit 1\n"
        'exec "$HOME"/venvs/axolotl/bin/python run_job.py\n'
    )
    cpu = SlurmTarget.model_validate({"kind": "slurm", "spool": "/s", "device": "cpu"})
    assert not any(option.startswith("--gres") for option in sbatch_options(cpu, "r", "/s/r"))


def test_a_managed_option_is_refused_however_sbatch_would_abbreviate_it(slurm_installed):
    from overbrainer_slurm.target import SlurmTarget

    for arg in ("--requ", "--sig=B:USR1@5", "--out=/tmp/x", "--chd=/", "--jo=x", "-o/tmp/x"):
        with pytest.raises(ValueError, match="set by the slurm target itself"):
            SlurmTarget.model_validate({"kind": "slurm", "spool": "/s", "sbatch_args": [arg]})
    kept = SlurmTarget.model_validate(
        {"kind": "slurm", "spool": "/s", "sbatch_args": ["--mem=4G", "--constraint=a100"]}
    )
    assert kept.sbatch_args == ["--mem=4G", "--constraint=a100"]


def test_pass_env_never_writes_a_secret_named_or_valued_variable(slurm_installed):
    from overbrainer.plugin.files import register_secret
    from overbrainer_slurm.target import SlurmTarget

    target = SlurmTarget.model_validate({"kind": "slurm", "spool": "/s", "pass_env": ["*"]})
    register_secret("s3cr3t-registered-value")
    env = {
        "OPENAI_KEY": "sk-live-abc",
        "DB_PASS": "hunter2",
        "SIGNING_KEY": "k",
        "AWS_ACCESS_KEY_ID": "AKIA1",
        "GITHUB_AUTH": "gh",
        "INNOCENT": "s3cr3t-registered-value",
        "HF_HOME": "/cache/hf",
    }
    assert target.passed_env(env) == {"HF_HOME": "/cache/hf"}
