"""A batch waited for is never silent: progress lines from the provider's counts, a poll
that hangs cut short and asked again."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.pipeline.test_batch import CONFIGS, answered, as_protocol, is_poll, six

from fake_batch import FakeBatchProvider
from fake_provider import Reply, Seen
from overbrainer.pipeline import batch_watch
from overbrainer.pipeline.batch_ledger import Batch, State
from overbrainer.pipeline.batch_watch import BatchWatch
from overbrainer.providers.batch_api import BatchStatus, Counts
from pipeline_data import write_project

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
