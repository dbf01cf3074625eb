"""The stage commands against the loopback provider, from the command line."""

from __future__ import annotations

import gc
import json
import re
import time

import pytest
from tests.helpers.fake_provider import Reply, anthropic_message, openai_completion
from tests.helpers.pipeline_data import API_KEY, PIPELINE_CONFIG, lines, seed_questions

from overbrainer.pipeline.ids import question_id, subtopic_id


def parent_asked(provider, text):
    return lambda seen: seen.model == "parent-model" and seen.prompt == text


def test_subtopics_then_questions_fill_every_target(run_cli, project_dir, provider):
    result = run_cli("subtopics")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "subtopics: 2 done, 0 skipped, 0 failed, 0 excluded; tokens 20 in, 40 out; cost $0.0001\n"
    )
    assert "subtopics: 2 to process" in result.stderr
    subtopics = lines(project_dir, "subtopics.jsonl")
    assert [(s["topic"], len(s["id"])) for s in subtopics] == [
        ("ownership", 32), ("ownership", 32), ("lifetimes", 32)
    ] or sorted(s["topic"] for s in subtopics) == ["lifetimes", "ownership", "ownership"]
    for subtopic in subtopics:
        assert subtopic["id"] == subtopic_id(subtopic["topic"], subtopic["name"])

    result = run_cli("questions")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("questions: 3 done, 0 skipped, 0 failed, 0 excluded;")
    questions = lines(project_dir, "questions.jsonl")
    per_subtopic = {s["id"]: 0 for s in subtopics}
    for question in questions:
        per_subtopic[question["subtopic_id"]] += 1
        assert question["id"] == question_id(question["subtopic_id"], question["text"])
        # The reference's fields, and what made it (a field the reference reads past).
        assert set(question) == {"id", "topic", "subtopic_id", "subtopic", "text", "fingerprint"}
    targets = {"ownership": 3, "lifetimes": 2}
    assert per_subtopic == {s["id"]: targets[s["topic"]] for s in subtopics}
    # batches of min(question_batch_size = 2, missing)
    counts = [int(s.prompt.split("|")[3]) for s in provider.chats("gen-model")
              if s.prompt.startswith("questions|")]
    assert sorted(counts) == [1, 1, 2, 2, 2]
    assert gc.get_freeze_count() == 0  # what the stage froze is collectable again


def test_a_rerun_makes_no_request_and_needs_no_credentials(run_cli, project_dir, provider):
    assert run_cli("run").exit_code == 0
    made = len(provider.requests)
    # A key that could not be resolved: nothing may ask for it.
    (project_dir / ".env").write_text(
        (project_dir / ".env").read_text() + "OVERBRAINER_PROVIDERS__MAIN__API_KEY=vault:kv/x#y\n"
    )
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert len(provider.requests) == made
    assert result.stdout.splitlines() == [
        "plan: $0.0000 to spend; spent so far $0.0012 (`overbrainer plan` shows how)",
        "subtopics: 0 done, 2 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000",
        "questions: 0 done, 3 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000",
        "answers: 0 done, 8 skipped, 0 failed, 0 excluded; tokens 0 in, 0 out; cost $0.0000",
        "split: 7 train, 1 eval, 0 excluded, 0 orphaned",
    ]


def test_an_unknown_topic_fails_before_any_request(run_cli, provider):
    for stage in ("subtopics", "questions", "answers", "split"):
        result = run_cli(stage, "--topic", "nope")
        assert result.exit_code == 1
        assert result.stderr == "error: unknown topic `nope`\n"
    assert provider.requests == []


def test_split_has_no_force(run_cli):
    assert run_cli("split", "--force").exit_code == 2


def test_topic_selects_and_force_redoes_only_that_topic(run_cli, project_dir, provider):
    assert run_cli("subtopics", "--topic", "lifetimes").exit_code == 0
    assert {s["topic"] for s in lines(project_dir, "subtopics.jsonl")} == {"lifetimes"}
    assert run_cli("subtopics").exit_code == 0
    before = lines(project_dir, "subtopics.jsonl")
    result = run_cli("subtopics", "--topic", "ownership", "--force")
    assert result.exit_code == 0, result.stderr
    after = lines(project_dir, "subtopics.jsonl")
    kept = [s for s in before if s["topic"] == "lifetimes"]
    assert [s for s in after if s["topic"] == "lifetimes"] == kept
    new = [s for s in after if s["topic"] == "ownership"]
    assert len(new) == 2
    assert not {s["id"] for s in new} & {s["id"] for s in before}


