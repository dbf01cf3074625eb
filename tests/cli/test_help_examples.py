"""Every command's ``--help`` ends with an example of it, the plugins' commands included."""

from __future__ import annotations

import click
from click.testing import CliRunner

from overbrainer.cli import COMMANDS, cli


def leaves(command: click.Command, path: list[str]):
    if isinstance(command, click.Group):
        if getattr(command, "invoke_without_command", False):
            yield path, command
        for name in command.list_commands(click.Context(command)):
            yield from leaves(command.get_command(click.Context(command), name), [*path, name])
    else:
        yield path, command


def test_every_command_s_help_has_an_example(project_dir):
    names = [*COMMANDS, "pod"]  # pod: the runpod plugin's
    ctx = click.Context(cli)
    found = []
    for name in names:
        command = cli.get_command(ctx, name)
        assert command is not None, name
        for path, _ in leaves(command, [name]):
            result = CliRunner().invoke(cli, ["-C", str(project_dir), *path, "--help"])
            assert result.exit_code == 0, (path, result.output)
            assert "Example: overbrainer " in result.output or "Example: cd " in result.output, path
            found.append(" ".join(path))
    assert {"train", "runs ls", "pod gpus", "dataset rm", "providers check"} <= set(found)
