"""How a question becomes a request and its reply an ``answers.jsonl`` line: what the
online answers (``pipeline.answers``) and the batches (``pipeline.batch``) share, so that
neither imports the other's module for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overbrainer.config.model import Role
from overbrainer.pipeline.fingerprint import answer_fingerprint
from overbrainer.pipeline.logits import LogitKeeper
from overbrainer.pipeline.records import Answer, AnswerMeta, Turn
from overbrainer.pipeline.samples import QUESTION, SAMPLE, item_meta
from overbrainer.providers.completion import Completion, ReasoningKind


def exclusion(completion: Completion, kind: ReasoningKind, wants_reasoning: bool) -> str | None:
    """Why an answer cannot be trained on, by the first rule that applies, or None."""
    if completion.finish_reason == "length":
        return "truncated"
    if completion.finish_reason in ("refusal", "content_filter"):
        return "refused"
    if not completion.content.strip():
        return "empty"
    if wants_reasoning and kind != "raw":
        return "no_raw_reasoning"
    return None


def answer_record(  # noqa: PLR0917 - the record's parts
    question: dict[str, Any],
    completion: Completion,
    role: Role,
    hidden: bool,
    system: str | None,
    made: str | None = None,
) -> Answer:
    """The ``answers.jsonl`` line of ``question`` (a sample's item: ``pipeline.samples``);
    ``system`` is kept when given, ``made`` (its fingerprint) as ``meta.fingerprint``."""
    kind = completion.reasoning_kind
    if hidden and kind == "raw":
        kind = "summary"
    messages: list[Turn] = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": question["text"]})
    assistant: Turn = {"role": "assistant", "content": completion.content}
    if kind == "raw" and completion.reasoning:
        assistant["reasoning_content"] = completion.reasoning
    messages.append(assistant)
    meta: AnswerMeta = {
        "model": role.model,
        "input_tokens": completion.input_tokens,
        "output_tokens": completion.output_tokens,
        "finish_reason": completion.finish_reason,
        "reasoning_kind": kind,
        "excluded": exclusion(completion, kind, role.reasoning),
    }
    if made is not None:
        meta["fingerprint"] = made
    sample = item_meta(question)
    if sample:
        meta["question"] = sample[QUESTION]
        meta["sample"] = sample[SAMPLE]
    return {
        "id": question["id"],
        "topic": question["topic"],
        "subtopic": question["subtopic"],
        "messages": messages,
        "meta": meta,
    }


@dataclass(frozen=True)
class Answering:
    """How a question becomes a request and its reply an answer: the same online and in
    batch, so that a batch's answers are the online ones but for ``meta.batch``."""

    role: Role
    hidden: bool
    systems: dict[str, str]
    keep_system: bool
    logits: LogitKeeper | None = None
    """Keeps each answer's top-k logprobs (``distill = "logits"``), before its line."""

    @property
    def top_logprobs(self) -> int | None:
        """The candidates a request asks for per token, when logits are kept."""
        return None if self.logits is None else self.logits.top_k

    def messages(self, question: dict[str, Any]) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.systems[question["topic"]]},
            {"role": "user", "content": question["text"]},
        ]

    def excluded(self, completion: Completion) -> str | None:
        """Why the answer of ``completion`` would be set aside, as its record says."""
        kind = completion.reasoning_kind
        if self.hidden and kind == "raw":
            kind = "summary"
        return exclusion(completion, kind, self.role.reasoning)

    def fingerprint(self, question: dict[str, Any]) -> str:
        """What the answer of ``question`` is made from now (``pipeline.fingerprint``)."""
        return answer_fingerprint(self.systems[question["topic"]], self.role, question)

    def record(self, question: dict[str, Any], completion: Completion) -> Answer:
        system = self.systems[question["topic"]] if self.keep_system else None
        made = self.fingerprint(question)
        found = answer_record(question, completion, self.role, self.hidden, system, made)
        if self.logits is not None:
            self.logits.keep(found, completion)
        return found
