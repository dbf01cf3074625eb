"""`dataset rejected`: what the dataset left out and why, read from rejected.jsonl and its
reasons file as the stages and split wrote them (and as the reference tool left them)."""

from __future__ import annotations

import json


def _write(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_items_are_listed_with_their_reasons_in_order(run_cli, project_dir):
    data = project_dir / "data"
    data.mkdir(exist_ok=True)
    _write(data / "rejected.jsonl", [
        {"kind": "question", "id": "q1", "topic": "ownership", "subtopic_id": "s",
         "text": "An old question\nover two lines \x1b[31mred"},
        {"kind": "answer", "id": "a2", "topic": "lifetimes", "question": "q9", "text": "42"},
    ])  # fmt: skip
    _write(data / "rejected.reasons.jsonl", [
        {"id": "a2", "kind": "answer", "topic": "lifetimes",
         "reason": "not selected: its result '42' is not the majority's '41'"},
    ])  # fmt: skip
    result = run_cli("dataset", "rejected")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "question q1 ownership: (no reason recorded) | An old question over two lines \\x1b[31mred",
        "answer a2 lifetimes: not selected: its result '42' is not the majority's '41' | 42",
        "dataset: 2 rejected",
    ]
    only = run_cli("dataset", "rejected", "--reason", "not selected", "--json")
    assert [item["id"] for item in json.loads(only.stdout)] == ["a2"]


def test_nothing_rejected_says_so(run_cli, project_dir):
    result = run_cli("dataset", "rejected")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "dataset: nothing rejected\n"
    assert json.loads(run_cli("dataset", "rejected", "--json").stdout) == []
