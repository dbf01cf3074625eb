"""A project wired to the loopback provider, with prompts the fake model follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from fake_provider import FakeProvider
from overbrainer.providers import retry

API_KEY = "sk-test-0123456789abcdefSECRET"

PIPELINE_CONFIG = """\
[project]
name = "Demo"

[[topics]]
name = "ownership"
subtopics = 2
questions_per_subtopic = 3

[[topics]]
name = "lifetimes"
subtopics = 1
questions_per_subtopic = 2

[providers.main]
protocol = "openai"

[roles.generator]
provider = "main"
model = "gen-model"

[roles.parent]
provider = "main"
model = "parent-model"
reasoning = true

[pipeline]
concurrency = 4
max_retries = 2
question_batch_size = 2
"""

TEST_PROMPTS = {
    "subtopics.txt": "subtopics|{{ topic }}|{{ count }}",
    "questions.txt": "questions|{{ topic }}|{{ subtopic }}|{{ count }}",
    "answer_system.txt": "system|{{ topic }}",
}


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff steps of a millisecond: retries cost no real seconds (Retry-After still does)."""
    monkeypatch.setattr(retry, "BACKOFF_UNIT", 0.001)


def write_project(directory: Path, url: str, config: str = PIPELINE_CONFIG) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "overbrainer.toml").write_text(config, encoding="utf-8")
    (directory / ".env").write_text(
        f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={url}\n"
        f"OVERBRAINER_PROVIDERS__MAIN__API_KEY={API_KEY}\n",
        encoding="utf-8",
    )
    prompts = directory / "prompts"
    prompts.mkdir(exist_ok=True)
    for name, text in TEST_PROMPTS.items():
        (prompts / name).write_text(text, encoding="utf-8")
    return directory


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeProvider) -> Path:
    """The pipeline project: two topics, one openai-protocol provider (the loopback one)."""
    return write_project(tmp_path / "project", provider.url)
