"""The README's read-only commands, run as the README writes them: each optional flag with
and without, RUN_ID as `latest` and as a prefix, `--json` parsed."""

from __future__ import annotations

import json
import re
import shlex
from itertools import chain
from pathlib import Path

import pytest
from tests.helpers.project import LOCAL_PROVIDER
from tests.helpers.seeing_runs import write_metrics, write_run

README = Path(__file__).parents[2] / "README.md"
READ_ONLY = ("runs ls", "runs show", "runs logs", "history", "config check", "plugins")
RUN = "demo_20260922-143005"


def readme_commands() -> list[str]:
    """The indented `overbrainer …` lines of the README that only read, comments cut."""
    lines = []
    for line in README.read_text(encoding="utf-8").splitlines():
        if not line.startswith("    overbrainer "):
            continue
        command = line.split("  #", 1)[0].strip()
        words = command.removeprefix("overbrainer ")
        if words.startswith(READ_ONLY) and "--pod" not in words:
            lines.append(command)
    return lines


def variants(command: str) -> list[list[str]]:
    """``command`` with its optional parts left out, then with each one: a bare flag (but
    --follow, which waits), ``--tail N`` as ``--tail 1``; RUN_ID as `latest` and as a
    prefix (and left out, where it is optional)."""
    groups = [g for g in re.findall(r"\[([^\]]*)\]", command) if g != "--follow"]
    stripped = re.sub(r"\s*\[[^\]]*\]", "", command)
    words = shlex.split(stripped)[1:]
    runs: list[str | None] = ["latest", RUN[:8]] if "RUN_ID" in command else [None]
    if "[RUN_ID]" in command:
        runs.append(None)
    out = []
    for run_id in runs:
        base = words + ([run_id] if run_id else [])
        out.append(base)
        for group in groups:
            if group != "RUN_ID":
                out.append([*base, *(w if w.startswith("-") else "1" for w in group.split())])
    return out


def test_the_readme_shows_each_of_them():
    commands = [c.removeprefix("overbrainer ") for c in readme_commands()]
    for words in READ_ONLY:
        assert any(c.startswith(words) for c in commands), words


@pytest.mark.parametrize(
    "args", list(chain.from_iterable(variants(c) for c in readme_commands())), ids=" ".join
)
def test_a_readme_command_runs_as_written(run_cli, project_dir, args):
    directory = write_run(project_dir, RUN)
    write_metrics(directory, range(0, 11), max_steps=10, evals=(10,))
    (directory / "job.log").write_text("the job's log\n")
    result = run_cli(*args, env=LOCAL_PROVIDER)
    assert result.exit_code == 0, (args, result.stderr)
    if "--json" in args:
        json.loads(result.stdout)
    if args[0] == "runs" and args[1] != "ls":
        assert RUN in result.stdout or result.stdout == "the job's log\n"
