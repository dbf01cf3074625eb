"""Several answers a question (``[roles.parent] samples = N``): one ``answers.jsonl`` record
each, so that each is resumed, replaced and made stale on its own.

The first sample keeps its question's id (a project of one answer a question reads as it
always did); sample ``k`` of question ``q`` has the id ``stable_id("sample", q, k)`` and
says both in ``meta.question`` and ``meta.sample``.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from typing import Any

from overbrainer.pipeline.ids import stable_id
from overbrainer.pipeline.records import is_imported

QUESTION = "question"
SAMPLE = "sample"


def sample_id(question_id: str, sample: int) -> str:
    """The id of answer ``sample`` (from 0) of question ``question_id``."""
    return question_id if sample == 0 else stable_id(SAMPLE, question_id, str(sample))


def question_of(answer: dict[str, Any]) -> str:
    """The id of the question ``answer`` answers."""
    meta = answer.get("meta")
    found = meta.get(QUESTION) if isinstance(meta, dict) else None
    return found if isinstance(found, str) else str(answer["id"])


def sample_of(answer: dict[str, Any]) -> int:
    """Which of its question's answers ``answer`` is (0: the first, or the only one)."""
    meta = answer.get("meta")
    found = meta.get(SAMPLE) if isinstance(meta, dict) else None
    return found if isinstance(found, int) and not isinstance(found, bool) else 0


def items(
    questions: Iterable[dict[str, Any]], samples: int, own: Container[str] = ()
) -> Iterator[dict[str, Any]]:
    """What ``answers`` asks for: each question ``samples`` times, sample ``k`` as the
    question under its sample's id (with ``question`` and ``sample`` beside); a question
    of ``own`` (its answer imported: the user's) once, as before."""
    for question in questions:
        yield question
        for sample in range(1, 1 if question["id"] in own else samples):
            yield {**question, "id": sample_id(question["id"], sample), QUESTION: question["id"],
                   SAMPLE: sample}  # fmt: skip


def item_meta(item: dict[str, Any]) -> dict[str, Any]:
    """What an answer's ``meta`` says of which sample it is: nothing for the first."""
    if SAMPLE not in item:
        return {}
    return {QUESTION: item[QUESTION], SAMPLE: item[SAMPLE]}


def together(todo: list[dict[str, Any]], in_one: bool) -> list[list[dict[str, Any]]]:
    """``todo`` in the requests that ask for it: a question's samples in one (``in_one``:
    the protocol has ``n``, and ``samples_n`` lets it), else each item in one of its own."""
    if not in_one:
        return [[item] for item in todo]
    groups: dict[str, list[dict[str, Any]]] = {}
    for item in todo:
        groups.setdefault(item.get(QUESTION, item["id"]), []).append(item)
    return list(groups.values())


def imported_questions(answers: Iterable[dict[str, Any]]) -> set[str]:
    """The questions whose answer is the user's own (``dataset import``): no sample is
    asked of the parent beside it."""
    return {question_of(answer) for answer in answers if is_imported(answer)}
