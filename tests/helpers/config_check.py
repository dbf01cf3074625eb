"""What `config check` and every command that loads overbrainer.toml say of a bad one."""

from __future__ import annotations

from click.testing import Result


def problems(result: Result) -> list[str]:
    """The indented problem lines under ``error: invalid configuration:``."""
    lines = result.stderr.splitlines()
    assert lines[0] == "error: invalid configuration:", result.stderr
    assert all(line.startswith("  ") for line in lines[1:])
    return [line.strip() for line in lines[1:]]
