"""``split``: the usable answers into ``train.jsonl`` and ``eval.jsonl``, the same way every time.

The eval set gets ``round(n x eval_ratio)`` examples (at least one, never all), shared over
topics, then subtopics, by largest remainder; within a subtopic, the first by a seeded XXH3-64
order go to eval. Nothing depends on the order of ``answers.jsonl``.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from overbrainer.config.model import Settings, Topic
from overbrainer.pipeline.ids import seeded_order
from overbrainer.pipeline.records import (
    ANSWERS,
    EVAL,
    EXCLUSIONS,
    MALFORMED,
    QUESTIONS,
    TRAIN,
    DataFiles,
    conversation_problem,
)
from overbrainer.redact import escape_controls

REASONS = (*EXCLUSIONS, MALFORMED)


@dataclass
class SplitResult:
    train: int = 0
    eval: int = 0
    orphaned: int = 0
    excluded: Counter[str] = field(default_factory=Counter)
    written: bool = True

    def summary(self) -> str:
        reasons = ", ".join(
            f"{reason} {self.excluded[reason]}"
            for reason in [*REASONS, *sorted(set(self.excluded) - set(REASONS))]
            if self.excluded[reason]
        )
        # A reason is read from answers.jsonl: whatever it holds is shown escaped.
        reasons = escape_controls(reasons)
        excluded = f"{self.excluded.total()} excluded" + (f" ({reasons})" if reasons else "")
        return f"split: {self.train} train, {self.eval} eval, {excluded}, {self.orphaned} orphaned"


def eval_size(n: int, ratio: float) -> int:
    """``n x ratio`` rounded half away from zero, kept within [1, n - 1]; 0 below 2."""
    if n < 2:
        return 0
    return min(max(math.floor(n * ratio + 0.5), 1), n - 1)


def allocate(total: int, sizes: Mapping[str, int], seed: int) -> dict[str, int]:
    """``total`` shared over the groups of ``sizes`` by largest remainder; equal remainders
    go by XXH3-64(seed, name), then name."""
    count = sum(sizes.values())
    if count == 0:
        return dict.fromkeys(sizes, 0)
    quotas = {name: total * size // count for name, size in sizes.items()}
    left = total - sum(quotas.values())
    order = sorted(
        sizes, key=lambda name: (-(total * sizes[name] % count), seeded_order(seed, name), name)
    )
    for name in order[:left]:
        quotas[name] += 1
    return quotas


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


def run(data: DataFiles, settings: Settings, topics: list[Topic]) -> SplitResult:
    """Rewrite train and eval from every topic's answers, and count what ``topics`` hold
    (``--topic`` narrows the counts printed, as in the reference tool, never the split).
    When no example would be left in either, nothing is written (``written`` is false)."""
    seed = settings.pipeline.seed
    counted = {topic.name for topic in topics}
    configured = {topic.name for topic in settings.topics}
    questions = {question["id"] for question in data.read(QUESTIONS)}
    result = SplitResult()
    usable: dict[str, dict[str, dict[str, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    # The later answer to a question is the one that counts (`answers --force` appends
    # the new answer after the old one).
    latest = {answer["id"]: answer for answer in data.read(ANSWERS)}
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
    data.rewrite(TRAIN, sorted(train, key=order))
    data.rewrite(EVAL, sorted(evaluation, key=order))
    return result
