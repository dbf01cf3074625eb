"""The command line as a whole: version, exit codes, the installed console script, start-up
imports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from overbrainer import __version__

# What `overbrainer --help` must not pay for; pluggy alone costs about 10 ms.
HEAVY = (
    "fabric",
    "paramiko",
    "runpod",
    "aiohttp",
    "pydantic",
    "hvac",
    "requests",
    "pluggy",
    "loguru",
    "matplotlib",
    "textual",
    "prometheus_client",
    "numpy",
    "usearch",
    "numkong",
)


def console_script() -> str:
    """The installed ``overbrainer`` script of the environment running the tests."""
    script = Path(sys.executable).parent / "overbrainer"
    assert script.is_file(), f"{script} is missing: run `uv sync`"
    return str(script)


def run_script(*args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        [console_script(), *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version(run_cli):
    result = run_cli("--version")
    assert result.exit_code == 0
    assert result.stdout == f"overbrainer, version {__version__}\n"


def test_help_lists_the_commands(run_cli):
    result = run_cli("--help")
    assert result.exit_code == 0
    commands = re.findall(r"^  (\w+)\s", result.stdout.split("Commands:")[1], re.MULTILINE)
    assert commands == [
        "answers", "batches", "compare", "completion", "config", "dataset", "export", "history",
        "init", "log", "migrate",
        "plan", "plugins", "providers", "push", "questions", "run", "runs", "serve", "split",
        "subtopics", "train", "tui", "watch",
    ]
    assert "-C, --project-dir DIRECTORY" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["frobnicate"], "Error: No such command 'frobnicate'."),
        (["train", "attach"], "Error: Missing argument 'RUN_ID'."),
        (["config", "check", "--bogus"], "Error: No such option '--bogus'."),
        (["runs", "logs", "x", "--tail", "many"], "Error: Invalid value for '--tail'"),
    ],
)
def test_usage_errors_exit_2(run_cli, args, message):
    result = run_cli(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert message in result.stderr


def test_user_errors_print_error_and_exit_1(run_cli):
    result = run_cli("runs", "logs", "nothing_20260101-000000")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "error: no run nothing_20260101-000000 in runs/\n"


def test_an_error_message_is_redacted(run_cli):
    from overbrainer.redact import register_secret

    register_secret("abcd-resolved-secret")
    result = run_cli("runs", "logs", "abcd-resolved-secret")
    assert result.exit_code == 1
    assert result.stderr == "error: no run *** in runs/\n"


def test_the_console_script_runs_a_command(project_dir):
    (project_dir / ".env").write_text("OVERBRAINER_PROVIDERS__MAIN__BASE_URL=http://127.0.0.1:9/v1\n")
    result = run_script("config", "check", cwd=project_dir)
    assert result.returncode == 0, result.stderr
    assert "project.name = Demo Project" in result.stdout.splitlines()
    assert result.stderr == ""


def test_the_console_script_reports_errors(project_dir, tmp_path):
    result = run_script("-C", str(tmp_path / "nowhere"), "config", "check", cwd=project_dir)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"error: no overbrainer.toml in {tmp_path / 'nowhere'}: "
        "create one with `overbrainer init`\n"
    )
    result = run_script("nonsense", cwd=project_dir)
    assert result.returncode == 2
    assert "No such command 'nonsense'" in result.stderr


def imported_modules(stderr: str) -> set[str]:
    """The modules ``-X importtime`` reported as imported."""
    modules = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            modules.add(name.split(".")[0])
    return modules


def test_help_imports_no_heavy_library(project_dir):
    result = run_script("--help", cwd=project_dir, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert result.returncode == 0, result.stderr
    assert "Usage: overbrainer" in result.stdout
    modules = imported_modules(result.stderr)
    assert "click" in modules  # the report works
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_importing_the_cli_imports_no_heavy_library():
    code = "import json, sys, overbrainer.cli; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    modules = {name.split(".")[0] for name in json.loads(result.stdout)}
    assert "overbrainer" in modules
    assert modules.isdisjoint(HEAVY), sorted(modules & set(HEAVY))


def test_the_project_directory_may_come_after_the_subcommand(tmp_path, minimal_config):
    from click.testing import CliRunner

    from overbrainer.cli import cli
    from overbrainer.pipeline.history import append_history

    project = tmp_path / "elsewhere"
    project.mkdir()
    (project / "overbrainer.toml").write_text(minimal_config)
    append_history(project, {"stage": "subtopics", "started_at": "2026-01-02T03:04:05Z",
                             "status": "ok", "done": 3, "cost": None})
    for args in (["history", "-C", str(project)], ["history", f"--project-dir={project}"],
                 ["-C", str(project), "history"], ["history", f"-C{project}"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, (args, result.stderr)
        assert result.stdout.startswith("subtopics  1 run(s), 3 done"), (args, result.stdout)


def test_the_plugin_manager_leaves_the_job_code_and_split_unloaded():
    # A stage asking a provider starts faster without them (benchmarks/answers.py --cold).
    code = (
        "import json, sys\n"
        "from overbrainer.plugins import load_plugins\n"
        "import overbrainer.pipeline.runner, overbrainer.cli.stages\n"
        "plugins = load_plugins({'OVERBRAINER_LOAD_PLUGINS': ''})\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    modules = set(json.loads(result.stdout))
    assert "overbrainer.job.hooks" in modules  # the built-in plugin is registered
    unloaded = {"overbrainer.job.executor", "overbrainer.job.record", "overbrainer.pipeline.split"}
    assert modules.isdisjoint(unloaded), sorted(modules & unloaded)
