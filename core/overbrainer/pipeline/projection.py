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
from overbrainer.pipeline.batch_ledger import Ledger
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.records import ANSWERS, QUESTIONS, SUBTOPICS, DataFiles
from overbrainer.pipeline.requests import Tally, requests_tally
from overbrainer.pipeline.samples import imported_questions, sample_id
from overbrainer.providers.prices import Price

Basis = Literal["measured", "prior", "assumed", "done", "no requests"]
"""Where a figure comes from: this project's requests so far; before the first, a prior
(what such a request takes, from the role's settings and the prompt); ``assumed``: the
role's ``max_tokens`` (compare's judge); or no work left, or a stage that asks nothing."""

CHARS_PER_TOKEN = 4
"""The cheap token estimate of a text not sent yet: its characters / 4."""
MESSAGE_OVERHEAD = 4
"""Tokens a chat message costs beyond its text (its role, the framing)."""
QUESTION_CHARS = 80
"""A question's length, assumed before any question is written."""
ITEM_TOKENS = {"subtopics": 12, "questions": 30}
"""Tokens of one item of a list reply (a subtopic's name, a question), its quotes and comma."""
LIST_TOKENS = 8
"""Tokens of a list reply beyond its items (brackets, a fence)."""
ANSWER_TOKENS = 600
"""Tokens of an answer, before any is measured: a few paragraphs, as chat parents write."""
REASONING_TOKENS = 2000
"""Tokens of the reasoning before an answer, when the role asks for it (and its
``thinking_budget``, when set, is larger)."""
MESSAGE_FRAMING = 8
"""Tokens a chat message can cost beyond its text's bytes (its role, the template)."""
REQUEST_FRAMING = 16
"""Tokens a request can cost beyond its messages (the reply's opening)."""

ROLES = {"subtopics": "generator", "questions": "generator", "answers": "parent",
         "select": "judge"}  # fmt: skip
"""The role each requesting stage asks (``select``: the judge of ``[pipeline] select =
"judge"``, asked by ``answers``; the parent when no judge is set)."""
VERDICT_TOKENS = 60
"""Tokens of a judge's verdict: a JSON object of a word and a sentence."""


@dataclass(frozen=True)
class PerRequest:
    """Tokens of one request, in and out, and where the figure comes from."""

    tokens_in: float
    tokens_out: float
    basis: Basis

    def cost(self, price: Price) -> float:
        return self.tokens_in * price.prompt + self.tokens_out * price.completion


def prior(stage: str, work: StageWork, role: Role) -> PerRequest:
    """A request of ``stage`` before any was measured: its prompt's characters / 4 in, and
    out what such a reply takes (the items a list asks for; a few paragraphs, and the
    reasoning when asked for), never past ``max_tokens``."""
    requests = max(work.requests, 1)
    tokens_in = work.prompt_chars / requests / CHARS_PER_TOKEN + work.messages * MESSAGE_OVERHEAD
    if stage in ITEM_TOKENS:
        out = work.items / requests * ITEM_TOKENS[stage] + LIST_TOKENS
    elif stage == "select":
        out = VERDICT_TOKENS
    else:
        out = ANSWER_TOKENS
        if role.reasoning:
            out += min(REASONING_TOKENS, role.thinking_budget or REASONING_TOKENS)
    return PerRequest(tokens_in, min(out, role.max_tokens), "prior")


def bound(work: StageWork, role: Role) -> tuple[int, int]:
    """What ``work``'s requests can take at most, in and out: each byte of their prompts a
    token (and the framing), and ``max_tokens`` each."""
    framing = work.messages * MESSAGE_FRAMING + REQUEST_FRAMING
    tokens_in = work.prompt_bytes + work.requests * framing
    return tokens_in, work.requests * role.max_tokens


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
    items: int = 0
    """What the requests ask for in all: subtopics, or questions (answers: 0)."""
    prompt_bytes: int = 0
    """The prompts' UTF-8 bytes, for the upper bound."""


