"""``dataset import``: the user's own questions, and answers, into ``data/``.

Imported questions go through the questions stage's deduplication (lexically: an import
asks no provider), against what the topic holds and what it set aside; their answers are
marked (``meta.source``), so that no stage asks for them again, ``--force`` included,
and ``split`` shares them between train and eval like any other. A question the project
already has is skipped, or given the row's answer when it has none yet: importing the
same file again changes nothing.

Every row is read and checked first; then ``answers.jsonl`` and ``questions.jsonl`` are
each replaced at once, the answers first: an interruption between the two leaves answers
whose questions a second import brings, and never a question the parent would be paid to
answer while its imported answer is lost.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.pipeline.dedup import Deduplicator
from overbrainer.pipeline.ids import normalize, question_id, subtopic_id
from overbrainer.pipeline.import_rows import Item, RowError
from overbrainer.pipeline.records import (
    ANSWERS,
    IMPORTED,
    QUESTIONS,
    REJECTED,
    SOURCE,
    DataFiles,
    is_imported,
    rejected_text,
)

DEFAULT_SUBTOPIC = "imported"
"""The subtopic of a row that names none (``dataset import --subtopic`` changes it)."""


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class Imported:
    """What an import added, and the rows it skipped as duplicates."""

    questions: int
    answers: int
    duplicates: int
    unused: int = 0
    """Answers of rows whose question the project has, answered already: not taken."""

    def summary(self, source: str) -> str:
        text = (
            f"dataset: imported {plural(self.questions, 'question')}, "
            f"{plural(self.answers, 'answer')} from {source} "
            f"({plural(self.duplicates, 'duplicate')} skipped)"
        )
        if self.unused:
            text += (
                f"; {plural(self.unused, 'answer')} not taken: the question has a usable "
                "answer already (`overbrainer dataset rm ID` first to bring yours)"
            )
        return text


def import_items(
    project_dir: Path,
    settings: Settings,
    items: list[Item],
    source: str,
    *,
    topic: str | None = None,
    subtopic: str = DEFAULT_SUBTOPIC,
) -> Imported:
    """Add ``items`` (read from ``source``) to the project: each of the topic its row
    names, else ``topic``, else the project's only topic; of the subtopic its row names,
    else ``subtopic``."""
    topics = [t.name for t in settings.topics]
    placed = [(_topic_of(item, topic, topics), item) for item in items]
    data = DataFiles(project_dir)
    questions = data.read(QUESTIONS)
    answers = data.read(ANSWERS)
    rejected = [r for r in data.read(REJECTED) if r["kind"] == "question"]
    # An answer excluded (cut short, refused) is no answer: an imported one takes its place.
    answered = {answer["id"] for answer in answers if answer["meta"].get("excluded") is None}
    own = {answer["id"] for answer in answers if is_imported(answer)}
    held = {(q["topic"], normalize(q["text"])): q for q in questions}
    mark = f"{IMPORTED}{source}"
    new_questions: list[dict[str, Any]] = []
    new_answers: list[dict[str, Any]] = []
    duplicates = unused = 0
    fresh: dict[str, list[Item]] = defaultdict(list)
    for name, item in placed:
        known = held.get((name, normalize(item.question)))
        if known is None:
            fresh[name].append(item)
        elif item.messages is not None and known["id"] not in answered:
            answered.add(known["id"])
            new_answers.append(_answer(known, item.messages, mark))
        else:
            duplicates += 1
            # a row re-imported is a duplicate; one whose question the parent answered is
            # said apart: the user's answer is not taken
            unused += item.messages is not None and known["id"] not in own
    for name, group in fresh.items():
        dedup = Deduplicator(settings.pipeline.dedup_threshold)
        dedup.seed(q["text"] for q in questions if q["topic"] == name)
        dedup.seed(rejected_text(r) or "" for r in rejected if r["topic"] == name)
        admitted, _ = asyncio.run(dedup.admit([item.question for item in group], len(group)))
        by_text: dict[str, Item] = {}
        for item in group:
            by_text.setdefault(item.question, item)
        for text in admitted:
            item = by_text[text]
            question = _question(name, item.subtopic or subtopic, text, mark)
            new_questions.append(question)
            if item.messages is not None:
                new_answers.append(_answer(question, item.messages, mark))
        duplicates += len(group) - len(admitted)
    if new_answers:
        replaced = {answer["id"] for answer in new_answers}
        kept = [answer for answer in answers if answer["id"] not in replaced]
        data.rewrite(ANSWERS, [*kept, *new_answers])
    if new_questions:
        data.rewrite(QUESTIONS, [*questions, *new_questions])
    return Imported(len(new_questions), len(new_answers), duplicates, unused)


def _topic_of(item: Item, given: str | None, topics: list[str]) -> str:
    if item.topic is not None:
        if item.topic not in topics:
            raise RowError(
                item.where,
                f"topic {item.topic!r} is not one of the project's ({', '.join(topics)})",
            )
        return item.topic
    if given is not None:
        if given not in topics:
            raise UserError(
                f"--topic {given!r} is not one of the project's topics ({', '.join(topics)})"
            )
        return given
    if len(topics) == 1:
        return topics[0]
    raise UserError(
        f"{item.where}: which topic? the project has {len(topics)} ({', '.join(topics)}): "
        "give --topic NAME, or each row a topic; nothing was imported"
    )


def _question(topic: str, subtopic: str, text: str, mark: str) -> dict[str, Any]:
    """A question's record, as the questions stage writes it, with its source."""
    parent = subtopic_id(topic, subtopic)
    return {
        "id": question_id(parent, text),
        "topic": topic,
        "subtopic_id": parent,
        "subtopic": subtopic,
        "text": text,
        SOURCE: mark,
    }


def _answer(question: dict[str, Any], messages: list[dict[str, str]], mark: str) -> dict[str, Any]:
    """The answer of ``question``: the imported conversation, marked with its source."""
    return {
        "id": question["id"],
        "topic": question["topic"],
        "subtopic": question["subtopic"],
        "messages": messages,
        "meta": {SOURCE: mark, "excluded": None},
    }
