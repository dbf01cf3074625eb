"""A small project the TUI tests open: a dataset with one question of each kind, and a run
with known metrics."""

from __future__ import annotations

import json
from pathlib import Path

from tests.seeing.runs_data import write_metrics, write_run

from overbrainer.pipeline.ids import question_id, subtopic_id

RUN = "demo_project_20260922-143005"


def answer(question: dict, excluded: str | None = None) -> dict:
    return {
        "id": question["id"],
        "topic": question["topic"],
        "subtopic": question["subtopic"],
        "messages": [
            {"role": "user", "content": question["text"]},
            {
                "role": "assistant",
                "content": "A value has one owner.",
                "reasoning_content": "Ownership means one owner at a time.",
            },
        ],
        "meta": {
            "model": "parent-model",
            "input_tokens": 5,
            "output_tokens": 9,
            "finish_reason": "stop",
            "reasoning_kind": "raw",
            "excluded": excluded,
        },
    }


def write_dataset(project_dir: Path) -> dict[str, dict]:
    """Two subtopics; three questions: answered, excluded, unanswered. Returns them by name."""
    data = project_dir / "data"
    data.mkdir(parents=True, exist_ok=True)
    subtopics = []
    for name in ("moves", "borrowing"):
        subtopics.append({"id": subtopic_id("ownership", name), "topic": "ownership", "name": name})
    questions = []
    for subtopic, text in (
        (subtopics[0], "What is a move?"),
        (subtopics[0], "Why does a move invalidate the source?"),
        (subtopics[1], "When may two borrows coexist?"),
    ):
        questions.append(
            {
                "id": question_id(subtopic["id"], text),
                "topic": "ownership",
                "subtopic_id": subtopic["id"],
                "subtopic": subtopic["name"],
                "text": text,
            }
        )
    answers = [answer(questions[0]), answer(questions[1], excluded="truncated")]
    for name, records in (("subtopics", subtopics), ("questions", questions), ("answers", answers)):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return {
        "answered": questions[0],
        "excluded": questions[1],
        "unanswered": questions[2],
        "moves": subtopics[0],
        "borrowing": subtopics[1],
    }


def write_tui_project(project_dir: Path) -> dict[str, dict]:
    items = write_dataset(project_dir)
    directory = write_run(
        project_dir,
        RUN,
        "stopped",
        snapshot={"checkpoint": "output/checkpoint-60", "step": 60, "reason": "requested"},
    )
    (directory / "run.json").write_text(
        (directory / "run.json").read_text().replace("2026-09-22T14:30:05Z", "2026-09-22T14:30:05Z")
    )
    write_metrics(directory, range(1, 61), evals=(20, 40, 60))
    return items
