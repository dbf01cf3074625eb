"""The typed records (``pipeline.records.Question``, ``RejectedQuestion``) write the same
bytes as the dicts they replaced: the keys in the reference's order, compact, UTF-8 kept."""

from __future__ import annotations

import json

from tests.helpers.fake_provider import Reply, openai_completion
from tests.helpers.pipeline_data import PIPELINE_CONFIG, seed_questions

QUESTION_KEYS = ["id", "topic", "subtopic_id", "subtopic", "text", "fingerprint"]
REJECTED_KEYS = ["kind", "id", "topic", "subtopic_id", "text"]


def _lines_in_order(raw: bytes, keys: list[str]) -> list[dict[str, object]]:
    """Each line of ``raw``, checked to be the compact line of its keys in ``keys``' order."""
    records = []
    for line in raw.decode().splitlines():
        record = json.loads(line)
        assert list(record) == keys
        assert line == json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        records.append(record)
    return records


def test_questions_and_their_rejects_keep_their_bytes(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("question_batch_size = 2", "question_batch_size = 5")
    (project_dir / "overbrainer.toml").write_text(config)
    seed_questions(project_dir, {("ownership", "moves"): ["why does a move invalidate the source"]})
    provider.on(
        lambda s: s.prompt.startswith("questions|"),
        Reply(openai_completion(json.dumps([
            "Why does a move invalidate the source?",
            "Qu'est-ce qu'un emprunt « mutable » ?",
            "qu'est-ce qu'un emprunt « mutable »",
        ]))),
    )
    result = run_cli("questions", "--topic", "ownership")
    assert result.exit_code == 0, result.stderr
    data = project_dir / "data"
    raw = (data / "questions.jsonl").read_bytes()
    made = _lines_in_order(raw.split(b"\n", 1)[1], QUESTION_KEYS)  # past the seeded one
    assert made[0]["text"] == "Qu'est-ce qu'un emprunt « mutable » ?"
    assert "« mutable »".encode() in raw  # UTF-8 as is, never \\u escapes
    rejected = _lines_in_order((data / "rejected.jsonl").read_bytes(), REJECTED_KEYS)
    assert [r["text"] for r in rejected] == [
        "Why does a move invalidate the source?",
        "qu'est-ce qu'un emprunt « mutable »",
    ]


ANSWER_KEYS = ["id", "topic", "subtopic", "messages", "meta"]
META_KEYS = ["model", "input_tokens", "output_tokens", "finish_reason", "reasoning_kind",
             "excluded", "fingerprint"]  # fmt: skip


def test_answers_and_their_samples_keep_their_bytes(run_cli, project_dir, provider):
    config = PIPELINE_CONFIG.replace("reasoning = true\n", "reasoning = true\nsamples = 2\n", 1)
    (project_dir / "overbrainer.toml").write_text(config)
    [question] = seed_questions(project_dir, {("ownership", "moves"): ["Pourquoi « move » ?"]})
    result = run_cli("answers")
    assert result.exit_code == 0, result.stderr
    raw = (project_dir / "data" / "answers.jsonl").read_bytes()
    answers = sorted(_lines_in_order(raw, ANSWER_KEYS), key=lambda a: "sample" in a["meta"])
    first, second = answers
    assert list(first["meta"]) == META_KEYS
    assert list(second["meta"]) == [*META_KEYS, "question", "sample"]
    assert (second["meta"]["question"], second["meta"]["sample"]) == (question["id"], 1)
    for answer in answers:
        assert [list(turn) for turn in answer["messages"]] == [
            ["role", "content"], ["role", "content", "reasoning_content"]
        ]
    assert "« move »".encode() in raw


def test_subtopics_keep_their_bytes(run_cli, project_dir, provider):
    result = run_cli("subtopics")
    assert result.exit_code == 0, result.stderr
    raw = (project_dir / "data" / "subtopics.jsonl").read_bytes()
    made = _lines_in_order(raw, ["id", "topic", "name", "fingerprint"])
    assert {s["topic"] for s in made} == {"ownership", "lifetimes"}
