"""``split`` as it was before streaming (issue 16), writing into ``out``: the reference the
streaming one must match byte for byte. Its reading is the old ``read_jsonl``."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer.config.model import Settings, Topic
from overbrainer.errors import UserError
from overbrainer.pipeline.ids import seeded_order
from overbrainer.pipeline.jsonl import Check
from overbrainer.pipeline.records import (
    ANSWERS,
    CHECKS,
    EVAL,
    MALFORMED,
    QUESTIONS,
    TRAIN,
    DataFiles,
    conversation_problem,
)
from overbrainer.pipeline.split import SplitResult, allocate, eval_size


def dumps(record: dict[str, Any]) -> str:
    """``record`` as one compact line, UTF-8 kept as is."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class _CutShort:
    """A line that is not JSON: what a crash leaves at the end of a file."""


CUT_SHORT = _CutShort()


def _parse(raw: bytes, check: Check | None) -> dict[str, Any] | _CutShort | None:
    """The record on the line ``raw``; ``CUT_SHORT`` when it is not JSON at all; None
    when it is JSON but not a valid record."""
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return CUT_SHORT
    if not isinstance(record, dict) or (check is not None and not check(record)):
        return None
    return record


def invalid(shown: str, line: int) -> UserError:
    return UserError(f"{shown}:{line}: invalid record")


def read_jsonl(path: Path, shown: str, check: Check | None = None) -> list[dict[str, Any]]:
    """The records of ``path`` (none when it is missing); ``shown`` names it in messages.

    An invalid line is an error ("<shown>:<line>: invalid record"), except an unterminated
    last line cut short (not JSON), which is skipped with a warning.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as error:
        raise UserError(f"cannot read {shown}: {error.strerror}") from None
    lines = data.split(b"\n")
    terminated = lines[-1] == b""
    if terminated:
        lines.pop()
    records = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        record = _parse(raw, check)
        if record is CUT_SHORT and number == len(lines) and not terminated:
            logger.warning(f"{shown}: ignoring an incomplete last line")
            continue
        if not isinstance(record, dict):
            raise invalid(shown, number)
        records.append(record)
    return records


def unusable(answer: dict[str, Any]) -> str | None:
    """Why an answer not excluded by ``answers`` still cannot be trained on (a file edited
    by hand, another tool's), said once on stderr, or None."""
    problem = conversation_problem(answer["messages"])
    if problem is not None:
        logger.warning(f"split: answer {answer['id']}: malformed conversation ({problem})")
        return MALFORMED
    if not answer["messages"][-1]["content"].strip():
        return "empty"
    return None


def run(data: DataFiles, settings: Settings, topics: list[Topic], out: Path) -> SplitResult:
    """Rewrite train and eval from every topic's answers, and count what ``topics`` hold
    (``--topic`` narrows the counts printed, as in the reference tool, never the split).
    When no example would be left in either, nothing is written (``written`` is false)."""
    seed = settings.pipeline.seed
    counted = {topic.name for topic in topics}
    configured = {topic.name for topic in settings.topics}
    questions = {
        question["id"]
        for question in read_jsonl(data.path(QUESTIONS), "data/questions.jsonl", CHECKS[QUESTIONS])
    }
    result = SplitResult()
    usable: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    # The later answer to a question is the one that counts (`answers --force` appends
    # the new answer after the old one).
    latest = {
        answer["id"]: answer
        for answer in read_jsonl(data.path(ANSWERS), "data/answers.jsonl", CHECKS[ANSWERS])
    }
    whole = counted == configured
    for answer in latest.values():
        counts = answer["topic"] in counted or (whole and answer["topic"] not in configured)
        if answer["topic"] not in configured or answer["id"] not in questions:
            result.orphaned += counts
        elif answer["meta"]["excluded"] is not None:
            if counts:
                result.excluded[answer["meta"]["excluded"]] += 1
        elif reason := unusable(answer):
            if counts:
                result.excluded[reason] += 1
        else:
            usable[answer["topic"]][answer["subtopic"]][answer["id"]] = answer

    def order(record: dict[str, Any]) -> tuple[int, str]:
        return seeded_order(seed, record["id"]), record["id"]

    n = sum(len(group) for subtopics in usable.values() for group in subtopics.values())
    topic_quotas = allocate(
        eval_size(n, settings.pipeline.eval_ratio),
        {name: sum(map(len, usable[name].values())) for name in sorted(usable)},
        seed,
    )
    train: list[dict[str, Any]] = []
    evaluation: list[dict[str, Any]] = []
    for topic_name, quota in topic_quotas.items():
        subtopics = usable[topic_name]
        sizes = {name: len(subtopics[name]) for name in sorted(subtopics)}
        for subtopic, share in allocate(quota, sizes, seed).items():
            ranked = sorted(subtopics[subtopic].values(), key=order)
            evaluation += ranked[:share]
            train += ranked[share:]
    result.train = sum(1 for r in train if r["topic"] in counted)
    result.eval = sum(1 for r in evaluation if r["topic"] in counted)
    if not train and not evaluation:
        result.written = False  # nothing to train on: the files stay as they are
        return result
    for name, records in ((TRAIN, train), (EVAL, evaluation)):
        lines = "".join(dumps(record) + "\n" for record in sorted(records, key=order))
        (out / name).write_bytes(lines.encode())
    return result
