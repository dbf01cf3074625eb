"""``answers`` through the batch APIs, against the loopback fakes of both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fake_batch import FakeBatchProvider
from pipeline_data import API_KEY, PIPELINE_CONFIG, lines, seed_questions, write_project

BATCH_CONFIG = PIPELINE_CONFIG.replace(
    'model = "parent-model"\nreasoning = true\n',
    'model = "parent-model"\nreasoning = true\nbatch = true\n',
).replace("[pipeline]\n", "[pipeline]\nbatch_poll_s = 0.02\n")
ANTHROPIC_CONFIG = BATCH_CONFIG.replace('protocol = "openai"', 'protocol = "anthropic"')


@pytest.fixture
def provider() -> Iterator[FakeBatchProvider]:
    server = FakeBatchProvider(process_s=0.05).start()
    yield server
    server.stop()


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeBatchProvider) -> Path:
    return write_project(tmp_path / "project", provider.url, BATCH_CONFIG)


def six(project_dir: Path) -> list[dict]:
    return seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(6)]})


def ledger(project_dir: Path) -> list[dict]:
    path = project_dir / ".overbrainer" / "batches.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_smoke(run_cli, project_dir, provider):
    six(project_dir)
    result = run_cli("answers")
    print(result.stdout, result.stderr)
    assert result.exit_code == 0
    print(ledger(project_dir))
    print(lines(project_dir, "answers.jsonl")[0])
