"""The minimal project every test starts from, the settings that keep it off the network,
and the CLI run in-process on it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner, Result

from overbrainer.cli import cli

OUR_PLUGINS = "local,ssh,runpod"


CLOSED_HUB = "http://127.0.0.1:9"


DEFAULT_BASE_MODEL = "Qwen/Qwen3-0.6B"


LOCAL_PROVIDER = {"OVERBRAINER_PROVIDERS__MAIN__BASE_URL": "http://127.0.0.1:9/v1"}
"""A URL for MINIMAL_CONFIG's provider that needs no key (a server on this machine, never
asked), so that ``config check`` has no provider problem to report."""


OPENROUTER = {
    "OVERBRAINER_PROVIDERS__OPENROUTER__BASE_URL": "https://openrouter.example.invalid/api/v1",
    "OVERBRAINER_PROVIDERS__OPENROUTER__API_KEY": "sk-or-test-0123456789",
}
"""The URL and key of the provider ``init`` writes."""


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


def cached_model(home: Path, model: str) -> Path:
    """Put ``model`` in the Hugging Face cache under ``home`` (its config only)."""
    snapshot = home / ".cache/huggingface/hub" / f"models--{model.replace('/', '--')}"
    config = snapshot / "snapshots" / ("0" * 40) / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("{}", encoding="utf-8")
    return config


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


def run(project_dir: Path, *args: str) -> Result:
    """The CLI in this process, in ``project_dir``, its exceptions raised rather than caught."""
    return CliRunner().invoke(cli, ["-C", str(project_dir), *args], catch_exceptions=False)
