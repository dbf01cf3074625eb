"""A fatal provider error mid-stage: replies already asked for are kept, nothing new is asked."""

from __future__ import annotations

import json
import time

from fake_provider import Reply, openai_completion
from pipeline_data import PIPELINE_CONFIG, lines, seed_questions

NO_CREDIT = Reply({"error": {"message": "insufficient credit"}}, status=402)


def asked(*texts: str):
    return lambda seen: seen.model == "parent-model" and seen.prompt in texts


def test_a_402_lets_the_requests_in_flight_finish_and_keeps_their_answers(
    run_cli, project_dir, provider
):
    seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(10)]})
    # Four in flight (concurrency = 4): q3 is refused while q0, q1 and q2 are still answered.
    provider.on(asked("q0", "q1", "q2"), Reply(delay=0.4), times=None)
    provider.on(asked("q3"), Reply(NO_CREDIT.body, status=402, delay=0.05))
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: HTTP 402: insufficient credit\n")
    assert result.stdout.startswith("answers: 3 done, 0 skipped, 0 failed, 0 excluded;")
    kept = sorted(r["messages"][0]["content"] for r in lines(project_dir, "answers.jsonl"))
    assert kept == ["q0", "q1", "q2"]  # paid for, so kept
    assert sorted(s.prompt for s in provider.chats()) == ["q0", "q1", "q2", "q3"]
    history = (project_dir / ".overbrainer" / "history.jsonl").read_text().splitlines()
    entry = json.loads(history[-1])
    assert (entry["status"], entry["done"], entry["output_tokens"]) == ("failed", 3, 60)

    result = run_cli("answers")  # the rerun pays only for what was not answered
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 7 done, 3 skipped")


def test_a_request_waiting_to_be_retried_is_not_sent_after_a_fatal_error(
    run_cli, project_dir, provider
):
    seed_questions(project_dir, {("ownership", "moves"): ["q0", "q1"]})
    provider.on(asked("q0"), Reply({"error": {"message": "slow down"}}, status=429,
                                   headers={"Retry-After": "30"}))
    provider.on(asked("q1"), Reply({"error": {"message": "bad key"}}, status=401, delay=0.2))
    started = time.monotonic()
    result = run_cli("answers")
    assert time.monotonic() - started < 10  # the 30 s wait was not sat out
    assert result.exit_code == 1
    assert result.stderr.endswith("error: authentication failed, check the provider API key\n")
    assert result.stdout.startswith("answers: 0 done, 0 skipped, 0 failed, 0 excluded;")
    assert sorted(s.prompt for s in provider.chats()) == ["q0", "q1"]  # q0 never asked again
    assert lines(project_dir, "answers.jsonl") == []


def test_questions_keep_a_batch_in_flight_and_ask_for_no_other(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 2")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): [], ("ownership", "borrows"): []})
    provider.on(
        lambda s: s.prompt.startswith("questions|ownership|moves|"),
        Reply(openai_completion('["Why does a move happen?", "What is moved?"]'), delay=0.4),
    )
    provider.on(lambda s: s.prompt.startswith("questions|ownership|borrows|"),
                Reply({"error": {"message": "no such model"}}, status=404, delay=0.05))
    result = run_cli("questions", "--topic", "ownership")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: HTTP 404: no such model\n")
    assert [q["text"] for q in lines(project_dir, "questions.jsonl")] == [
        "Why does a move happen?", "What is moved?"
    ]
    assert len(provider.chats()) == 2  # moves needs a third question: not asked for