def test_force_answers_again_only_the_selected_topic(run_cli, project_dir, provider):
    seed_questions(project_dir, {("ownership", "moves"): ["o1", "o2"],
                                 ("lifetimes", "elision"): ["l1"]})
    assert run_cli("answers").exit_code == 0
    before = {r["id"]: r for r in lines(project_dir, "answers.jsonl")}
    result = run_cli("answers", "--topic", "lifetimes", "--force")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 1 done, 0 skipped")
    after = lines(project_dir, "answers.jsonl")
    assert sorted(r["id"] for r in after) == sorted(before)
    assert [s.prompt for s in provider.chats("parent-model")][3:] == ["l1"]


def test_force_forgets_the_topic_questions_and_their_rejects(run_cli, project_dir, provider):
    seed_questions(project_dir, {("ownership", "moves"): ["o1", "o2", "o3"],
                                 ("lifetimes", "elision"): ["l1", "l2"]})
    rejects = [{"kind": "question", "topic": t, "text": f"old {t}", "reason": "lexical"}
               for t in ("ownership", "lifetimes")]
    (project_dir / "data" / "rejected.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rejects)
    )
    result = run_cli("questions", "--topic", "lifetimes", "--force")
    assert result.exit_code == 0, result.stderr
    texts = [(q["topic"], q["text"]) for q in lines(project_dir, "questions.jsonl")]
    assert texts[:3] == [("ownership", "o1"), ("ownership", "o2"), ("ownership", "o3")]
    assert [t for t, _ in texts[3:]] == ["lifetimes", "lifetimes"]
    assert "l1" not in [text for _, text in texts]
    assert lines(project_dir, "rejected.jsonl") == rejects[:1]


