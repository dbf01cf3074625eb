"""``answers``: the parent answers every question, its reasoning kept when it is raw.

A question is answered once its id is in ``answers.jsonl``, excluded or not: answers are
appended as they complete, so an interruption or a fatal error never costs one twice.

``--force`` replaces answers one by one: a new answer is appended after the old one, and the
later line of an id is the one that counts; the old lines are dropped when the stage ends.
However it ends, each question keeps an answer: the new one, or else the old one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, TypeVar

from loguru import logger

from overbrainer.config.model import Role, Settings
from overbrainer.errors import UserError
from overbrainer.events import set_topic
from overbrainer.pipeline.answering import Answering
from overbrainer.pipeline.batch import BatchStage
from overbrainer.pipeline.batch_ledger import Ledger
from overbrainer.pipeline.fingerprint import answer_fingerprint, recorded
from overbrainer.pipeline.jsonl import JsonlWriter
from overbrainer.pipeline.kd_preflight import logits_problems
from overbrainer.pipeline.logits import keeper
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.preference import judge_answers, judging
from overbrainer.pipeline.preflight import hides_reasoning, reasoning_problem
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.records import ANSWERS, DATA_DIR, QUESTIONS, Answer, is_imported, without
from overbrainer.pipeline.samples import imported_questions, items, question_of, together
from overbrainer.pipeline.served_live import live_concurrency
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError

T = TypeVar("T")


@dataclass
class _Appending:
    """Appends the batches' answers to ``answers.jsonl``; ``replaced``: whether one came
    after an older answer of its question (a batch sent by ``--force``), whose line is to
    go when the stage ends."""

    writer: JsonlWriter
    answered: dict[str, str | None]
    replaced: bool = False

    def __call__(self, record: Answer) -> None:
        self.replaced = self.replaced or record["id"] in self.answered
        self.writer.append(record)


def _answering(ctx: StageContext, templates: Templates) -> Answering:
    problem = reasoning_problem(ctx.settings)
    if problem is not None:
        raise UserError(problem)
    distilling = logits_problems(ctx.settings)
    if distilling:
        raise UserError("; ".join(distilling))
    role = ctx.settings.roles.parent
    protocol = ctx.settings.providers[role.provider].protocol
    hidden = hides_reasoning(protocol, role.model)
    systems = answer_systems(ctx.settings, templates)
    logits = keeper(ctx.settings, ctx.data.path(ANSWERS).parent, DATA_DIR)
    return Answering(role, hidden, systems, ctx.settings.pipeline.include_system_prompt, logits)


def answer_systems(settings: Settings, templates: Templates) -> dict[str, str]:
    """Each topic's system prompt, rendered (every topic's: a live batch may hold
    questions of a topic not selected)."""
    return {
        topic.name: templates.render(
            "answer_system.txt", topic=topic.name, description=topic.description
        )
        for topic in settings.topics
    }


def stale_answers(
    answers: list[dict[str, Any]],
    questions: list[dict[str, Any]],
    systems: dict[str, str],
    role: Role,
) -> set[str]:
    """The ids of the answers made otherwise than ``systems`` and ``role`` would make them
    now, of the topics in ``systems``; one with no fingerprint (older) is not stale. Each
    sample of a question on its own."""
    by_id = {question["id"]: question for question in questions}
    stale = set()
    for answer in answers:
        if is_imported(answer):  # the user's own: made by no prompt of ours
            stale.discard(answer["id"])
            continue
        made = recorded(answer)
        question = by_id.get(question_of(answer))
        if made is None or question is None or answer["topic"] not in systems:
            continue
        if made != answer_fingerprint(systems[answer["topic"]], role, question):
            stale.add(answer["id"])
        else:
            stale.discard(answer["id"])  # the later line of an id is the one that counts
    return stale


async def _beside(online: Awaitable[None], batches: Awaitable[T]) -> T:
    """Online answers while the live batches end, and what the batches return; a failure
    of either waits for the end of the other (the replies on their way are paid for)."""
    done, ended = await asyncio.gather(online, batches, return_exceptions=True)
    if isinstance(done, BaseException):
        raise done
    if isinstance(ended, BaseException):
        raise ended
    return ended


def _select(
    ctx: StageContext,
    questions: list[dict[str, Any]],
    answered: dict[str, str | None],
    in_batch: set[str],
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The items to send (each question's samples, ``pipeline.samples``, of the selected
    topics, with no answer, in no live batch), and every item by id; the answered ones are
    counted skipped."""
    todo, seen = [], set()
    by_id: dict[str, dict[str, Any]] = {}
    selected = ctx.topic_names  # a set made on each call: once, not once a question
    for question in questions:
        by_id.setdefault(question["id"], question)
        if question["topic"] not in selected or question["id"] in seen:
            continue
        seen.add(question["id"])
        if question["id"] in answered:
            ctx.report.skip(topic=question["topic"])
        elif question["id"] not in in_batch:
            todo.append(question)
    if ctx.limit is not None and len(todo) > ctx.limit:  # a pilot: spread over topics
        step = len(todo) / ctx.limit
        todo = [todo[int(n * step)] for n in range(ctx.limit)]
    return todo, by_id


