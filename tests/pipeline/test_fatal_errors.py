"""A fatal provider error mid-stage: replies already asked for are kept, nothing new is asked."""

from __future__ import annotations

import json
import time

from tests.helpers.fake_provider import Reply, openai_completion
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions

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
    assert result.stderr.endswith("error: providers.main: the key was refused (401): check "
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY\n")
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
    assert result.stderr.endswith(
        "error: providers.main has no model `gen-model` (HTTP 404: no such model): check the "
        "model's name in overbrainer.toml\n"
    )
    assert [q["text"] for q in lines(project_dir, "questions.jsonl")] == [
        "Why does a move happen?", "What is moved?"
    ]
    assert len(provider.chats()) == 2  # moves needs a third question: not asked for


# --force keeps the old records until the provider has answered.

EXPIRED = Reply({"error": {"message": "expired"}}, status=401)


def data_files(project_dir):
    return {p.name: p.read_bytes() for p in (project_dir / "data").iterdir()}


def test_answers_force_with_an_expired_key_keeps_every_answer(run_cli, project_dir, provider):
    seed_questions(project_dir, {("ownership", "moves"): ["o1", "o2"],
                                 ("lifetimes", "elision"): ["l1"]})
    assert run_cli("answers").exit_code == 0
    before = data_files(project_dir)
    provider.on(None, EXPIRED, times=None)
    result = run_cli("answers", "--force")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: providers.main: the key was refused (401): check "
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY\n")
    assert data_files(project_dir) == before


def test_subtopics_and_questions_force_with_an_expired_key_keep_everything(
    run_cli, project_dir, provider
):
    assert run_cli("run").exit_code == 0
    (project_dir / "data" / "rejected.jsonl").write_text(
        json.dumps({"kind": "question", "topic": "ownership", "text": "old"}) + "\n"
        + json.dumps({"kind": "subtopic", "topic": "ownership", "text": "old"}) + "\n"
    )
    before = data_files(project_dir)
    provider.on(None, EXPIRED, times=None)
    for stage in ("subtopics", "questions"):
        result = run_cli(stage, "--topic", "ownership", "--force")
        assert result.exit_code == 1, stage
        assert data_files(project_dir) == before, stage


def test_answers_force_replaces_each_answer_only_once_its_new_one_is_written(
    run_cli, project_dir, provider
):
    config = PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 1")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["o1", "o2", "o3", "o4"]})
    assert run_cli("answers").exit_code == 0
    provider.on(asked("o1", "o2"), Reply(openai_completion("new", reasoning="R")), times=2)
    provider.on(asked("o3"), NO_CREDIT)
    result = run_cli("answers", "--force")
    assert result.exit_code == 1
    assert result.stdout.startswith("answers: 2 done, 0 skipped, 0 failed")
    found = {r["messages"][0]["content"]: r["messages"][1]["content"]
             for r in lines(project_dir, "answers.jsonl")}
    assert len(lines(project_dir, "answers.jsonl")) == 4  # one line an answer
    assert found == {"o1": "new", "o2": "new", "o3": "The answer to: o3",
                     "o4": "The answer to: o4"}


def test_the_later_of_two_answers_to_a_question_is_the_one_split_uses(run_cli, project_dir):
    # What a crash in the middle of `answers --force` leaves: an old and a new answer.
    from tests.helpers.pipeline_data import answer

    [question] = seed_questions(project_dir, {("ownership", "moves"): ["o1"]})
    old, new = answer(question, "truncated"), answer(question)
    (project_dir / "data" / "answers.jsonl").write_text(
        json.dumps(old) + "\n" + json.dumps(new) + "\n"
    )
    result = run_cli("split")
    assert result.stdout == "split: 1 train, 0 eval, 0 excluded, 0 orphaned\n"