def test_answer_records_have_the_reference_format(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("question_batch_size = 2", "include_system_prompt = true")
    (project_dir / "overbrainer.toml").write_text(config)
    [question] = seed_questions(project_dir, {("ownership", "moves"): ["Why move?"]})
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [record] = lines(project_dir, "answers.jsonl")
    made = record["meta"].pop("fingerprint")  # this tool's, read past by the reference
    assert re.fullmatch("[0-9a-f]{16}", made)
    assert record == {
        "id": question["id"],
        "topic": "ownership",
        "subtopic": "moves",
        "messages": [
            {"role": "system", "content": "system|ownership"},
            {"role": "user", "content": "Why move?"},
            {"role": "assistant", "content": "The answer to: Why move?",
             "reasoning_content": "Thinking about: Why move?"},
        ],
        "meta": {"model": "parent-model", "input_tokens": 10, "output_tokens": 20,
                 "finish_reason": "stop", "reasoning_kind": "raw", "excluded": None},
    }
    assert list(record) == ["id", "topic", "subtopic", "messages", "meta"]
    line = (project_dir / "data" / "answers.jsonl").read_text()
    record["meta"]["fingerprint"] = made
    assert line == json.dumps(record, separators=(",", ":")) + "\n"  # compact, one a line
    # The system prompt is sent either way; it is kept only when asked.
    assert provider.chats("parent-model")[0].system == "system|ownership"


def test_every_exclusion(run_cli, project_dir, provider):
    texts = ["cut", "refused", "filtered", "blank", "summary", "no reasoning", "cut and blank",
             "ok"]
    seed_questions(project_dir, {("ownership", "moves"): texts})
    summary = openai_completion("A")
    summary["choices"][0]["message"]["reasoning_details"] = [
        {"type": "reasoning.summary", "summary": "S"}
    ]
    replies = {
        "cut": openai_completion("A", finish="length", reasoning="R"),
        "refused": openai_completion(None, refusal="I will not", reasoning="R"),
        "filtered": openai_completion("A", finish="content_filter", reasoning="R"),
        "blank": openai_completion("  \n", reasoning="R"),
        "summary": summary,
        "no reasoning": openai_completion("A"),
        "cut and blank": openai_completion("", finish="length"),
        "ok": openai_completion("<think>R</think>A"),
    }
    for text, body in replies.items():
        provider.on(parent_asked(provider, text), Reply(body))
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 1 done, 0 skipped, 0 failed, 7 excluded;")
    found = {
        r["messages"][-2]["content"]: (r["meta"]["excluded"], r["meta"]["finish_reason"],
                                       r["meta"]["reasoning_kind"])
        for r in lines(project_dir, "answers.jsonl")
    }
    assert found == {
        "cut": ("truncated", "length", "raw"),
        "refused": ("refused", "refusal", "raw"),
        "filtered": ("refused", "content_filter", "raw"),
        "blank": ("empty", "stop", "raw"),
        "summary": ("no_raw_reasoning", "stop", "summary"),
        "no reasoning": ("no_raw_reasoning", "stop", "none"),
        "cut and blank": ("truncated", "length", "none"),
        "ok": (None, "stop", "raw"),
    }
    records = {r["messages"][-2]["content"]: r for r in lines(project_dir, "answers.jsonl")}
    assert "reasoning_content" not in records["summary"]["messages"][-1]
    assert records["ok"]["messages"][-1] == {
        "role": "assistant", "content": "A", "reasoning_content": "R"
    }
    result = run_cli("split")
    assert result.stdout == (
        "split: 1 train, 0 eval, 7 excluded "
        "(truncated 2, refused 2, empty 1, no_raw_reasoning 2), 0 orphaned\n"
    )


def test_a_parent_that_hides_its_reasoning_is_refused_before_any_request(
    run_cli, project_dir, provider
):
    config = PIPELINE_CONFIG.replace('model = "parent-model"', 'model = "openai/gpt-5"')
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["Why?"]})
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        "error: roles.parent: reasoning = true, but `openai/gpt-5` returns only a summary of "
        "its reasoning, never the raw text: every answer would be excluded (no_raw_reasoning) "
        "after being paid for. Either set roles.parent.reasoning = false to train on the "
        "answers alone, or make the parent a model that returns its raw reasoning (an "
        "openai-protocol server of an open-weights reasoning model such as gpt-oss, "
        "DeepSeek-R1 or Qwen3)"
    )
    assert provider.chats() == []
    assert lines(project_dir, "answers.jsonl") == []
    result = run_cli("run")  # refused before the generator is paid for anything either
    assert result.exit_code == 1
    assert "returns only a summary of its reasoning" in result.stderr
    assert provider.chats() == []

    (project_dir / "overbrainer.toml").write_text(config.replace("reasoning = true", ""))
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    [record] = lines(project_dir, "answers.jsonl")
    assert record["meta"]["reasoning_kind"] == "summary"
    assert record["meta"]["excluded"] is None
    assert "reasoning_content" not in record["messages"][-1]


def test_the_anthropic_protocol_is_named_as_the_cause(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace('protocol = "openai"', 'protocol = "anthropic"').replace(
        'model = "parent-model"', 'model = "claude-sonnet-4-5"'
    )
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["Why?"]})
    result = run_cli("answers")
    assert result.exit_code == 1
    assert ("providers.main speaks the anthropic protocol to `claude-sonnet-4-5`, which never "
            "returns raw reasoning" in result.stderr)
    assert provider.chats() == []
    check = run_cli("config", "check")
    assert check.exit_code == 1
    assert "problem: roles.parent: reasoning = true, but providers.main speaks" in check.stderr


@pytest.mark.parametrize(
    ("protocol", "model", "hidden"),
    [
        ("anthropic", "claude-sonnet-4-5", True),
        ("anthropic", "anthropic/claude-opus-4-1", True),
        ("anthropic", "qwen3-235b-a22b", False),  # an open-weights model in that dialect
        ("openai", "openai/o3", True),
        ("openai", "anthropic/claude-sonnet-4", True),
        ("openai", "gpt-4.1", True),
        ("openai", "claude-3", True),
        ("openai", "google/gemini-2.5-pro", True),
        ("openai", "o4-mini", True),
        ("openai", "openai/gpt-oss-120b", False),
        ("openai", "gpt-oss-20b", False),
        ("openai", "deepseek/deepseek-r1", False),
        ("openai", "qwen/qwq-32b", False),
        ("openai", "olmo-2", False),
    ],
)
def test_which_parents_hide_their_reasoning(protocol, model, hidden):
    from overbrainer.pipeline.preflight import hides_reasoning

    assert hides_reasoning(protocol, model) is hidden