def work_left(project_dir: Path, settings: Settings) -> dict[str, StageWork]:
    """The requests each stage still has to make, the stages before it done as set: for
    ``answers``, each sample of a question (``samples``) not answered yet."""
    data = DataFiles(project_dir)
    subtopics = data.read(SUBTOPICS)
    questions = data.read(QUESTIONS)
    answers = data.read(ANSWERS)
    answered = {record["id"] for record in answers}
    own = imported_questions(answers)  # the user's answer: asked of the parent once, never
    answered |= in_live_batches(project_dir)  # asked and reserved already: not left to do
    batch = settings.pipeline.question_batch_size
    samples = settings.roles.parent.samples
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
            ask["subtopics"] = _plus(ask["subtopics"], 1, prompt, missing)
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
        ask["questions"] = _plus(ask["questions"], asks, prompt, sum(gaps))
        system_text = templates.render(
            "answer_system.txt", topic=topic.name, description=topic.description
        )
        system = len(system_text)
        mine_now = [q for q in questions if q["topic"] == topic.name and q["id"] not in seen]
        seen.update(q["id"] for q in mine_now)
        # each question asked `samples` times: each sample not answered is a request
        unanswered = [
            q for q in mine_now for item in range(1 if q["id"] in own else samples)
            if sample_id(q["id"], item) not in answered
        ]  # fmt: skip
        coming = sum(gaps) * samples
        chars = sum(len(q["text"]) + system for q in unanswered) + coming * (
            question_chars + system
        )
        system_bytes = len(system_text.encode())
        size = sum(len(q["text"].encode()) + system_bytes for q in unanswered) + coming * (
            4 * question_chars + system_bytes  # a question to come: 4 bytes a character at most
        )
        ask["answers"] = _plus(ask["answers"], len(unanswered) + coming, chars, 0, size)
    return ask


def stage_role(settings: Settings, stage: str) -> Role:
    """The role ``stage`` asks (the judge falls back to the parent)."""
    role: Role | None = getattr(settings.roles, ROLES[stage])
    return role or settings.roles.parent


def in_live_batches(project_dir: Path) -> set[str]:
    """The questions a provider's batch holds now: their answers are on their way, their
    cost reserved (``Batch.projected_usd``)."""
    return {question for batch in Ledger(project_dir).live() for question in batch.questions}


def _plus(
    work: StageWork, requests: int, prompt: str | int, items: int = 0, size: int | None = None
) -> StageWork:
    """``work`` and ``requests`` more: of ``prompt`` each (a text, ``requests`` times), or
    of ``prompt`` characters in all and ``size`` bytes."""
    if isinstance(prompt, str):
        chars, size = requests * len(prompt), requests * len(prompt.encode())
    else:
        chars = prompt
    return StageWork(
        work.requests + requests, work.prompt_chars + chars, work.messages,
        work.items + items, work.prompt_bytes + (size or 0),
    )


@dataclass(frozen=True)
class StagePlan:
    """A stage's projection: what it will ask, and its dollars (None: no price known);
    beside them what the requests can take at most (their bound: the budget reserves it)."""

    stage: str
    requests: int
    tokens_in: int
    tokens_out: int
    usd: float | None
    basis: Basis
    provider: str | None = None
    model: str | None = None
    tokens_in_bound: int = 0
    tokens_out_bound: int = 0
    usd_bound: float | None = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "usd": None if self.usd is None else round(self.usd, 6),
            "basis": self.basis,
            "tokens_in_bound": self.tokens_in_bound,
            "tokens_out_bound": self.tokens_out_bound,
            "usd_bound": None if self.usd_bound is None else round(self.usd_bound, 6),
        }


def project_stage(
    project_dir: Path, settings: Settings, stage: str, work: StageWork, price: Price | None
) -> StagePlan:
    """``stage``'s projection: ``work``'s requests at the measured average, else at the
    prior; and their bound."""
    role = stage_role(settings, stage)
    if not work.requests:
        return StagePlan(stage, 0, 0, 0, 0.0, "done", role.provider, role.model)
    each = measured(project_dir, stage, role.model) or prior(stage, work, role)
    tokens_in = round(each.tokens_in * work.requests)
    tokens_out = round(each.tokens_out * work.requests)
    most_in, most_out = bound(work, role)
    usd = usd_bound = None
    if price is not None:
        usd = tokens_in * price.prompt + tokens_out * price.completion
        usd_bound = most_in * price.prompt + most_out * price.completion
    return StagePlan(
        stage, work.requests, tokens_in, tokens_out, usd, each.basis, role.provider,
        role.model, most_in, most_out, usd_bound,
    )
