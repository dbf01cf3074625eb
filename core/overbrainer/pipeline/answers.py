"""``answers``: the parent answers every question, its reasoning kept when it is raw.

A question is answered once its id is in ``answers.jsonl``, excluded or not: answers are
appended as they complete, so an interruption or a fatal error never costs one twice.

``--force`` replaces answers one by one: a new answer is appended after the old one, and the
later line of an id is the one that counts; the old lines are dropped when the stage ends.
However it ends, each question keeps an answer: the new one, or else the old one.
"""

from __future__ import annotations

import re
from typing import Any

from overbrainer.config.model import Role
from overbrainer.errors import UserError
from overbrainer.events import set_topic
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.records import ANSWERS, QUESTIONS, without
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.completion import Completion, ReasoningKind
from overbrainer.providers.errors import ProviderError

_HIDING_NAMES = re.compile(r"^(?:gpt-|claude|gemini|o\d)")


def hides_reasoning(protocol: str, model: str) -> bool:
    """Whether the parent shows only a summary of its reasoning, whatever it returns:
    Anthropic, and OpenAI, Anthropic, Google and o-series models, but not gpt-oss."""
    if protocol == "anthropic":
        return True
    name = model.lower()
    base = name.rsplit("/", 1)[-1]
    if base.startswith("gpt-oss"):
        return False
    return name.startswith(("openai/", "anthropic/")) or bool(_HIDING_NAMES.match(base))


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


def answer_record(
    question: dict[str, Any],
    completion: Completion,
    role: Role,
    hidden: bool,
    system: str | None,
) -> dict[str, Any]:
    """The ``answers.jsonl`` line of ``question``; ``system`` is kept when given."""
    kind = completion.reasoning_kind
    if hidden and kind == "raw":
        kind = "summary"
    messages: list[dict[str, str]] = []
    if system is not None:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": question["text"]})
    assistant = {"role": "assistant", "content": completion.content}
    if kind == "raw" and completion.reasoning:
        assistant["reasoning_content"] = completion.reasoning
    messages.append(assistant)
    return {
        "id": question["id"],
        "topic": question["topic"],
        "subtopic": question["subtopic"],
        "messages": messages,
        "meta": {
            "model": role.model,
            "input_tokens": completion.input_tokens,
            "output_tokens": completion.output_tokens,
            "finish_reason": completion.finish_reason,
            "reasoning_kind": kind,
            "excluded": exclusion(completion, kind, role.reasoning),
        },
    }


async def run(ctx: StageContext) -> None:
    """Answer each question of the selected topics that has no answer yet."""
    data = ctx.data
    templates = Templates(ctx.project_dir, "answer_system.txt")
    questions = data.read(QUESTIONS)
    answers = data.read(ANSWERS)
    if ctx.force:
        answers = without(answers, ctx.topic_names)
    answered = {answer["id"] for answer in answers}
    todo, seen = [], set()
    for question in questions:
        if question["topic"] not in ctx.topic_names or question["id"] in seen:
            continue
        seen.add(question["id"])
        if question["id"] in answered:
            ctx.report.skip(topic=question["topic"])
        else:
            todo.append(question)
    ctx.report.start(len(todo))
    if not todo:
        return

    from overbrainer.pipeline.preflight import reasoning_problem

    problem = reasoning_problem(ctx.settings)
    if problem is not None:
        raise UserError(problem)
    role = ctx.settings.roles.parent
    protocol = ctx.settings.providers[role.provider].protocol
    hidden = hides_reasoning(protocol, role.model)
    topics = {topic.name: topic for topic in ctx.topics}
    systems = {
        name: templates.render("answer_system.txt", topic=name, description=topic.description)
        for name, topic in topics.items()
    }
    keep_system = ctx.settings.pipeline.include_system_prompt
    try:
        with data.writer(ANSWERS) as writer:

            async def answer(question: dict[str, Any]) -> None:
                set_topic(question["topic"])
                system = systems[question["topic"]]
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": question["text"]},
                ]
                try:
                    completion = await ctx.chat(role, messages, question["id"])
                except ProviderError as error:
                    ctx.report.fail(question["id"], error.message)
                    return
                record = answer_record(
                    question, completion, role, hidden, system if keep_system else None
                )
                writer.append(record)
                ctx.report.finish(excluded=record["meta"]["excluded"] is not None)

            await for_each(todo, answer, ctx.settings.pipeline.concurrency)
    finally:
        if ctx.force:
            data.latest(ANSWERS)  # each replaced answer's old line goes