def test_401_stops_the_stage_keeping_completed_answers_and_no_key_anywhere(
    run_cli, project_dir, provider
):
    config = PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 1")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2", "q3", "q4"]})
    provider.on(parent_asked(provider, "q3"),
                Reply({"error": {"message": f"invalid key {API_KEY}"}}, status=401), times=None)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stdout.startswith("answers: 2 done, 0 skipped, 0 failed, 0 excluded;")
    assert result.stderr.endswith("error: providers.main: the key was refused (401): check "
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY\n")
    kept = [r["messages"][0]["content"] for r in lines(project_dir, "answers.jsonl")]
    assert kept == ["q1", "q2"]
    assert provider.chats("parent-model")[-1].prompt == "q3"  # q4 never asked
    assert provider.chats()[0].headers["Authorization"] == f"Bearer {API_KEY}"
    assert API_KEY not in result.stdout + result.stderr
    for path in project_dir.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert API_KEY not in path.read_text(errors="replace"), path
    [entry] = [json.loads(x) for x in (project_dir / ".overbrainer/history.jsonl").read_text()
               .splitlines()]
    assert entry["status"] == "failed"


def test_403_drops_the_provider_text(run_cli, project_dir, provider):
    seed_questions(project_dir, {("ownership", "moves"): ["q1"]})
    provider.on(None, Reply({"error": {"message": f"key {API_KEY} is not allowed"}}, status=403))
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: providers.main: permission denied (403): check that "
        "OVERBRAINER_PROVIDERS__MAIN__API_KEY may use this model\n"
    )
    assert API_KEY not in result.stderr


def test_failed_items_are_retried_by_the_next_run(run_cli, project_dir, provider):
    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2", "q3"]})
    bad = Reply({"error": {"message": "bad input"}}, status=400)
    provider.on(parent_asked(provider, "q2"), bad)
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stdout.startswith("answers: 2 done, 0 skipped, 1 failed, 0 excluded;")
    assert f"answers: {questions[1]['id']} failed: HTTP 400: bad input" in result.stderr
    assert result.stderr.endswith(
        "error: 1 answers item(s) failed; run the command again to retry them\n"
    )
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("answers: 1 done, 2 skipped, 0 failed, 0 excluded;")
    assert [s.prompt for s in provider.chats("parent-model")].count("q2") == 2


def test_retries_are_announced_and_honour_retry_after(run_cli, project_dir, provider):
    [question] = seed_questions(project_dir, {("ownership", "moves"): ["q1"]})
    provider.on(None, Reply({"error": {"message": "slow down"}}, status=429,
                            headers={"Retry-After": "0.3"}))
    provider.on(None, Reply({"error": {"message": "busy"}}, status=500))
    started = time.monotonic()
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert time.monotonic() - started >= 0.3
    assert (
        "answers: HTTP 429: slow down; waiting 0.3s: the provider's rate limit sets the pace "
        "from now on" in result.stderr
    )
    assert "1 request(s) refused by the rate limit (429), waited out" in result.stdout
    assert f"answers: {question['id']}: HTTP 500: busy; retrying in 0.0s" in result.stderr
    assert len(provider.chats()) == 3


def test_list_replies_are_asked_again_then_fail(run_cli, project_dir, provider):
    provider.on(lambda s: s.model == "gen-model" and "lifetimes" in s.prompt,
                Reply(openai_completion("I cannot list things.")), times=None)
    result = run_cli("subtopics")
    assert result.exit_code == 1
    assert (
        "warning: subtopics: lifetimes: the answer is not a JSON array of strings (it began "
        "'I cannot list things.'); asking again (`overbrainer log --failed` shows the replies)"
        in result.stderr
    )
    assert (
        "subtopics: lifetimes failed: no JSON array of strings after all retries (the last "
        "began 'I cannot list things.')" in result.stderr
    )
    logged = run_cli("log", "--failed", "--stage", "subtopics")
    assert logged.exit_code == 0, logged.stderr
    assert logged.stdout.count("failed: the answer is not a JSON array of strings") == 3
    assert "< I cannot list things." in logged.stdout
    assert "> subtopics|lifetimes|" in logged.stdout
    # 1 + max_retries (2) asks for lifetimes, 1 for ownership: the tokens of each count.
    assert result.stdout == (
        "subtopics: 1 done, 0 skipped, 1 failed, 0 excluded; tokens 40 in, 80 out; "
        "cost $0.0002\n"
    )
    assert result.stderr.endswith(
        "error: 1 subtopics item(s) failed; run the command again to retry them\n"
    )


