"""``overbrainer batches``: the ledger's batches and, asked read-only, where the provider
says each live one stands; against the loopback batch fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.pipeline.test_batch import CONFIGS, SIX_ONLINE, as_protocol, is_poll, six

from fake_batch import FakeBatchProvider
from fake_provider import Reply
from pipeline_data import write_project


@pytest.fixture
def provider() -> Iterator[FakeBatchProvider]:
    server = FakeBatchProvider(process_s=0.05).start()
    yield server
    server.stop()


@pytest.fixture(params=["openai", "anthropic"])
def protocol(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def project_dir(tmp_path: Path, provider: FakeBatchProvider) -> Path:
    return write_project(tmp_path / "project", provider.url, CONFIGS["openai"])


def sent_and_left(run_cli, provider: FakeBatchProvider, done: int) -> str:
    """A batch sent by ``answers --no-wait``, still running with ``done`` items done."""
    provider.hold = True
    result = run_cli("answers", "--no-wait")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    batch.progress = done
    return batch.id


def test_a_live_batch_shows_the_provider_s_counts(run_cli, project_dir, provider, protocol):
    as_protocol(project_dir, protocol)
    six(project_dir)
    batch_id = sent_and_left(run_cli, provider, done=2)
    before = len(provider.submitted())
    result = run_cli("batches")
    assert result.exit_code == 0, result.stderr
    header, line = result.stdout.splitlines()
    assert header.split() == ["BATCH", "STATE", "PROVIDER", "QUESTIONS", "AGE", "PAID", "AT",
                              "MOST", "STATUS"]
    cells = line.split()
    assert cells[:4] == [batch_id, "submitted", "main/parent-model", "6"]
    assert cells[5] == "$0.0000"  # nothing collected yet
    assert line.endswith("  2/6 done, 0 failed (in_progress)")
    # Read-only: nothing made, cancelled or collected.
    assert len(provider.submitted()) == before
    assert not provider.submitted()[0].cancelled
    assert not [s for s in provider.requests if s.method == "POST" and "cancel" in s.path]


def test_offline_asks_no_provider(run_cli, project_dir, provider):
    six(project_dir)
    batch_id = sent_and_left(run_cli, provider, done=2)
    asked = len(provider.requests)
    result = run_cli("batches", "--offline")
    assert result.exit_code == 0, result.stderr
    assert len(provider.requests) == asked
    [line] = result.stdout.splitlines()[1:]
    assert line.startswith(batch_id)
    assert line.endswith("  not asked (--offline)")


def test_a_provider_that_fails_to_answer_is_said_not_fatal(run_cli, project_dir, provider):
    six(project_dir)
    sent_and_left(run_cli, provider, done=0)
    provider.on(is_poll, Reply({"error": {"message": "busy"}}, status=503), times=None)
    result = run_cli("batches")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[1].endswith("  not known: HTTP 503: busy")


def test_a_past_batch_shows_its_end_and_cost_from_disk(run_cli, project_dir, provider):
    six(project_dir)
    assert run_cli("answers").exit_code == 0
    [batch] = provider.submitted()
    polls = len([s for s in provider.requests if is_poll(s)])
    result = run_cli("batches", "--json")
    assert result.exit_code == 0, result.stderr
    [shown] = json.loads(result.stdout)
    assert len([s for s in provider.requests if is_poll(s)]) == polls  # not asked again
    assert shown["batch"] == batch.id and shown["state"] == "ended"
    assert shown["questions"] == 6 and shown["failed"] == 0
    assert shown["paid_usd"] == pytest.approx(SIX_ONLINE / 2, abs=1e-6)
    assert shown["provider_status"] is None and shown["problem"] is None
    line = run_cli("batches").stdout.splitlines()[1]
    assert f"${SIX_ONLINE / 2:.4f}" in line
    assert line.endswith("  ended, 0 item(s) without an answer")


def test_no_batch_says_how_to_send_one(run_cli, project_dir):
    result = run_cli("batches")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "no batch: `answers` sends some with [roles.parent] batch = true\n"
