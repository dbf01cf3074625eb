"""The files of ``data/`` and what makes a valid record of each."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from overbrainer.pipeline.jsonl import Check, JsonlWriter, read_jsonl, rewrite_jsonl

DATA_DIR = "data"
SUBTOPICS = "subtopics.jsonl"
QUESTIONS = "questions.jsonl"
ANSWERS = "answers.jsonl"
TRAIN = "train.jsonl"
EVAL = "eval.jsonl"
REJECTED = "rejected.jsonl"

EXCLUSIONS = ("truncated", "refused", "empty", "no_raw_reasoning")
"""Why an answer is set aside, in the order the rules apply."""


def _strings(record: dict[str, Any], *keys: str) -> bool:
    return all(isinstance(record.get(key), str) for key in keys)


def is_subtopic(record: dict[str, Any]) -> bool:
    return _strings(record, "id", "topic", "name")


def is_question(record: dict[str, Any]) -> bool:
    return _strings(record, "id", "topic", "subtopic_id", "subtopic", "text")


def is_answer(record: dict[str, Any]) -> bool:
    meta = record.get("meta")
    return (
        _strings(record, "id", "topic", "subtopic")
        and isinstance(record.get("messages"), list)
        and isinstance(meta, dict)
        and (meta.get("excluded") is None or isinstance(meta.get("excluded"), str))
    )


def is_rejected(record: dict[str, Any]) -> bool:
    """A text set aside for good: ``kind`` is the stage (``subtopic``, ``question``)."""
    return _strings(record, "kind", "topic", "text")


CHECKS: dict[str, Check] = {
    SUBTOPICS: is_subtopic,
    QUESTIONS: is_question,
    ANSWERS: is_answer,
    TRAIN: is_answer,
    EVAL: is_answer,
    REJECTED: is_rejected,
}


class DataFiles:
    """``data/`` of the project at ``project_dir``."""

    def __init__(self, project_dir: Path) -> None:
        self.dir = project_dir / DATA_DIR

    def path(self, name: str) -> Path:
        return self.dir / name

    def read(self, name: str) -> list[dict[str, Any]]:
        return read_jsonl(self.path(name), f"{DATA_DIR}/{name}", CHECKS[name])

    def writer(self, name: str) -> JsonlWriter:
        return JsonlWriter(self.path(name), CHECKS[name])

    def rewrite(self, name: str, records: Iterable[dict[str, Any]]) -> None:
        rewrite_jsonl(self.path(name), records)

    def forget(
        self,
        name: str,
        records: list[dict[str, Any]],
        topics: set[str],
        kind: str | None = None,
    ) -> list[dict[str, Any]]:
        """``records`` (the lines of ``name``) without those of ``topics`` (and of ``kind``,
        for ``rejected.jsonl``), written back: what ``--force`` starts from."""
        kept = [
            r for r in records
            if r["topic"] not in topics or (kind is not None and r["kind"] != kind)
        ]
        self.rewrite(name, kept)
        return kept
