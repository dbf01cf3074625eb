"""Deleting a dataset item for good: a subtopic with its questions and answers, a question
with its answer, or an answer alone. Deleted subtopics and questions go to
``data/rejected.jsonl`` so that no stage makes them again; a deleted question is noted as
``removed`` in ``data/rejected.reasons.jsonl`` too, so that it still fills its place in its
subtopic (nothing is asked for to replace it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from overbrainer.errors import UserError
from overbrainer.pipeline.records import (
    ANSWERS,
    QUESTIONS,
    REJECTED,
    REJECTED_REASONS,
    SUBTOPICS,
    DataFiles,
    rejected_question,
)
from overbrainer.pipeline.samples import question_of

REMOVED = "removed"
"""The reason of a question the user deleted (``dataset rm``)."""


@dataclass(frozen=True)
class Removed:
    """What a removal took, for its message."""

    subtopics: int = 0
    questions: int = 0
    answers: int = 0

    def describe(self) -> str:
        parts = [
            f"{count} {name}{'' if count == 1 else 's'}"
            for count, name in (
                (self.subtopics, "subtopic"),
                (self.questions, "question"),
                (self.answers, "answer"),
            )
            if count
        ]
        return ", ".join(parts) or "nothing"


def remove_item(project_dir: Path, item_id: str, *, answer_only: bool = False) -> Removed:
    """Remove the subtopic or question ``item_id`` (with what depends on it), or with
    ``answer_only`` its answer alone. Each file is replaced atomically, the rejections
    appended first, so an interruption never lets a stage make the item again."""
    data = DataFiles(project_dir)
    subtopics = data.read(SUBTOPICS)
    questions = data.read(QUESTIONS)
    answers = data.read(ANSWERS)
    if answer_only:
        # a question's id: each of its answers (``samples``); a sample's: that one
        kept = [a for a in answers if item_id not in (a["id"], question_of(a))]
        if len(kept) == len(answers):
            raise UserError(f"dataset: no answer {item_id} in data/{ANSWERS}")
        data.rewrite(ANSWERS, kept)
        return Removed(answers=len(answers) - len(kept))
    subtopic = next((s for s in subtopics if s["id"] == item_id), None)
    if subtopic is not None:
        gone_questions = [q for q in questions if q["subtopic_id"] == item_id]
        rejections = [
            {
                "kind": "subtopic",
                "id": item_id,
                "topic": subtopic["topic"],
                "name": subtopic["name"],
            },
            *(rejected_question(q) for q in gone_questions),
        ]
    else:
        question = next((q for q in questions if q["id"] == item_id), None)
        if question is None:
            raise UserError(
                f"dataset: no subtopic or question {item_id} in data/{SUBTOPICS} or "
                f"data/{QUESTIONS}"
            )
        gone_questions = [question]
        rejections = [rejected_question(question)]
    gone_ids = {q["id"] for q in gone_questions}
    with data.writer(REJECTED) as writer:
        for record in rejections:
            writer.append(record)
    with data.writer(REJECTED_REASONS) as writer:
        for question in gone_questions:
            writer.append(
                {"id": question["id"], "kind": "question", "topic": question["topic"],
                 "reason": REMOVED}
            )
    kept_answers = [a for a in answers if question_of(a) not in gone_ids]
    data.rewrite(ANSWERS, kept_answers)
    data.rewrite(QUESTIONS, [q for q in questions if q["id"] not in gone_ids])
    if subtopic is not None:
        data.rewrite(SUBTOPICS, [s for s in subtopics if s["id"] != item_id])
    return Removed(
        subtopics=1 if subtopic is not None else 0,
        questions=len(gone_ids),
        answers=len(answers) - len(kept_answers),
    )
