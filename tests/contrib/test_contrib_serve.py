"""Slurm and Ray do not serve: a served provider on such a target is refused as the command
starts, by its setting, before any stage asks (and pays) another provider."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.helpers.fake_provider import FakeProvider
from tests.helpers.pipeline_data import lines, write_project

SERVED_ON = """\
[project]
name = "Demo"

[[topics]]
name = "ownership"
subtopics = 2
questions_per_subtopic = 1

[providers.main]
protocol = "openai"

[providers.big]
protocol = "openai"
serve = {{ target = "cluster", engine = "vllm", model = "Qwen/Qwen3-32B" }}

[targets.cluster]
{table}

[roles.generator]
provider = "main"
model = "gen-model"

[roles.parent]
provider = "big"
model = "Qwen/Qwen3-32B"
"""
TABLES = {
    "slurm": 'kind = "slurm"\nspool = "/shared/overbrainer"',
    "ray": 'kind = "ray"\naddress = "http://127.0.0.1:9"\nstorage = "/shared/overbrainer"',
}


@pytest.mark.parametrize("kind", ["slurm", "ray"])
def test_a_served_provider_on_a_target_that_cannot_serve_is_refused_before_anything_is_paid(
    kind: str,
    request: pytest.FixtureRequest,
    provider: FakeProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    request.getfixturevalue(f"{kind}_installed")
    monkeypatch.setenv("OVERBRAINER_LOAD_PLUGINS", f"local,{kind}")
    project = write_project(
        tmp_path / "project", provider.url, SERVED_ON.format(table=TABLES[kind])
    )
    from click.testing import CliRunner

    from overbrainer.cli import cli

    result = CliRunner().invoke(cli, ["-C", str(project), "subtopics"], catch_exceptions=False)

    assert result.exit_code == 1, result.output
    assert (
        f"providers.big.serve.target: target `cluster` (kind {kind}) cannot serve: its plugin "
        f"`{kind}` does not offer the serve capability"
    ) in result.stderr
    assert "Traceback" not in result.output
    assert provider.requests == [], "a provider was asked (and paid) before the refusal"
    assert lines(project, "subtopics.jsonl") == []