def test_subtopics_drop_names_stored_rejected_or_repeated(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("subtopics = 2", "subtopics = 4")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "Moves"): []})
    # A subtopic set aside by the reference tool: its text is its name.
    (project_dir / "data" / "rejected.jsonl").write_text(
        json.dumps({"kind": "subtopic", "id": "0", "topic": "ownership", "name": "Drop"}) + "\n"
    )
    provider.on(lambda s: s.model == "gen-model" and "ownership" in s.prompt,
                Reply(openai_completion('["moves", "Drop", "A", " a ", "B", "C", "D"]')))
    result = run_cli("subtopics", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    assert [s["name"] for s in lines(project_dir, "subtopics.jsonl")] == ["Moves", "A", "B", "C"]
    assert provider.chats()[0].prompt == "subtopics|ownership|3"
    assert result.stdout.startswith("subtopics: 1 done, 0 skipped, 0 failed, 3 excluded;")


def test_near_duplicate_questions_are_rejected_for_good(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("question_batch_size = 2", "question_batch_size = 5")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["why does a move invalidate the source"]})
    provider.on(
        lambda s: s.prompt.startswith("questions|"),
        Reply(openai_completion(json.dumps([
            "Why does a move invalidate the source?",
            "When is a value copied instead of moved?",
            "when is a value copied instead of moved",
            "How do closures capture their environment?",
        ]))),
    )
    result = run_cli("questions", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    texts = [q["text"] for q in lines(project_dir, "questions.jsonl")]
    assert texts == [
        "why does a move invalidate the source",
        "When is a value copied instead of moved?",
        "How do closures capture their environment?",
    ]
    rejected = lines(project_dir, "rejected.jsonl")
    assert [(r["kind"], r["text"]) for r in rejected] == [
        ("question", "Why does a move invalidate the source?"),
        ("question", "when is a value copied instead of moved"),
    ]
    # The reference tool's shape, and nothing more: why, in a file of its own.
    assert all(set(r) == {"kind", "id", "topic", "subtopic_id", "text"} for r in rejected)
    reasons = lines(project_dir, "rejected.reasons.jsonl")
    assert [(r["id"], r["reason"]) for r in reasons] == [(r["id"], "lexical") for r in rejected]
    assert "2 excluded" in result.stdout


def test_questions_stop_when_the_generator_repeats_itself(run_cli, project_dir, provider):
    seed_questions(project_dir, {("lifetimes", "elision"): []})
    provider.on(lambda s: s.prompt.startswith("questions|"),
                Reply(openai_completion('["What is elision?"]')), times=None)
    result = run_cli("questions", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert ("subtopic `elision`: stopped at 1 of 2 questions, the generator kept repeating "
            "itself") in result.stderr
    # one batch added the question, then max(max_retries, 1) = 2 added nothing
    assert len(provider.chats()) == 3


def test_the_embedder_rejects_paraphrases(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG + (
        '\n[roles.embedder]\nprovider = "main"\nmodel = "embed-model"\n'
    ).replace("[pipeline]", "")
    config = config.replace("question_batch_size = 2", "question_batch_size = 3")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("lifetimes", "elision"): []})
    vectors = {"What is lifetime elision?": [1.0, 0.0],
               "Explain the rules the compiler uses to infer lifetimes.": [0.98, 0.05],
               "Why can a struct not hold a reference without a lifetime?": [0.0, 1.0]}
    provider.embedding = lambda text: vectors[text]
    provider.on(lambda s: s.prompt.startswith("questions|"),
                Reply(openai_completion(json.dumps(list(vectors)))))
    result = run_cli("questions", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert [q["text"] for q in lines(project_dir, "questions.jsonl")] == [
        "What is lifetime elision?",
        "Why can a struct not hold a reference without a lifetime?",
    ]
    assert [r["reason"] for r in lines(project_dir, "rejected.reasons.jsonl")] == ["embedding"]
    assert [s.model for s in provider.requests if s.path == "embeddings"] == ["embed-model"]
    assert "tokens 16 in" in result.stdout  # 10 for the ask + 2 x 3 texts embedded


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("questions|{{ nope }}", "invalid template questions.txt: undefined variable `nope`"),
        ("questions|{{ topic",
         "invalid template questions.txt: line 1: unexpected end of template"),
    ],
)
def test_invalid_templates_fail_before_any_request(run_cli, project_dir, provider, template,
                                                   message):
    seed_questions(project_dir, {("lifetimes", "elision"): []})
    (project_dir / "prompts" / "questions.txt").write_text(template)
    result = run_cli("questions")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {message}")
    assert provider.requests == []


