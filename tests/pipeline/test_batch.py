"""``answers`` through the batch APIs, against the loopback fakes of both, from the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.helpers.batch_data import (
    BATCH_CONFIG,
    CONFIGS,
    SIX_ONLINE,
    answered,
    as_protocol,
    is_poll,
    ledger,
    six,
)
from tests.helpers.fake_batch import FakeBatchProvider, question
from tests.helpers.fake_provider import Reply
from tests.helpers.pipeline_data import (
    API_KEY,
    LOCAL_TRAINING,
    lines,
    seed_questions,
    write_project,
)

from overbrainer.pipeline.batch import chunks
from overbrainer.providers.batch_api import Limits, Request
from overbrainer.providers.batch_openai import OpenAIBatches

CLI = str(Path(sys.executable).parent / "overbrainer")


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
    return write_project(tmp_path / "project", provider.url, BATCH_CONFIG)


def history(project_dir: Path) -> list[dict]:
    path = project_dir / ".overbrainer" / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_answers_in_batch_are_the_online_answers_at_half_price(
    run_cli, project_dir, provider, protocol, tmp_path
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert batch.protocol == protocol
    assert provider.chats() == []  # not one online request
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    assert sorted(provider.batch_items()) == sorted(q["id"] for q in questions)
    summary = result.stdout.strip()
    assert summary.endswith(f"; cost ${SIX_ONLINE / 2:.4f}; in batch (1 batch)")
    assert f"answers: batch {batch.id}: 6 question(s) sent" in result.stderr

    # The same questions online, in another project: the same answers but for meta.batch.
    online = write_project(tmp_path / "online", provider.url, CONFIGS[protocol])
    six(online)
    result = run_cli("-C", str(online), "answers", "--no-batch")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip().endswith(f"; cost ${SIX_ONLINE:.4f}")
    assert len(provider.chats()) == 6
    by_id = {record["id"]: record for record in lines(online, "answers.jsonl")}
    for record in lines(project_dir, "answers.jsonl"):
        assert record["meta"].pop("batch") == batch.id
        assert record == by_id[record["id"]]
    # The batch's request bodies are the online ones.
    online_bodies = {chat.prompt: chat.body for chat in provider.chats()}
    assert dict(zip(batch.questions(), (body for _, body in batch.items), strict=True)) == {
        q["id"]: online_bodies[q["text"]] for q in questions
    }

    entry = history(project_dir)[-1]
    assert entry["batch"] == {"batches": 1, "waiting": 0}
    assert entry["cost"] == pytest.approx(SIX_ONLINE / 2)
    assert run_cli("history").stdout.splitlines()[0] == (
        f"answers    1 run(s), 6 done, 0 failed; tokens 60 in, 120 out; ${SIX_ONLINE / 2:.4f}; "
        "1 in batch"
    )
    assert "in batch (1 batch)" in run_cli("history", "--all").stdout


def test_the_key_goes_only_into_headers(run_cli, project_dir, provider, protocol):
    as_protocol(project_dir, protocol)
    six(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0
    assert API_KEY not in result.stdout + result.stderr
    for seen in provider.requests:
        sent = seen.headers.get("Authorization", "") + seen.headers.get("x-api-key", "")
        assert API_KEY in sent
        assert API_KEY not in json.dumps(seen.body, default=repr)
    assert all(API_KEY.encode() not in upload for upload in provider.uploads)
    assert API_KEY not in ledger(project_dir)


def test_the_provider_s_batch_discount_sets_the_price(run_cli, project_dir, provider):
    config = BATCH_CONFIG.replace(
        'protocol = "openai"\n', 'protocol = "openai"\nbatch_discount = 0.25\n'
    )
    (project_dir / "overbrainer.toml").write_text(config)
    six(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert history(project_dir)[-1]["cost"] == pytest.approx(SIX_ONLINE * 0.75)


def test_the_openai_upload_is_a_jsonl_of_chat_requests(run_cli, project_dir, provider):
    questions = six(project_dir)
    assert run_cli("answers").exit_code == 0
    [upload] = provider.uploads
    rows = [json.loads(line) for line in upload.decode().splitlines()]
    # The batch carries the project's key for it: in each custom_id, the file's name and
    # the batch's metadata.
    key = json.loads(ledger(project_dir).splitlines()[0])["key"]
    assert [row["custom_id"] for row in rows] == [f"{key}-{q['id']}" for q in questions]
    assert provider.filenames == [f"{key}.jsonl"]
    assert {(row["method"], row["url"]) for row in rows} == {("POST", "/v1/chat/completions")}
    assert rows[0]["body"]["messages"] == [
        {"role": "system", "content": "system|ownership"}, {"role": "user", "content": "q0"}
    ]
    [create] = [s for s in provider.requests if s.method == "POST" and s.path == "batches"]
    assert create.body["endpoint"] == "/v1/chat/completions"
    assert create.body["completion_window"] == "24h"
    assert create.body["metadata"] == {"overbrainer_batch": key}


def test_a_large_stage_is_cut_into_batches_under_the_limits(
    run_cli, project_dir, provider, monkeypatch
):
    monkeypatch.setattr(OpenAIBatches, "limits", Limits(requests=4, bytes=10**9))
    questions = seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(10)]})
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert [len(batch.items) for batch in provider.submitted()] == [4, 4, 2]
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    assert result.stdout.strip().endswith("in batch (3 batches)")


def test_chunks_keep_under_both_the_count_and_the_bytes():
    requests = [Request(f"id{i}", {"n": "x" * i}) for i in range(10)]
    size = {r.custom_id: 10 + i for i, r in enumerate(requests)}.__getitem__
    cut = list(chunks(requests, Limits(requests=3, bytes=35), lambda r: size(r.custom_id)))
    assert [[r.custom_id for r in c] for c in cut] == [
        ["id0", "id1", "id2"], ["id3", "id4"], ["id5", "id6"], ["id7", "id8"], ["id9"]
    ]
    # A request bigger than the limit still goes, alone.
    assert len(list(chunks(requests[:2], Limits(requests=5, bytes=1), lambda r: 9))) == 2


def test_errored_and_expired_items_go_into_a_new_batch_then_count_as_failed(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    expired_once: set[str] = set()

    def fate(custom_id, body):
        text = body["messages"][-1]["content"]
        if text == "q1":
            return "errored"  # every time
        if text == "q2" and text not in expired_once:
            expired_once.add(text)
            return "expired"
        return None

    provider.item_fate = fate
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: 1 answers item(s) failed; run the command again to retry them\n"
    )
    q1, q2 = questions[1]["id"], questions[2]["id"]
    # max_retries = 2: three tries of q1, two of q2.
    assert provider.batch_items().count(q1) == 3
    assert provider.batch_items().count(q2) == 2
    assert len(provider.submitted()) == 3
    assert answered(project_dir) == sorted(q["id"] for q in questions if q["id"] != q1)
    batches = [b.id for b in provider.submitted()]
    error = "HTTP 400: max_tokens is too large" if protocol == "openai" else (
        "invalid_request_error: max_tokens: too large")
    assert f"answers: {q1} failed: {error} (batch {batches[2]})" in result.stderr
    expired = "batch_expired: This request could not be executed" if protocol == "openai" \
        else "expired"
    assert f"answers: batch {batches[0]}: 2 item(s) without an answer (" in result.stderr
    assert expired in result.stderr
    assert "tried again" in result.stderr
    assert "2 failed" not in result.stdout and ", 1 failed," in result.stdout


def test_a_malformed_results_line_loses_only_its_item_which_is_tried_again(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    once: list[str] = []

    def fate(custom_id, body):
        if not once:
            once.append(question(custom_id))
            return "malformed"
        return None

    provider.item_fate = fate
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    first, second = provider.submitted()
    assert second.questions() == once
    assert (
        f"answers: batch {first.id}: a line of its results is malformed (not JSON): the other "
        "lines are kept, and an item left without a result is tried again"
    ) in result.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    assert {r["meta"]["batch"] for r in lines(project_dir, "answers.jsonl")} == {
        first.id, second.id
    }


def test_a_results_line_naming_no_item_of_the_batch_is_ignored(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    provider.item_fate = lambda custom_id, body: "foreign" if not provider.foreign else None
    provider.foreign = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert (
        f"answers: batch {batch.id}: a line of its results names no item of the batch: it is "
        "ignored, the other lines are kept"
    ) in result.stderr
    assert "tried again" not in result.stderr  # there is no item to try
    assert len(answered(project_dir)) == 6 == len(questions)


@pytest.mark.parametrize(
    ("fate", "shown"),
    [
        ("failed", "failed (the input file is invalid)"),
        ("expired", "expired (its 24h completion window passed)"),
        ("cancelled", "cancelled (cancelled)"),
    ],
)
def test_a_batch_failed_expired_or_cancelled_as_a_whole_goes_into_a_new_batch(
    run_cli, project_dir, provider, fate, shown
):
    questions = six(project_dir)
    fates = [fate]
    provider.batch_fate = lambda batch: fates.pop() if fates else None
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    first, second = provider.submitted()
    assert (
        f"answers: batch {first.id} {shown}: its items without an answer go into a new batch"
    ) in result.stderr
    kept = 0 if fate == "failed" else 1  # an expired or cancelled batch keeps what it did
    assert len(second.items) == 6 - kept
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_anthropic_cancelled_batch_shows_the_reason(run_cli, project_dir, provider):
    as_protocol(project_dir, "anthropic")
    six(project_dir)
    fates = ["cancelled"]
    provider.batch_fate = lambda batch: fates.pop() if fates else None
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    first, second = provider.submitted()
    assert f"answers: batch {first.id} ended (cancelled)" in result.stderr
    assert len(second.items) == 5


def test_a_failing_poll_is_retried_with_backoff(run_cli, project_dir, provider, protocol):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.on(is_poll, Reply({"error": {"message": "busy"}}, status=503), times=2)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert f"answers: batch {batch.id}: a poll failed (HTTP 503: busy); trying again in" \
        in result.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_a_poll_that_keeps_failing_stops_the_stage_and_the_next_run_collects(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    provider.on(is_poll, Reply("<html>bad gateway</html>", status=502), times=None)
    result = run_cli("answers")
    assert result.exit_code == 1
    [batch] = provider.submitted()
    assert result.stderr.endswith(
        f"error: batch {batch.id}: a poll failed (HTTP 502: <html>bad gateway</html>); the "
        "batch stays recorded: run `overbrainer answers` again to collect it\n"
    )
    assert answered(project_dir) == []
    provider._rules.clear()
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(provider.submitted()) == 1  # the recorded batch, collected: nothing sent again
    assert answered(project_dir) == sorted(q["id"] for q in questions)


@pytest.mark.parametrize(
    ("body", "shown"),
    [("{not json", "the provider's reply is not valid JSON"),
     ({"id": "x"}, "the provider's reply is not a batch")],
)
def test_a_poll_reply_that_cannot_be_read_is_retried(run_cli, project_dir, provider, body, shown):
    six(project_dir)
    provider.on(is_poll, Reply(body), times=1)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert f"a poll failed ({shown}); trying again" in result.stderr


def test_a_batch_made_but_whose_reply_was_lost_is_found_not_made_again(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.lose_create_replies = 1
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    # A message batch shows whose it is only in its results: it may be taken once it ends.
    assert f"answers: batch {batch.id}: 6 question(s) sent" in result.stderr or (
        protocol == "anthropic" and f"answers: batch {batch.id}: found again" in result.stderr
    )


def test_a_batch_not_made_is_tried_again(run_cli, project_dir, provider):
    questions = six(project_dir)
    provider.on(lambda s: s.method == "POST" and s.path == "batches",
                Reply({"error": {"message": "overloaded"}}, status=503), times=1)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    key = json.loads(ledger(project_dir).splitlines()[0])["key"]
    assert f"answers: batch {key}: not started (HTTP 503: overloaded); trying again" \
        in result.stderr
    assert len(provider.submitted()) == 1
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_no_wait_submits_and_returns_and_a_later_run_collects(run_cli, project_dir, provider):
    questions = six(project_dir)
    provider.hold = True
    result = run_cli("answers", "--no-wait")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "answers: 0 done, 0 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000; "
        "in batch (1 batch, 6 waiting: `overbrainer answers` collects them)\n"
    )
    assert history(project_dir)[-1]["batch"] == {"batches": 1, "waiting": 6}
    assert "in batch (1 batch, 6 waiting)" in run_cli("history", "--all").stdout
    # Still running: a second --no-wait sends nothing new.
    result = run_cli("answers", "--no-wait")
    assert result.exit_code == 0, result.stderr
    assert "6 waiting" in result.stdout
    assert len(provider.submitted()) == 1

    provider.hold = False
    result = run_cli("run")  # which also makes the questions the project still lacks
    assert result.exit_code == 0, result.stderr
    first, *others = provider.submitted()
    assert not set(first.questions()) & {q for b in others for q in b.questions()}
    assert set(answered(project_dir)) >= {q["id"] for q in questions}
    assert f"answers: {len(answered(project_dir))} done, 0 skipped" in result.stdout


def test_online_answers_wait_for_a_live_batch_and_never_ask_its_questions(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    more = seed_questions(project_dir, {("ownership", "borrows"): ["b1", "b2"]})
    provider.hold = False
    result = run_cli("answers", "--no-batch")
    assert result.exit_code == 0, result.stderr
    assert sorted(s.prompt for s in provider.chats()) == ["b1", "b2"]
    assert len(provider.submitted()) == 1
    assert answered(project_dir) == sorted(q["id"] for q in questions + more)
    assert "answers: 8 done," in result.stdout and "in batch (1 batch)" in result.stdout


def test_online_answers_take_over_the_failed_items_of_a_live_batch(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    provider.hold = False
    provider.item_fate = lambda _, body: (
        "errored" if body["messages"][-1]["content"] == "q3" else None
    )
    result = run_cli("answers", "--no-batch")
    assert result.exit_code == 0, result.stderr
    assert [s.prompt for s in provider.chats()] == ["q3"]
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_a_results_url_off_the_provider_s_host_is_not_followed(run_cli, project_dir, provider):
    as_protocol(project_dir, "anthropic")
    six(project_dir)
    provider.results_base = provider.url.replace("127.0.0.1", "localhost")
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr  # held: the project goes on
    [batch] = provider.submitted()
    assert (
        f"answers: batch {batch.id}: its results_url is not on the provider's host: not "
        "followed (the key would go along): its 6 question(s) without an answer stay held "
        "(never sent twice) and the stage goes on without them; if you know it will never "
        f"answer, `overbrainer answers --forget-batch {batch.id}` gives them up"
    ) in result.stderr
    assert not any(s.path.endswith("/results") for s in provider.requests)
    assert answered(project_dir) == []
    again = run_cli("answers")
    assert again.exit_code == 0, again.stderr
    assert f"answers: batch {batch.id} is still held (its results_url is not on" in again.stderr
    assert len(provider.submitted()) == 1 and provider.chats() == []  # nothing sent twice


def test_a_batch_that_cannot_start_is_not_recorded_as_live(run_cli, project_dir, provider):
    questions = six(project_dir)
    provider.on(lambda s: s.method == "POST" and s.path == "files",
                Reply({"error": {"message": "file too large"}}, status=400), times=1)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: cannot start a batch (HTTP 400: file too large): its questions were not sent\n"
    )
    assert '"state":"abandoned"' in ledger(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_a_batch_of_a_provider_no_longer_configured_is_named(run_cli, project_dir, provider):
    six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    [batch] = provider.submitted()
    config = BATCH_CONFIG.replace("[providers.main]", "[providers.other]").replace(
        'provider = "main"', 'provider = "other"')
    (project_dir / "overbrainer.toml").write_text(config)
    (project_dir / ".env").write_text(
        (project_dir / ".env").read_text().replace("__MAIN__", "__OTHER__"))
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"error: batch {batch.id} was sent to provider `main`, which overbrainer.toml no "
        "longer has: add it back to collect the batch\n"
    )


# -- killed, interrupted ----------------------------------------------------------------------


def start_answers(project_dir: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [CLI, "-C", str(project_dir), "answers"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def wait_until(check, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "it never came"
        time.sleep(0.01)


def test_kill_9_between_submit_and_results_pays_nothing_twice(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.hold = True
    process = start_answers(project_dir)
    try:
        wait_until(lambda: '"state":"submitted"' in ledger(project_dir), process)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    assert answered(project_dir) == []
    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(provider.submitted()) == 1  # no new batch: the recorded one is collected
    assert provider.chats() == []
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    assert "answers: 6 done, 0 skipped" in result.stdout


def test_kill_9_while_the_batch_is_being_made_finds_it_again(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.hold_create = 30.0  # the batch is made; its id never reaches the CLI
    process = start_answers(project_dir)
    try:
        wait_until(lambda: len(provider.submitted()) == 1, process)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert '"state":"submitted"' not in ledger(project_dir)
    provider.hold_create = 0.0
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    assert f"answers: batch {batch.id}: found again, recorded" in result.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_kill_9_before_the_batch_was_made_sends_its_questions_again(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    # The upload hangs: the CLI is killed before any batch exists.
    provider.on(lambda s: s.method == "POST" and s.path == "files", Reply(delay=30), times=1)
    process = start_answers(project_dir)
    try:
        wait_until(lambda: '"state":"submitting"' in ledger(project_dir), process)
        time.sleep(0.2)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    key = json.loads(ledger(project_dir).splitlines()[0])["key"]
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert (
        f"answers: batch {key} was never started by the provider: its questions are sent again"
    ) in result.stderr
    assert len(provider.submitted()) == 1
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_ctrl_c_while_waiting_keeps_the_batch_and_the_next_run_collects(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    provider.hold = True
    process = start_answers(project_dir)
    wait_until(lambda: '"state":"submitted"' in ledger(project_dir), process)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 130, stderr
    assert stderr.endswith("error: interrupted: the stage resumes on its next run\n")
    assert "in batch (1 batch, 6 waiting" in stdout
    entry = history(project_dir)[-1]
    assert (entry["status"], entry["batch"]) == ("interrupted", {"batches": 1, "waiting": 6})
    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(provider.submitted()) == 1
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_force_in_batch_replaces_the_answers_once_the_batch_is_collected(
    run_cli, project_dir, provider
):
    questions = six(project_dir)
    assert run_cli("answers", "--no-batch").exit_code == 0
    provider.hold = True
    result = run_cli("answers", "--force", "--batch", "--no-wait")
    assert result.exit_code == 0, result.stderr
    # Until the batch ends, each question keeps its online answer.
    assert [r["meta"].get("batch") for r in lines(project_dir, "answers.jsonl")] == [None] * 6
    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [batch] = provider.submitted()
    records = lines(project_dir, "answers.jsonl")
    assert sorted(r["id"] for r in records) == sorted(q["id"] for q in questions)
    assert {r["meta"]["batch"] for r in records} == {batch.id}


def test_cancel_stops_the_live_batches_and_keeps_what_they_finished(
    run_cli, project_dir, provider, protocol
):
    as_protocol(project_dir, protocol)
    questions = six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    [batch] = provider.submitted()
    result = run_cli("answers", "--cancel")
    assert result.exit_code == 0, result.stderr
    assert [s.path for s in provider.requests if s.path.endswith("/cancel")] == [
        f"{'batches' if protocol == 'openai' else 'messages/batches'}/{batch.id}/cancel"
    ]
    assert f"answers: batch {batch.id}: cancelled" in result.stderr
    assert (
        f"answers: batch {batch.id}: 5 item(s) without an answer, left for a later "
        "`overbrainer answers`"
    ) in result.stderr
    assert result.stdout.startswith("answers: 1 done, 0 skipped, 0 failed")
    assert len(answered(project_dir)) == 1
    assert len(provider.submitted()) == 1  # nothing sent again by --cancel

    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert [len(b.items) for b in provider.submitted()] == [6, 5]
    assert answered(project_dir) == sorted(q["id"] for q in questions)


def test_a_batch_sends_only_what_the_budget_leaves_room_for(run_cli, project_dir, provider):
    (project_dir / "overbrainer.toml").write_text(
        BATCH_CONFIG.replace("batch = true", "batch = true\nmax_tokens = 20")
        + "\n[budget]\nmax_usd = 0.00015\n"
    )
    questions = six(project_dir)
    result = run_cli("answers")
    assert result.exit_code == 1, (result.stdout, result.stderr)
    [batch] = provider.submitted()
    sent = len(batch.items)
    assert 0 < sent < 6  # up to $0.0001 each at the batch price: not all six fit
    assert len(answered(project_dir)) == sent  # the batch was waited for and collected
    assert "error: budget: answers stopped before a request (up to $" in result.stderr
    assert "raise the budget" in result.stderr
    again = run_cli("answers", env={"OVERBRAINER_BUDGET__MAX_USD": "1"})
    assert again.exit_code == 0, again.stderr
    assert answered(project_dir) == sorted(q["id"] for q in questions)
    items = [item for b in provider.submitted() for item in b.questions()]
    assert sorted(items) == sorted(q["id"] for q in questions)  # none sent twice


def test_a_batch_whose_making_got_no_reply_is_held_not_made_twice(
    run_cli, project_dir, provider
):
    six(project_dir)
    provider.on(lambda s: s.method == "POST" and s.path == "batches",
                Reply({"error": {"message": "overloaded"}}, status=503), times=None)
    result = run_cli("answers")
    assert result.exit_code == 1
    key = json.loads(ledger(project_dir).splitlines()[0])["key"]
    assert result.stderr.endswith(
        f"error: batch {key}: no reply to its making (HTTP 503: overloaded), and the provider "
        "does not list it: it may have been made; its questions wait, and the next "
        "`overbrainer answers` looks again\n"
    )
    assert '"state":"abandoned"' not in ledger(project_dir)
    held = (
        f"answers: batch {key}: the provider does not list it, and its making got no reply: "
        "its 6 question(s) without an answer stay held (never sent twice) and the stage goes "
        "on without them; if you know it will never answer, `overbrainer answers "
        f"--forget-batch {key}` gives them up"
    )
    again = run_cli("answers")
    assert again.exit_code == 0, again.stderr
    assert held in again.stderr
    # However long ago it was asked for (a list cut short, oldest first), it stays held.
    path = project_dir / ".overbrainer" / "batches.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["at"] -= 3600
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    again = run_cli("answers")
    assert again.exit_code == 0, again.stderr
    assert f"answers: batch {key} is still held (the provider does not list it" in again.stderr
    assert provider.submitted() == [] and provider.chats() == []  # nothing sent twice

    # Given up knowingly: said what it risks, then sent by the next run.
    asked = len(provider.requests)
    # What it can cost at most, recorded as it was sent (6 questions at max_tokens 16384).
    [bound] = [json.loads(text)["projected_usd"] for text in ledger(project_dir).splitlines()
               if "projected_usd" in text]
    assert bound == pytest.approx(6 * 16384 * 4e-6 * 0.5, rel=0.01)
    forgotten = run_cli("answers", "--forget-batch", key)
    assert forgotten.exit_code == 0, forgotten.stderr
    assert forgotten.stdout == (
        f"answers: batch {key} forgotten: its 6 question(s) without an answer are free, and "
        "the next `overbrainer answers` sends them again. If the provider made this batch and "
        f"runs it, they are paid twice (its answers are never collected), and the ${bound:.4f} "
        "it was expected to cost no longer counts against the budget.\n"
    )
    assert len(provider.requests) == asked  # --forget-batch asks the provider nothing
    provider._rules.clear()
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert len(answered(project_dir)) == 6 and len(provider.submitted()) == 1


def test_forget_batch_names_the_live_batches_when_none_is_it(run_cli, project_dir, provider):
    six(project_dir)
    provider.hold = True
    assert run_cli("answers", "--no-wait").exit_code == 0
    [batch] = provider.submitted()
    result = run_cli("answers", "--forget-batch", "batch_nope")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        f"error: .overbrainer/batches.jsonl has no live batch `batch_nope` (live: {batch.id})\n"
    )
    result = run_cli("answers", "--forget-batch", batch.id, "--cancel")
    assert result.exit_code == 2
    assert "--forget-batch goes alone: it gives up a batch, nothing more" in result.stderr
    assert batch.id in ledger(project_dir) and '"forgotten"' not in ledger(project_dir)


def test_a_batch_left_running_counts_against_every_budget_until_collected(
    run_cli, project_dir, provider
):
    (project_dir / "overbrainer.toml").write_text(
        BATCH_CONFIG.replace("batch = true", "batch = true\nmax_tokens = 20")
        + "\n[budget]\nmax_usd = 1\n"
    )
    six(project_dir)
    provider.hold = True
    result = run_cli("answers", "--no-wait")
    assert result.exit_code == 0, result.stderr
    [line] = [json.loads(text) for text in ledger(project_dir).splitlines()
              if '"projected_usd"' in text]
    projected = line["projected_usd"]
    assert projected > 0
    plan = json.loads(run_cli("plan", "--json").stdout)
    assert plan["spent_usd"] == pytest.approx(projected, abs=1e-4)
    provider.hold = False
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(run_cli("plan", "--json").stdout)
    assert plan["spent_usd"] == pytest.approx(SIX_ONLINE / 2, abs=1e-4)  # the real cost only


def test_stale_answers_are_redone_in_batch_in_place(run_cli, project_dir, provider):
    questions = six(project_dir)
    assert run_cli("answers").exit_code == 0
    prompt = project_dir / "prompts" / "answer_system.txt"
    prompt.write_text("new|" + prompt.read_text())
    before = [r["id"] for r in lines(project_dir, "answers.jsonl")]
    result = run_cli("answers", "--stale")
    assert result.exit_code == 0, result.stderr
    _, again = provider.submitted()
    assert sorted(again.questions()) == sorted(q["id"] for q in questions)
    records = lines(project_dir, "answers.jsonl")
    assert [r["id"] for r in records] == before  # each in its old line's place
    assert {r["meta"]["batch"] for r in records} == {again.id}
    plan = json.loads(run_cli("plan", "--json").stdout)
    assert plan["stale"]["answers"]["stale"] == 0


def test_plan_leaves_out_what_a_live_batch_holds(run_cli, project_dir, provider):
    """Issue 43's probe: after `answers --no-wait`, `plan` counted the batch's questions as
    still to answer (and to redo, when stale): paid twice on paper."""
    six(project_dir)
    before = json.loads(run_cli("plan", "--json").stdout)["stages"]["answers"]["requests"]
    provider.hold = True
    result = run_cli("answers", "--no-wait")
    assert result.exit_code == 0, result.stderr
    assert "6 waiting" in result.stdout
    found = json.loads(run_cli("plan", "--json").stdout)
    assert found["stages"]["answers"]["requests"] == before - 6
    assert found["stale"]["answers"]["stale"] == 0
    # Held for the batch, not paid: said apart, and still counted against a budget.
    assert found["held_usd"] > 0 and found["spent_usd"] >= found["held_usd"]
    # Training counts the batch's answers: they are on their way, split will train on them.
    config = project_dir / "overbrainer.toml"
    config.write_text(config.read_text() + LOCAL_TRAINING)
    trained = json.loads(run_cli("plan", "--json").stdout)["training"]
    from overbrainer.pipeline.projection import CHARS_PER_TOKEN
    from overbrainer.plan.training import QUESTION_CHARS

    left = json.loads(run_cli("plan", "--json").stdout)["stages"]["answers"]["requests"]
    each = QUESTION_CHARS + 2600 * CHARS_PER_TOKEN  # the prior: no answer yet
    coming = (left + 6) * 0.9  # the answers left and the batch's 6, less eval_ratio
    assert trained["tokens_per_epoch"] == int(coming * each) // CHARS_PER_TOKEN, trained
    [total] = [line for line in run_cli("plan").stdout.splitlines() if line.startswith("total")]
    paid = found["spent_usd"] - found["held_usd"]
    assert f"spent so far ${paid:.4f} (and ${found['held_usd']:.4f} held for live batches)" in total
