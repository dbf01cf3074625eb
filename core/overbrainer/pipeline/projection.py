"""What the dataset stages still have to ask, and what it will cost, before anything is spent.

The work left is counted from ``data/`` as each stage counts it (a stage not run yet is
counted from the ones before it, as the settings say it will make them). Tokens per request
are *measured* once part of a stage is done (the history's averages for the stage's model;
``answers.jsonl``'s for answers) and *assumed* before (the prompt's characters / 4 in, the
role's ``max_tokens`` out: an upper bound).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from overbrainer.config.model import Role, Settings
from overbrainer.pipeline.records import ANSWERS, QUESTIONS, SUBTOPICS, DataFiles
from overbrainer.pipeline.requests import Tally, requests_tally
from overbrainer.providers.prices import Price

Basis = Literal["measured", "assumed", "done", "no requests"]
"""Where a figure comes from: this project's answers so far, the settings; or no work
left, or a stage that asks nothing (``split``)."""

CHARS_PER_TOKEN = 4
"""The cheap token estimate of a text not sent yet: its characters / 4."""
MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its text (its role, the framing)."""
QUESTION_CHARS = 80
"""A question's length, assumed before any question is written."""

ROLES = {"subtopics": "generator", "questions": "generator", "answers": "parent"}
"""The role each requesting stage asks."""


@dataclass(frozen=True)
class PerRequest:
    """Tokens of one request, in and out, and where the figure comes from."""

    tokens_in: float
    tokens_out: float
    basis: Basis

    def cost(self, price: Price) -> float:
        return self.tokens_in * price.prompt + self.tokens_out * price.completion


def assumed(prompt_chars: int, messages: int, role: Role) -> PerRequest:
    """A request before any was answered: its prompt estimated, its reply ``max_tokens``."""
    tokens_in = prompt_chars / CHARS_PER_TOKEN + messages * MESSAGE_OVERHEAD
    return PerRequest(tokens_in, role.max_tokens, "assumed")


def measured(project_dir: Path, stage: str, model: str) -> PerRequest | None:
    """The average request of ``stage`` on ``model`` so far, or None before the first."""
    return average(tally(project_dir, stage, model))


def tally(project_dir: Path, stage: str, model: str) -> Tally:
    """What ``stage`` asked of ``model`` so far: ``requests.jsonl``'s count; for ``answers``
    without one, the tokens each answer records (one request per answer)."""
    counts = requests_tally(project_dir, stage, model)
    if counts[0] or stage != "answers":
        return counts
    requests = tokens_in = tokens_out = 0
    for record in DataFiles(project_dir).read(ANSWERS):
        meta = record["meta"]
        used = meta.get("input_tokens"), meta.get("output_tokens")
        if meta.get("model") == model and all(isinstance(n, int) for n in used):
            requests += 1
            tokens_in += used[0]
            tokens_out += used[1]
    return requests, tokens_in, tokens_out


def average(counts: Tally) -> PerRequest | None:
    """The average request of ``counts``, or None when they hold none."""
    requests, tokens_in, tokens_out = counts
    if requests <= 0:
        return None
    return PerRequest(tokens_in / requests, tokens_out / requests, "measured")


@dataclass(frozen=True)
class StageWork:
    """The requests a stage has left and the characters of their prompts (a sum)."""

    requests: int = 0
    prompt_chars: int = 0
    messages: int = 1
    """Messages per request: answers send a system prompt and the question."""


def work_left(project_dir: Path, settings: Settings) -> dict[str, StageWork]:
    """The requests each stage still has to make, the stages before it done as set."""
    from overbrainer.pipeline.prompts import Templates  # jinja2: only to plan

    data = DataFiles(project_dir)
    subtopics = data.read(SUBTOPICS)
    questions = data.read(QUESTIONS)
    answered = {record["id"] for record in data.read(ANSWERS)}
    batch = settings.pipeline.question_batch_size
    templates = Templates(project_dir, "subtopics.txt", "questions.txt", "answer_system.txt")
    question_chars = (
        sum(len(q["text"]) for q in questions) // len(questions) if questions else QUESTION_CHARS
    )
    ask = {"subtopics": StageWork(), "questions": StageWork(), "answers": StageWork(messages=2)}
    seen: set[str] = set()
    for topic in settings.topics:
        mine = [s for s in subtopics if s["topic"] == topic.name][: topic.subtopics]
        missing = topic.subtopics - len(mine)
        if missing > 0:
            prompt = templates.render(
                "subtopics.txt", topic=topic.name, description=topic.description, count=missing
            )
            ask["subtopics"] = _plus(ask["subtopics"], 1, len(prompt))
        have = Counter(q["subtopic_id"] for q in questions if q["topic"] == topic.name)
        gaps = [max(topic.questions_per_subtopic - have[s["id"]], 0) for s in mine]
        gaps += [topic.questions_per_subtopic] * max(missing, 0)
        prompt = templates.render(
            "questions.txt",
            topic=topic.name,
            description=topic.description,
            subtopic=mine[0]["name"] if mine else topic.name,
            count=min(batch, topic.questions_per_subtopic),
            accepted=[],
        )
        asks = sum(math.ceil(gap / batch) for gap in gaps)
        ask["questions"] = _plus(ask["questions"], asks, asks * len(prompt))
        system = len(
            templates.render("answer_system.txt", topic=topic.name, description=topic.description)
        )
        unanswered = [
            q for q in questions
            if q["topic"] == topic.name and q["id"] not in answered and q["id"] not in seen
        ]  # fmt: skip
        seen.update(q["id"] for q in unanswered)
        coming = sum(gaps)
        chars = sum(len(q["text"]) + system for q in unanswered) + coming * (
            question_chars + system
        )
        ask["answers"] = _plus(ask["answers"], len(unanswered) + coming, chars)
    return ask


def _plus(work: StageWork, requests: int, chars: int) -> StageWork:
    return StageWork(work.requests + requests, work.prompt_chars + chars, work.messages)


@dataclass(frozen=True)
class StagePlan:
    """A stage's projection: what it will ask, and its dollars (None: no price known)."""

    stage: str
    requests: int
    tokens_in: int
    tokens_out: int
    usd: float | None
    basis: Basis
    provider: str | None = None
    model: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "usd": None if self.usd is None else round(self.usd, 6),
            "basis": self.basis,
        }


def project_stage(
    project_dir: Path, settings: Settings, stage: str, work: StageWork, price: Price | None
) -> StagePlan:
    """``stage``'s projection: ``work``'s requests at the measured average, else assumed."""
    role = getattr(settings.roles, ROLES[stage])
    if not work.requests:
        return StagePlan(stage, 0, 0, 0, 0.0, "done", role.provider, role.model)
    average = measured(project_dir, stage, role.model)
    if average is None:
        each = assumed(work.prompt_chars // work.requests, work.messages, role)
    else:
        each = average
    tokens_in = round(each.tokens_in * work.requests)
    tokens_out = round(each.tokens_out * work.requests)
    usd = None
    if price is not None:
        usd = tokens_in * price.prompt + tokens_out * price.completion
    return StagePlan(
        stage, work.requests, tokens_in, tokens_out, usd, each.basis, role.provider, role.model
    )
