"""``overbrainer --help`` lists the commands from ``SUMMARIES`` without importing them:
the same text as the commands' own help gives, at any width."""

from __future__ import annotations

import subprocess
import sys

import click
from click.testing import CliRunner

from overbrainer.cli import COMMANDS, SUMMARIES, LazyGroup, cli


def test_every_summary_is_the_first_paragraph_of_its_commands_help():
    assert set(SUMMARIES) == set(COMMANDS)
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None
        for limit in (20, 45, 60, 200):
            summary = click.Command(name, help=SUMMARIES[name])
            assert summary.get_short_help_str(limit) == command.get_short_help_str(limit), name


def test_the_help_is_the_same_with_the_commands_imported_or_not():
    lazy = CliRunner().invoke(cli, ["--help"], terminal_width=80).output
    loaded = LazyGroup(name="overbrainer", lazy=COMMANDS)
    for name in COMMANDS:
        loaded.get_command(click.Context(loaded), name)
    loaded.params, loaded.help, loaded.callback = cli.params, cli.help, cli.callback
    eager = CliRunner().invoke(loaded, ["--help"], terminal_width=80).output
    assert lazy.split("Commands:")[1] == eager.split("Commands:")[1]
    assert "train  " in lazy


def test_help_imports_no_command_module():
    code = (
        "import sys\n"
        "from overbrainer.cli import cli\n"
        "try:\n"
        "    cli(['--help'], prog_name='overbrainer')\n"
        "except SystemExit:\n"
        "    pass\n"
        "names = sorted(m for m in sys.modules if m.startswith('overbrainer.cli.'))\n"
        "print(names, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip() == "[]"
