"""Fixtures every test shares: an isolated environment, a project, the CLI."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fake_provider import FakeProvider
from overbrainer.cli import cli

OUR_PLUGINS = "local,ssh,runpod"

MINIMAL_CONFIG = """\
[project]
name = "Demo Project"

[[topics]]
name = "ownership"
subtopics = 2
questions_per_subtopic = 3

[providers.main]
protocol = "openai"

[roles.generator]
provider = "main"
model = "gen-model"

[roles.parent]
provider = "main"
model = "parent-model"
reasoning = true
"""


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No test sees the developer's settings, keys, ~/.ssh or third-party plugins."""
    for name in list(os.environ):
        prefixed = name.startswith(("OVERBRAINER_", "VAULT_", "RUNPOD_"))
        if prefixed or name in ("NO_COLOR", "HF_TOKEN"):
            monkeypatch.delenv(name)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", OUR_PLUGINS)
    monkeypatch.setenv("NO_COLOR", "1")
    return home


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A project directory with a minimal, valid overbrainer.toml."""
    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "overbrainer.toml").write_text(MINIMAL_CONFIG, encoding="utf-8")
    return directory


@dataclass
class Cli:
    """Runs the CLI in-process on one project directory."""

    project_dir: Path

    def __call__(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None
    ) -> Result:
        runner = CliRunner()
        return runner.invoke(
            cli, ["-C", str(self.project_dir), *args], input=input, env=env, catch_exceptions=False
        )


@pytest.fixture
def run_cli(project_dir: Path) -> Cli:
    return Cli(project_dir)


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A loopback LLM provider (OpenAI and Anthropic protocols), stopped at teardown."""
    server = FakeProvider().start()
    yield server
    server.stop()
