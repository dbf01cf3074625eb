"""The README's install command, as written, and the "Use" commands from a directory outside
the clone with the command it installs (marker `real`: it asks the package index, as a user's
install does; the uv cache makes it take seconds)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
UV = shutil.which("uv")
UV_CACHE = (
    subprocess.run([UV, "cache", "dir"], capture_output=True, text=True, check=False).stdout.strip()
    if UV
    else ""
)
"""The developer's uv cache, read before a test's HOME is a temporary one."""

pytestmark = pytest.mark.real

PROVIDER = {
    "OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL": "http://127.0.0.1:9/api/v1",
    "OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY": "sk-or-test-0123456789",
}
"""The provider ``init`` writes, at a closed port on this machine: nothing is asked of it."""


def install_command() -> list[str]:
    """The README's one ``uv tool install`` line."""
    [line] = [
        line.strip()
        for line in README.read_text(encoding="utf-8").splitlines()
        if line.startswith("    uv tool install ")
    ]
    return shlex.split(line)


def test_the_install_command_gives_an_overbrainer_that_works_outside_the_clone(tmp_path):
    assert UV, "uv is not on PATH"
    bin_dir = tmp_path / "bin"
    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(bin_dir),
        "UV_CACHE_DIR": UV_CACHE,
    }
    command = install_command()
    assert command[:3] == ["uv", "tool", "install"]
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    assert (bin_dir / "overbrainer").is_file()

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    use = {**env, **PROVIDER, "PATH": f"{bin_dir}:{os.environ['PATH']}"}

    def overbrainer(*args: str, cwd: Path = elsewhere) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["overbrainer", *args], cwd=cwd, env=use, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip

    init = overbrainer("init", "my-project", "--topic", "SQL query optimisation")
    assert init.returncode == 0, init.stderr
    hint = init.stdout.splitlines()[-1].strip()
    assert hint.startswith("overbrainer -C ")
    # The hint, as printed, from where the user stands.
    checked = overbrainer(*shlex.split(hint)[1:])
    assert checked.returncode == 0, checked.stderr
    assert "SQL query optimisation" in checked.stdout
    project = elsewhere / "my-project"
    # The README's Use lines, from inside the project.
    plugins = overbrainer("plugins", "--json", cwd=project)
    assert plugins.returncode == 0, plugins.stderr
    assert {"local", "ssh", "runpod"} <= {p["name"] for p in json.loads(plugins.stdout)}
    plan = overbrainer("plan", cwd=project)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.startswith("stage ")
    assert "subtopics " in plan.stdout
