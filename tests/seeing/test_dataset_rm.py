"""`overbrainer dataset rm`: what the TUI's delete runs; rejected items never come back."""

from __future__ import annotations

import json

from tests.helpers.seeing_project import write_dataset


def lines(project_dir, name):
    path = project_dir / "data" / name
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_subtopic_goes_with_its_questions_and_answers(run_cli, project_dir):
    items = write_dataset(project_dir)
    moves = items["moves"]
    result = run_cli("dataset", "rm", moves["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "dataset: deleted 1 subtopic, 2 questions, 2 answers"
    assert result.stdout.splitlines()[1].startswith("split: ")
    assert [s["name"] for s in lines(project_dir, "subtopics.jsonl")] == ["borrowing"]
    assert [q["text"] for q in lines(project_dir, "questions.jsonl")] == [
        "When may two borrows coexist?"
    ]
    assert lines(project_dir, "answers.jsonl") == []
    assert result.stderr.endswith(
        "warning: dataset: no usable answer to split (run `overbrainer answers` first): "
        "train.jsonl and eval.jsonl are left as they were\n"
    )
    rejected = lines(project_dir, "rejected.jsonl")
    assert rejected[0] == {
        "kind": "subtopic",
        "id": moves["id"],
        "topic": "ownership",
        "name": "moves",
    }
    assert [r["kind"] for r in rejected[1:]] == ["question", "question"]


def test_answer_only_keeps_the_question(run_cli, project_dir):
    items = write_dataset(project_dir)
    question = items["answered"]
    result = run_cli("dataset", "rm", "--answer-only", question["id"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == "dataset: deleted 1 answer"
    assert question["id"] in [q["id"] for q in lines(project_dir, "questions.jsonl")]
    assert question["id"] not in [a["id"] for a in lines(project_dir, "answers.jsonl")]
    assert lines(project_dir, "rejected.jsonl") == []


def test_unknown_ids_are_refused_and_nothing_changes(run_cli, project_dir):
    write_dataset(project_dir)
    before = {p.name: p.read_bytes() for p in (project_dir / "data").iterdir()}
    result = run_cli("dataset", "rm", "0" * 32)
    assert result.exit_code == 1
    assert result.stderr == (
        f"error: dataset: no subtopic or question {'0' * 32} in data/subtopics.jsonl or "
        "data/questions.jsonl\n"
    )
    result = run_cli("dataset", "rm", "--answer-only", "1" * 32)
    assert result.stderr == f"error: dataset: no answer {'1' * 32} in data/answers.jsonl\n"
    assert {p.name: p.read_bytes() for p in (project_dir / "data").iterdir()} == before
