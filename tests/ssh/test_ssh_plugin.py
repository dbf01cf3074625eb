"""The ``ssh`` target through the plugin manager and the settings, as the CLI builds it."""

from __future__ import annotations

import pytest

from overbrainer.cli.context import App
from overbrainer.config.load import ConfigError
from overbrainer.job.executor import HostExecutor

TARGET = '\n[targets.gpu]\nkind = "ssh"\n'


def test_the_host_comes_from_the_environment_and_the_hooks_serve_the_executor(
    project_dir, ssh_target_env, sshd
):
    (project_dir / "overbrainer.toml").write_text(
        (project_dir / "overbrainer.toml").read_text() + TARGET
    )
    alias = ssh_target_env("gpu")
    app = App(project_dir)
    target = app.settings.targets["gpu"]
    assert target.host == alias
    hook = app.plugins.hook
    executor = hook.create_executor(name="gpu", target=target, project=app.project, run=None)
    assert isinstance(executor, HostExecutor)
    try:
        run_dir = hook.claim_run_dir(executor=executor, run_id="demo_20260101-000000")
        assert run_dir == f"{sshd.home}/overbrainer/demo_20260101-000000"
        assert (sshd.home / "overbrainer" / "demo_20260101-000000" / ".claim").is_file()
    finally:
        hook.release_executor(executor=executor, run=None, outcome=None)
    assert executor.host._connection is None


def test_a_host_in_the_config_file_is_refused(project_dir):
    (project_dir / "overbrainer.toml").write_text(
        (project_dir / "overbrainer.toml").read_text() + TARGET + 'host = "example.org"\n'
    )
    with pytest.raises(ConfigError, match=r"targets\.gpu\.host: must be set through env"):
        App(project_dir).settings  # noqa: B018 - loading is the point
