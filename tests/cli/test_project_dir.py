"""Which directory is the project: ``-C DIR``, or the first one upwards holding
overbrainer.toml; a command that needs a project and finds none says so and fails."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from overbrainer.cli import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


@pytest.mark.parametrize("command", [["runs", "ls"], ["history"], ["config", "check"],
                                     ["train", "attach", "x"], ["dataset", "rm", "x"]])
def test_a_missing_directory_is_an_error_not_silence(tmp_path, command):
    missing = tmp_path / "nonexistent"
    result = invoke("-C", str(missing), *command)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: no overbrainer.toml in {missing}: create one with `overbrainer init`\n"
    )


@pytest.mark.parametrize("command", [["runs", "ls"], ["history"], ["runs", "show", "latest"]])
def test_outside_any_project_a_command_says_so(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    result = invoke(*command)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: no overbrainer.toml in {tmp_path} or any directory above it: create a "
        "project with `overbrainer init DIR`, or name one with -C DIR\n"
    )


def test_the_project_is_found_from_a_directory_inside_it(project_dir, monkeypatch):
    inside = project_dir / "data" / "deeper"
    inside.mkdir(parents=True)
    monkeypatch.chdir(inside)
    result = invoke("config", "check", "--help")
    assert result.exit_code == 0
    result = invoke("runs", "ls")
    assert result.exit_code == 0, result.stderr
    result = invoke("history")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "no stage has run yet\n"
    check = invoke("config", "check")
    assert "project.name = Demo Project" in check.stdout.splitlines()


def test_init_and_plugins_need_no_project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("plugins")
    assert result.exit_code == 0, result.stderr
    result = invoke("init", "fresh")
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "fresh" / "overbrainer.toml").is_file()
    monkeypatch.chdir(tmp_path / "fresh")
    assert invoke("runs", "ls").exit_code == 0


def test_help_works_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for args in (["--help"], ["runs", "--help"], ["runs", "ls", "--help"]):
        assert invoke(*args).exit_code == 0


def test_a_project_above_that_belongs_to_another_user_is_not_used(tmp_path, monkeypatch):
    import os

    parent = tmp_path / "shared"
    inside = parent / "mine"
    inside.mkdir(parents=True)
    config = parent / "overbrainer.toml"
    config.write_text('[project]\nname = "planted"\n')
    if os.getuid() != 0:
        pytest.skip("giving a file another owner needs root (CI runs as root)")
    os.chown(config, 12345, 12345)
    monkeypatch.chdir(inside)
    result = invoke("runs", "ls")
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: {config} belongs to another user: not used as this directory's project; "
        f"name it with -C {parent} if it is to be\n"
    )


@pytest.mark.parametrize("explicit", [False, True])
def test_a_fifo_settings_file_is_named_not_called_missing(tmp_path, monkeypatch, explicit):
    import os

    os.mkfifo(tmp_path / "overbrainer.toml")
    monkeypatch.chdir(tmp_path)
    args = ["-C", str(tmp_path)] if explicit else []
    result = invoke(*args, "config", "check")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "overbrainer.toml is not a regular file (a FIFO, a device): move it away, or make it "
        "the project's settings\n"
    )
    assert "no overbrainer.toml" not in result.stderr
