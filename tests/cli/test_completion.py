"""``overbrainer completion SHELL`` prints a script that completes commands, run ids and
topics, as the shell asks for them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from overbrainer.cli import cli

SCRIPT = str(Path(sys.executable).parent / "overbrainer")


@pytest.mark.parametrize(("shell", "marker"), [("bash", "complete -o nosort -F"),
                                               ("zsh", "#compdef overbrainer"),
                                               ("fish", "complete --no-files --command")])
def test_each_shell_gets_its_script(shell, marker):
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.stderr
    assert marker in result.stdout
    assert "_OVERBRAINER_COMPLETE" in result.stdout


def test_an_unknown_shell_is_refused():
    result = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert result.exit_code == 2
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.stderr


def test_the_script_s_protocol_completes_commands_and_topics(project_dir):
    env = {**os.environ, "_OVERBRAINER_COMPLETE": "bash_complete"}
    commands = subprocess.run(
        [SCRIPT], env={**env, "COMP_WORDS": "overbrainer ru", "COMP_CWORD": "1"},
        cwd=project_dir, capture_output=True, text=True, check=True,
    )
    assert commands.stdout.split() == ["plain,run", "plain,runs"]
    topics = subprocess.run(
        [SCRIPT], env={**env, "COMP_WORDS": "overbrainer answers --topic ow", "COMP_CWORD": "3"},
        cwd=project_dir / ".", capture_output=True, text=True, check=True,
    )
    assert topics.stdout.split() == ["plain,ownership"]