async def run(ctx: StageContext) -> None:
    """Answer each question of the selected topics that has no answer yet, online or in
    batch; a question in a live batch waits for that batch, whichever way the stage runs.
    Then, with ``[pipeline] select = "judge"``, the judge compares each question's answers
    (``pipeline.preference``; not for a pilot, which only measures answers)."""
    await _answer(ctx)
    if judging(ctx.settings) and not ctx.cancel and ctx.limit is None:
        await judge_answers(ctx)


async def _answer(ctx: StageContext) -> None:  # noqa: PLR0915 - the stage's one path
    data = ctx.data
    templates = Templates(ctx.project_dir, "answer_system.txt")
    questions = data.read(QUESTIONS)
    answers = data.read(ANSWERS)
    asked = list(items(questions, ctx.settings.roles.parent.samples, imported_questions(answers)))
    if ctx.force:
        answers = without(answers, ctx.topic_names)
    elif ctx.stale:
        systems = answer_systems(ctx.settings, templates)
        selected = {name: systems[name] for name in ctx.topic_names}
        redo = stale_answers(answers, questions, selected, ctx.settings.roles.parent)
        answers = [answer for answer in answers if answer["id"] not in redo]
    answered = {answer["id"]: answer["meta"].get("batch") for answer in answers}
    live = Ledger(ctx.project_dir).live()
    in_batch = {question for batch in live for question in batch.questions}
    todo, by_id = _select(ctx, asked, answered, in_batch)
    # A live batch is collected even when its questions have answers (it replaces them:
    # it was sent by --force): it is paid for, and it stays live until it is.
    ctx.report.start(len(todo) + len(in_batch & by_id.keys()))
    if ctx.cancel:
        todo = []  # nothing is sent: the live batches are only cancelled
    if not todo and not live:
        return

    answering = _answering(ctx, templates)
    role = answering.role
    in_batch_now = role.batch if ctx.batch is None else ctx.batch
    appending: _Appending | None = None
    try:
        with data.writer(ANSWERS) as writer:

            async def answer(group: list[dict[str, Any]]) -> None:
                """Answer ``group``, samples of one question: in one request asking for
                them all (``n``), then again for those a server that ignores it left."""
                set_topic(group[0]["topic"])
                while group:
                    saved = await ask(group)
                    if not saved:
                        return
                    group = group[len(saved):]

            async def ask(group: list[dict[str, Any]]) -> list[Answer]:
                """The answers of one request for ``group`` (none when it failed)."""
                saved: list[Answer] = []

                def keep(completions: list[Completion]) -> None:
                    # more replies than asked (never seen) are paid for, and not kept
                    for item, completion in zip(group, completions, strict=False):
                        saved.append(record := answering.record(item, completion))
                        writer.append(record)

                try:
                    await ctx.chats(
                        role, answering.messages(group[0]), group[0]["id"], len(group),
                        answering.excluded, keep, top_logprobs=answering.top_logprobs,
                    )
                except ProviderError as error:
                    for item in group:
                        ctx.report.fail(item["id"], error.message)
                    return []
                for record in saved:
                    ctx.report.finish(excluded=record["meta"]["excluded"] is not None)
                return saved

            in_one = role.samples_n and ctx.providers.client(role.provider).samples_in_one
            async with live_concurrency(ctx, "answers", role.provider) as concurrency:
                if not live and not in_batch_now:
                    await for_each(together(todo, in_one), answer, concurrency)
                    return
                appending = _Appending(writer, answered)
                batches = BatchStage(ctx, answering, appending, answered, by_id)
                if ctx.cancel:
                    await batches.cancel(live)
                    return
                if in_batch_now:
                    await batches.run(todo, live, submit=True)
                    return
                leftover = await _beside(
                    for_each(together(todo, in_one), answer, concurrency),
                    batches.run([], live, submit=False),
                )
                await for_each(together(leftover, False), answer, concurrency)
    finally:
        if ctx.force or ctx.stale or (appending is not None and appending.replaced):
            # each replaced answer's old line goes; a stale one redone into an excluded
            # one (cut short, refused) stays: it is stale, not broken
            kept = data.latest(ANSWERS, in_place=ctx.stale, keep_usable=ctx.stale)
            if kept:
                logger.warning(
                    f"answers: {kept} stale answer(s) redone came back excluded (cut short or "
                    "refused): the old ones are kept, still stale; `answers --stale` tries again"
                )
