"""A batch waited for is never silent: progress lines from the provider's counts, a poll
that hangs cut short and asked again; ``overbrainer batches`` shows the ledger's batches
and, asked read-only, where the provider says each live one stands."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.batch_data import (
    CONFIGS,
    SIX_ONLINE,
    answered,
    as_protocol,
    is_poll,
    six,
)
from tests.helpers.fake_batch import FakeBatchProvider
from tests.helpers.fake_provider import Reply, Seen
from tests.helpers.pipeline_data import write_project

from overbrainer.pipeline import batch_watch
from overbrainer.pipeline.batch_ledger import Batch, State
from overbrainer.pipeline.batch_watch import BatchWatch
from overbrainer.providers.batch_api import BatchStatus, Counts

PROGRESS = re.compile(r"answers: batch (\S+): (\d+)/6 done, 0 failed \((\w+)\), waiting \d+s "
                      r"\(polls every 0.02s\)")


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


def test_a_wait_says_the_provider_s_counts_when_they_change(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.hold = True
    polls: list[Seen] = []

    def advance(seen: Seen) -> None:
        polls.append(seen)
        batch = provider.submitted()[0]
        batch.progress = min(len(polls) // 4, 6)  # a count up every fourth poll
        provider.hold = len(polls) < 30

    provider.on(is_poll, advance, times=None)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    said = [m.groups() for m in PROGRESS.finditer(result.stderr)]
    assert {name for name, _, _ in said} == {batch.id}
    done = [int(count) for _, count, status in said if status == "in_progress"]
    # One line per change, not one per poll: each count once, in order.
    assert done == sorted(set(done)) and done[0] == 0 and done[-1] == 6
    assert len(said) < len(polls)
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_a_hung_poll_times_out_with_a_message_and_is_asked_again(
    run_cli, project_dir, provider, protocol, monkeypatch
):
    as_protocol(project_dir, protocol)
    monkeypatch.setattr(batch_watch, "POLL_TIMEOUT_S", 0.3)  # 60 s: a test's second
    questions = six(project_dir)
    provider.on(is_poll, Reply(delay=5.0), times=1)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert (
        f"answers: batch {batch.id}: a poll failed (no reply within 0.3 s); trying again in"
        in result.stderr
    )
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def batch_of(at: float) -> Batch:
    return Batch("ob-0123456789abcdef", State.SUBMITTED, "main", "m", ["q"], at, "batch_9")


def test_an_unchanged_wait_is_said_again_every_five_minutes():
    now = [1000.0]
    watch = BatchWatch(poll_s=30, every_s=300, clock=lambda: now[0])
    batch = batch_of(at=1000.0 - 250)
    running = BatchStatus(False, "in_progress", counts=Counts(done=12, failed=0, total=24))
    assert watch.line(batch, running) == (
        "answers: batch batch_9: 12/24 done, 0 failed (in_progress), waiting 4m10s "
        "(polls every 30s)"
    )
    said = []
    for _ in range(20):  # ten minutes of polls, nothing changing
        now[0] += 30
        said.append(watch.line(batch, running))
    assert [line for line in said if line is not None] == [
        "answers: batch batch_9: 12/24 done, 0 failed (in_progress), waiting 9m10s "
        "(polls every 30s)",
        "answers: batch batch_9: 12/24 done, 0 failed (in_progress), waiting 14m10s "
        "(polls every 30s)",
    ]
    # A provider that gives no counts: its word and the wait.
    now[0] += 30
    assert watch.line(batch, BatchStatus(False, "finalizing")) == (
        "answers: batch batch_9: finalizing, waiting 14m40s (polls every 30s)"
    )


# -- overbrainer batches ------------------------------------------------------------------


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
    assert result.stdout == (
        "no batch: `answers --batch` sends one (or `answers` with [roles.parent] batch = true)\n"
    )
