"""``overbrainer completion SHELL``: the shell completion script, printed."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")


@click.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script of SHELL: commands, options, run ids and topics.

    Example: overbrainer completion bash > ~/.local/share/bash-completion/completions/overbrainer
    (zsh: into a directory of $fpath as _overbrainer; fish: ~/.config/fish/completions/).
    """
    from click.shell_completion import get_completion_class

    from overbrainer.cli import cli

    found = get_completion_class(shell)
    assert found is not None  # every choice is one of click's shells
    click.echo(found(cli, {}, "overbrainer", "_OVERBRAINER_COMPLETE").source())