def test_the_built_in_prompts_are_used_without_an_override(run_cli, project_dir, provider):
    for path in (project_dir / "prompts").iterdir():
        path.unlink()
    provider.on(None, Reply(openai_completion('["a", "b"]')), times=None)
    assert run_cli("subtopics", "--topic", "ownership").exit_code == 0
    prompt = provider.chats()[0].prompt
    assert prompt.startswith('You are planning a training curriculum on the topic "ownership".')
    assert "List 2 distinct subtopics" in prompt


def test_an_invalid_record_is_named_by_file_and_line(run_cli, project_dir, provider):
    seed_questions(project_dir, {("lifetimes", "elision"): ["a", "b"]})
    path = project_dir / "data" / "questions.jsonl"
    first, second = path.read_text().splitlines()
    path.write_text(f'{first}\n{{"id": 1}}\n{second}\n')
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith("error: data/questions.jsonl:2: invalid record\n")
    assert provider.requests == []


def test_requests_in_flight_stay_within_the_concurrency(run_cli, project_dir, provider):
    provider.latency = 0.05
    seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(12)]})
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    assert provider.max_in_flight == 4
    assert "answers: 12 to process" in result.stderr
    assert [f"answers: {k}/12" for k in (2, 3, 4, 5, 6, 8, 9, 10, 11, 12)] == [
        line for line in result.stderr.splitlines() if line.startswith("answers: ")
        and "/" in line
    ]


def test_prices_are_asked_while_the_requests_go_on(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 1")
    (project_dir / "overbrainer.toml").write_text(config)
    provider.latency = 0.02
    seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(8)]})
    result = run_cli("answers")
    assert result.stdout.endswith("; cost $0.0009\n")  # 8 x (10 x 3e-6 + 20 x 4e-6)
    paths = [s.path for s in provider.requests]
    assert paths.count("models?detailed=true") == 1
    assert paths.index("models?detailed=true") < 3  # not starved by the answers


def test_a_provider_without_a_url_is_named(run_cli, project_dir, provider):
    (project_dir / ".env").write_text("")
    seed_questions(project_dir, {("ownership", "moves"): ["q1"]})
    result = run_cli("answers")
    assert result.exit_code == 1
    assert result.stderr.endswith(
        "error: providers.main.base_url is not set: set OVERBRAINER_PROVIDERS__MAIN__BASE_URL\n"
    )


