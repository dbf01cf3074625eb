"""Which records an edit made stale: those whose fingerprint differs from the one the
project's prompts and settings would give them now (``pipeline.fingerprint``).

Only the records of the configured topics count; an answer whose question is gone is
no one's (``split`` leaves it out), not stale.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer.config.model import Settings
from overbrainer.pipeline.answers import answer_systems, stale_answers
from overbrainer.pipeline.fingerprint import recorded
from overbrainer.pipeline.projection import StageWork, in_live_batches
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.questions import question_fingerprint
from overbrainer.pipeline.records import ANSWERS, QUESTIONS, SUBTOPICS, DataFiles, is_imported
from overbrainer.pipeline.samples import question_of
from overbrainer.pipeline.subtopics import subtopic_fingerprint


@dataclass(frozen=True)
class Stale:
    """A stage's stale records (their ids), those with no fingerprint (made before they
    were kept: unknown, never redone on a guess), and what redoing the stale ones asks."""

    stage: str
    ids: frozenset[str]
    unknown: int
    work: StageWork


def find_stale(project_dir: Path, settings: Settings) -> dict[str, Stale]:
    """Each generating stage's stale records, by stage."""
    data = DataFiles(project_dir)
    templates = Templates(project_dir, "subtopics.txt", "questions.txt", "answer_system.txt")
    topics = {topic.name: topic for topic in settings.topics}
    generator = settings.roles.generator
    subtopics = [s for s in data.read(SUBTOPICS) if s["topic"] in topics]
    made = {
        name: subtopic_fingerprint(templates.source("subtopics.txt"), generator, topic)
        for name, topic in topics.items()
    }
    found = {"subtopics": _compare(subtopics, lambda s: made[s["topic"]], "subtopics")}
    questions = [q for q in data.read(QUESTIONS) if q["topic"] in topics]
    source = templates.source("questions.txt")
    stale = _compare(
        [q for q in questions if not is_imported(q)],
        lambda q: question_fingerprint(
            source, settings, {"topic": q["topic"], "name": q["subtopic"]}
        ),
        "questions",
    )
    found["questions"] = _questions_work(stale, questions, templates, settings)
    by_id = {q["id"]: q for q in questions}
    systems = answer_systems(settings, templates)
    answers = [a for a in data.read(ANSWERS) if question_of(a) in by_id]
    # a question a live batch holds is being answered again already
    ids = stale_answers(answers, questions, systems, settings.roles.parent)
    ids -= in_live_batches(project_dir)
    unknown = len({a["id"] for a in answers if recorded(a) is None and not is_imported(a)})
    chars = size = 0
    asked = {answer["id"]: question_of(answer) for answer in answers}
    for identifier in ids:
        question = by_id[asked[identifier]]
        system = systems[question["topic"]]
        chars += len(question["text"]) + len(system)
        size += len(question["text"].encode()) + len(system.encode())
    work = StageWork(len(ids), chars, 2, 0, size)
    found["answers"] = Stale("answers", frozenset(ids), unknown, work)
    return found


def _compare(records: list[dict[str, Any]], now: Any, stage: str) -> Stale:
    """``records``' stale ids (the last record of an id counts) and unknown count."""
    last = {record["id"]: record for record in records}
    stale, unknown = set(), 0
    for identifier, record in last.items():
        made = recorded(record)
        if made is None:
            unknown += 1
        elif made != now(record):
            stale.add(identifier)
    return Stale(stage, frozenset(stale), unknown, StageWork())


def _questions_work(
    stale: Stale, questions: list[dict[str, Any]], templates: Templates, settings: Settings
) -> Stale:
    """``stale`` with what making its questions again asks: a subtopic's in batches of
    ``question_batch_size``, each prompt as ``questions`` renders it (no question held)."""
    batch = settings.pipeline.question_batch_size
    topics = {topic.name: topic for topic in settings.topics}
    per_subtopic = Counter(
        (q["topic"], q["subtopic"]) for q in questions if q["id"] in stale.ids
    )
    work = StageWork()
    for (topic, name), count in per_subtopic.items():
        asks = math.ceil(count / batch)
        prompt = templates.render(
            "questions.txt", topic=topic, description=topics[topic].description,
            subtopic=name, count=min(batch, count), accepted=[],
        )
        work = StageWork(
            work.requests + asks, work.prompt_chars + asks * len(prompt), 1,
            work.items + count, work.prompt_bytes + asks * len(prompt.encode()),
        )
    return Stale(stale.stage, stale.ids, stale.unknown, work)
