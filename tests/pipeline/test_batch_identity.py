"""A batch is this project's or it is not taken; a batch the provider will not give is held,
and holds nothing else up; a 429 is a refusal, not a lost reply. Against the loopback fake
of both batch APIs, two projects sharing it where they must."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.batch_data import CONFIGS, answered, as_protocol, ledger, six
from tests.helpers.fake_batch import FakeBatch, FakeBatchProvider
from tests.helpers.fake_provider import Reply
from tests.helpers.pipeline_data import seed_questions, write_project


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


def creates(protocol: str):
    path = "batches" if protocol == "openai" else "messages/batches"
    return lambda seen: seen.method == "POST" and seen.path == path


def listings(provider: FakeBatchProvider) -> list[str]:
    return [s.path for s in provider.requests
            if s.method == "GET" and s.path.split("?")[0] in ("batches", "messages/batches")]


def key_of(project_dir: Path) -> str:
    return json.loads(ledger(project_dir).splitlines()[0])["key"]


# -- a batch is ours or it is not taken --------------------------------------------------------


def test_anthropic_recovery_never_takes_another_project_s_batch(run_cli, provider, tmp_path):
    ours = write_project(tmp_path / "ours", provider.url, CONFIGS["anthropic"])
    theirs = write_project(tmp_path / "theirs", provider.url, CONFIGS["anthropic"])
    questions = six(ours)
    seed_questions(theirs, {("ownership", "moves"): [f"other {i}" for i in range(6)]})
    # Our batch's making gets no reply, and the provider never made it.
    provider.on(creates("anthropic"), Reply({"error": {"message": "overloaded"}}, status=529),
                times=None)
    result = run_cli("-C", str(ours), "answers")
    assert result.exit_code == 1
    assert "no reply to its making" in result.stderr
    provider._rules.clear()
    # Another project on the same key makes a batch of as many questions, moments later.
    provider.hold = True
    assert run_cli("-C", str(theirs), "answers", "--no-wait").exit_code == 0
    [other] = provider.submitted()

    # Running, it cannot be told whose it is: not taken, not cancelled.
    result = run_cli("-C", str(ours), "answers", "--cancel")
    assert result.exit_code == 0, result.stderr
    key = key_of(ours)
    assert (
        f"answers: batch {key}: 1 batch(es) of the provider may be it, still running: the one "
        "whose results carry its key is taken when it ends; its questions wait"
    ) in result.stderr
    assert f"answers: batch {key}: not cancelled: no batch of the provider is known yet" \
        in result.stderr
    assert not any(s.path.endswith("/cancel") for s in provider.requests)

    # Ended, its results name the other project's items: ours stay held, never sent twice.
    provider.hold = False
    result = run_cli("-C", str(ours), "answers")
    assert result.exit_code == 0, result.stderr
    assert f"answers: batch {key}: the provider does not list it" in result.stderr
    assert other.id not in ledger(ours)
    assert len(provider.submitted()) == 1 and provider.chats() == []
    assert answered(ours) == []
    # The other project collects its own answers, all of them.
    result = run_cli("-C", str(theirs), "answers")
    assert result.exit_code == 0, result.stderr
    assert len(answered(theirs)) == 6

    # Ours, given up knowingly, go in a batch of their own.
    assert run_cli("-C", str(ours), "answers", "--forget-batch", key).exit_code == 0
    result = run_cli("-C", str(ours), "answers")
    assert result.exit_code == 0, result.stderr
    assert answered(ours) == sorted(q["id"] for q in questions)
    assert len(provider.submitted()) == 2


def test_a_lost_anthropic_batch_is_taken_once_its_results_show_it_is_ours(
    run_cli, project_dir, provider
):
    as_protocol(project_dir, "anthropic")
    questions = six(project_dir)
    provider.hold = True
    provider.lose_create_replies = 1  # made, its id lost: it cannot be told while it runs
    result = run_cli("answers", "--no-wait")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert "1 batch(es) of the provider may be it, still running" in result.stderr
    assert '"state":"submitted"' not in ledger(project_dir)
    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert f"answers: batch {batch.id}: found again, recorded" in result.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    assert len(provider.submitted()) == 1


def old_batches(provider: FakeBatchProvider, protocol: str, count: int) -> None:
    """``count`` batches of the key made a day ago, by others."""
    for number in range(count):
        batch_id = f"batch_old{number:04d}"
        provider.batches[batch_id] = FakeBatch(
            batch_id, protocol, [], time.time() - 86400 + number,
            status="completed" if protocol == "openai" else "ended",
        )


@pytest.mark.parametrize("oldest_first", [False, True])
def test_a_lost_batch_is_found_past_the_first_page_in_either_order(
    run_cli, project_dir, provider, protocol, oldest_first
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    old_batches(provider, protocol, 7)
    provider.page_size, provider.oldest_first = 3, oldest_first
    provider.lose_create_replies = 1
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(provider.submitted()) == 8  # the old ones and ours: not made twice
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    # Newest first, ours is on the first page; oldest first, on the third.
    assert any("after" in path for path in listings(provider)) == oldest_first


# -- a 429 is a refusal ---------------------------------------------------------------------


@pytest.mark.parametrize("what", ["files", "batches", "messages/batches"])
def test_a_429_on_upload_or_create_is_waited_out_not_taken_for_a_lost_reply(
    run_cli, project_dir, provider, what
):
    protocol = "anthropic" if what.startswith("messages") else "openai"
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    # More 429s than max_retries (2) allows failures: a refusal is no failure.
    provider.on(lambda s: s.method == "POST" and s.path == what,
                Reply({"error": {"message": "slow down"}}, status=429,
                      headers={"Retry-After": "0"}), times=5)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert "refused (HTTP 429: slow down); waiting 0.0s" in result.stderr
    assert listings(provider) == []  # never looked for: nothing was made
    assert "no reply" not in result.stderr
    assert len(provider.submitted()) == 1
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_a_create_refused_past_max_wait_s_sends_nothing_and_holds_nothing(
    run_cli, project_dir, provider
):
    (project_dir / "overbrainer.toml").write_text(
        CONFIGS["openai"].replace("[pipeline]\n", "[pipeline]\nmax_wait_s = 0.2\n")
    )
    questions = six(project_dir)
    provider.on(creates("openai"), Reply({"error": {"message": "slow down"}}, status=429,
                                         headers={"Retry-After": "0.05"}), times=None)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: cannot start a batch (HTTP 429: slow down: still rate-limited after 0 s "
        "(pipeline.max_wait_s = 0.2)): its questions were not sent\n"
    )
    assert '"state":"abandoned"' in ledger(project_dir)
    assert listings(provider) == []
    provider._rules.clear()
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)


# -- a batch the provider will not give is held, and holds nothing else up ---------------------


def test_a_batch_the_provider_no_longer_has_is_held_and_blocks_nothing_else(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    [gone] = provider.submitted()
    provider.purge(gone.id)
    provider.hold = False
    more = seed_questions(project_dir, {("ownership", "borrows"): ["b1", "b2"]})

    result = run_cli("answers", "--no-batch")
    assert result.exit_code == 0, result.stderr
    assert (
        f"answers: batch {gone.id}: the provider has no such batch (HTTP 404: purged, or made "
        "with another account's key): its 6 question(s) without an answer stay held (never "
        "sent twice) and the stage goes on without them; if you know it will never answer, "
        f"`overbrainer answers --forget-batch {gone.id}` gives them up"
    ) in result.stderr
    assert sorted(s.prompt for s in provider.chats()) == ["b1", "b2"]  # online goes on
    assert answered(project_dir) == sorted(q["id"] for q in more)

    # Said once; each later run a line, and every command goes on.
    more += seed_questions(project_dir, {("ownership", "borrows"): ["b3"]})
    for command in (["answers"], ["answers", "--cancel"], ["answers", "--no-batch"], ["run"]):
        result = run_cli(*command)
        assert result.exit_code == 0, (command, result.stderr)
        assert f"answers: batch {gone.id} is still held (the provider has no such batch" \
            in result.stderr
        assert "stay held (never sent twice)" not in result.stderr
    assert not any(s.path.endswith("/cancel") for s in provider.requests)
    assert {q["id"] for q in more} <= set(answered(project_dir))
    assert not {q["id"] for q in questions} & set(answered(project_dir))

    assert run_cli("answers", "--forget-batch", gone.id).exit_code == 0
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert {q["id"] for q in questions} <= set(answered(project_dir))


def test_a_relative_results_url_is_resolved_on_the_provider_s_host(
    run_cli, project_dir, provider
):
    as_protocol(project_dir, "anthropic")
    questions = six(project_dir)
    provider.results_base = "/v1"  # results_url: /v1/messages/batches/ID/results
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert [s.path for s in provider.requests if s.path.endswith("/results")] == [
        f"messages/batches/{batch.id}/results"
    ]
    assert answered(project_dir) == sorted(q["id"] for q in questions)


# -- an expired batch's items go where its message says ------------------------------------------


def test_a_batch_cancelled_in_the_ledger_that_expired_is_sent_again_in_the_same_run(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    # --cancel records the batch as cancelled, but the provider never hears of it.
    provider.on(lambda s: s.path.endswith("/cancel"),
                Reply({"error": {"message": "busy"}}, status=503), times=None)
    assert run_cli("answers", "--cancel").exit_code == 1
    provider._rules.clear()
    fates = ["expired"]
    provider.batch_fate = lambda batch: fates.pop() if fates else None
    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    first, second = provider.submitted()
    assert (
        f"answers: batch {first.id} expired (its 24h completion window passed): its items "
        "without an answer go into a new batch"
    ) in result.stderr
    assert "left for a later" not in result.stderr
    assert len(second.items) == 5
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_an_expired_batch_collected_by_cancel_says_only_what_happens(
    run_cli, project_dir, provider
):
    six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    [batch] = provider.submitted()
    batch.status, batch.created = "in_progress", 0.0  # the next look finds it ended
    provider.batch_fate = lambda _: "expired"
    provider.hold = False
    result = run_cli("answers", "--cancel")
    assert result.exit_code == 0, result.stderr
    assert (
        f"answers: batch {batch.id} expired (its 24h completion window passed): its items "
        "without an answer are left for a later `overbrainer answers` (`--cancel` sends "
        "nothing)"
    ) in result.stderr
    assert "new batch" not in result.stderr
    assert len(provider.submitted()) == 1