def test_the_anthropic_protocol_end_to_end(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace('protocol = "openai"', 'protocol = "anthropic"').replace(
        "reasoning = true", "reasoning = false"
    )
    (project_dir / "overbrainer.toml").write_text(config)
    result = run_cli("run")
    assert result.exit_code == 0, result.stderr
    assert {s.path for s in provider.chats()} == {"messages"}
    records = lines(project_dir, "answers.jsonl")
    assert {r["meta"]["reasoning_kind"] for r in records} == {"summary"}
    assert all(r["meta"]["excluded"] is None for r in records)


NO_TOPICS = "error: no topics: add a [[topics]] table to overbrainer.toml\n"


def test_stages_refuse_a_project_without_topics(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.split("[[topics]]")[0] + "[providers" + PIPELINE_CONFIG.split(
        "[providers", 1)[1]
    (project_dir / "overbrainer.toml").write_text(config)
    assert run_cli("config", "check").exit_code == 0  # a valid configuration, with no work
    for stage in ("subtopics", "questions", "answers", "split", "run"):
        result = run_cli(stage)
        assert result.exit_code == 1, stage
        assert result.stderr == NO_TOPICS, stage
    assert provider.requests == []
    assert not (project_dir / "data").exists()


def test_split_with_no_usable_answer_writes_nothing(run_cli, project_dir):
    from tests.helpers.pipeline_data import answer

    questions = seed_questions(project_dir, {("ownership", "moves"): ["q1", "q2"]})
    (project_dir / "data" / "answers.jsonl").write_text(
        json.dumps(answer(questions[0], "truncated")) + "\n"
    )
    result = run_cli("split")
    assert result.exit_code == 1
    assert result.stdout == "split: 0 train, 0 eval, 1 excluded (truncated 1), 0 orphaned\n"
    assert result.stderr == (
        "error: no usable answer to split (run `overbrainer answers` first): "
        "train.jsonl and eval.jsonl are left as they were\n"
    )
    assert not (project_dir / "data" / "train.jsonl").exists()
    assert not (project_dir / "data" / "eval.jsonl").exists()


def test_questions_on_a_topic_without_subtopics_make_them_first(run_cli, project_dir, provider):
    result = run_cli("questions", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["subtopics", "questions"]
    assert [s["topic"] for s in lines(project_dir, "subtopics.jsonl")] == ["lifetimes"]
    assert {q["topic"] for q in lines(project_dir, "questions.jsonl")} == {"lifetimes"}


def test_split_of_one_topic_narrows_the_counts_not_the_split(run_cli, project_dir, provider):
    assert run_cli("run").exit_code == 0
    before = {
        name: (project_dir / "data" / name).read_bytes() for name in ("train.jsonl", "eval.jsonl")
    }
    result = run_cli("split", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "split: 2 train, 0 eval, 0 excluded, 0 orphaned\n"
    # The whole split, every topic's lines, as before.
    for name, data in before.items():
        assert (project_dir / "data" / name).read_bytes() == data


def test_an_open_weights_parent_behind_the_anthropic_protocol_keeps_its_raw_reasoning(
    run_cli, project_dir, provider
):
    """vLLM, LiteLLM and llama.cpp speak the anthropic protocol for open-weights models:
    their thinking blocks are unsigned (Anthropic signs its own), or the reasoning comes
    as a ``<think>`` prefix of the text; either is raw, and never reaches the answer."""
    config = PIPELINE_CONFIG.replace('protocol = "openai"', 'protocol = "anthropic"').replace(
        'model = "parent-model"', 'model = "qwen3-32b"'
    )
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["block?", "prefix?", "signed?"]})
    provider.prices["qwen3-32b"] = ("0.000001", "0.000001")

    def reply(seen):
        question = seen.prompt
        if question == "block?":
            blocks = [{"type": "thinking", "thinking": "Let me see."},
                      {"type": "text", "text": "Because."}]
        elif question == "prefix?":
            blocks = [{"type": "text", "text": "<think>Hmm, first this.</think>\n\nThat."}]
        else:
            blocks = [{"type": "thinking", "thinking": "Summary.", "signature": "abc"},
                      {"type": "text", "text": "Signed."}]
        return anthropic_message(blocks)

    provider.on(lambda seen: seen.model == "qwen3-32b", reply, times=None)
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    found = {r["messages"][-2]["content"]: r for r in lines(project_dir, "answers.jsonl")}
    block, prefix, signed = found["block?"], found["prefix?"], found["signed?"]
    assert block["meta"]["reasoning_kind"] == "raw"
    assert block["messages"][-1] == {"role": "assistant", "content": "Because.",
                                     "reasoning_content": "Let me see."}
    assert prefix["meta"]["reasoning_kind"] == "raw"
    assert prefix["messages"][-1] == {"role": "assistant", "content": "That.",
                                      "reasoning_content": "Hmm, first this."}
    assert signed["meta"]["reasoning_kind"] == "summary"
    assert signed["meta"]["excluded"] == "no_raw_reasoning"


def test_the_questions_summary_counts_a_subtopic_that_stopped_at_none(
    run_cli, project_dir, provider
):
    seed_questions(project_dir, {("lifetimes", "elision"): ["What is elision?"]})
    provider.on(lambda s: s.prompt.startswith("questions|"),
                Reply(openai_completion('["What is elision?"]')), times=None)
    result = run_cli("questions", "--topic", "lifetimes")
    assert result.exit_code == 0, result.stderr
    assert "stopped at 1 of 2 questions" in result.stderr
    assert result.stdout.startswith(
        "questions: 0 done, 0 skipped, 0 failed, 2 excluded, 1 with nothing new;"
    )
