"""``--help`` lists the plugins' commands (``pod``) from what the last load of the plugins
kept, without loading a plugin itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = str(Path(sys.executable).parent / "overbrainer")
CHECK = (
    "import sys; sys.argv = ['overbrainer', '--help']\n"
    "from overbrainer.cli import main\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print('loaded' if 'overbrainer_runpod' in sys.modules else 'not loaded')\n"
)


def help_text() -> tuple[str, str]:
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                          env=os.environ, check=True)
    *text, loaded = done.stdout.splitlines()
    return "\n".join(text), loaded


def test_pod_is_listed_once_the_plugins_were_loaded(project_dir):
    text, loaded = help_text()
    assert "  pod " not in text  # nothing kept yet: a fresh cache lists no plugin command
    subprocess.run([SCRIPT, "-C", str(project_dir), "plugins"], capture_output=True,
                   env=os.environ, check=True)
    text, loaded = help_text()
    assert loaded == "not loaded"
    [line] = [line for line in text.splitlines() if line.startswith("  pod ")]
    assert "Runpod pods: list and delete them" in line


def test_another_set_of_plugins_lists_its_own(project_dir, monkeypatch):
    subprocess.run([SCRIPT, "-C", str(project_dir), "plugins"], capture_output=True,
                   env=os.environ, check=True)
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", "local")
    text, _ = help_text()
    assert "  pod " not in text


def test_a_plugins_command_is_looked_up_among_the_projects_plugins(
    run_cli, project_dir, monkeypatch
):
    """The project's ``.env`` chooses the plugins for a plugin's command as for the core's."""
    monkeypatch.delenv("OVERBRAINER_LOAD_PLUGINS")
    env = project_dir / ".env"
    env.write_text("OVERBRAINER_LOAD_PLUGINS=local,runpod\n", encoding="utf-8")
    assert run_cli("pod", "--help").exit_code == 0
    env.write_text("OVERBRAINER_LOAD_PLUGINS=local\n", encoding="utf-8")
    result = run_cli("pod", "--help")
    assert result.exit_code == 2
    assert "No such command 'pod'" in result.stderr
