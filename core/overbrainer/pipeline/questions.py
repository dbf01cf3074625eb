"""``questions``: the generator writes questions for each subtopic until it has its count.

Near-duplicates are kept out by one deduplicator per topic, which admits one batch of the
topic at a time; what it rejects goes to ``rejected.jsonl`` so it is never asked for again.
"""

from __future__ import annotations

import asyncio
import gc
from collections import defaultdict
from typing import Any

from loguru import logger

from overbrainer.config.model import Settings, Topic
from overbrainer.events import set_topic
from overbrainer.pipeline.dedup import Deduplicator
from overbrainer.pipeline.fingerprint import fingerprint, recorded
from overbrainer.pipeline.ids import question_id
from overbrainer.pipeline.jsonl import JsonlWriter
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.records import (
    QUESTIONS,
    REJECTED,
    REJECTED_REASONS,
    SUBTOPICS,
    Forgetting,
    Question,
    rejected_question,
    rejected_text,
    without,
)
from overbrainer.pipeline.remove import REMOVED
from overbrainer.pipeline.served_live import live_concurrency
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.errors import ProviderError

KIND = "question"

Work = tuple[Topic, dict[str, Any]]
"""A subtopic to fill, with its topic."""


async def run(ctx: StageContext) -> None:
    """Per subtopic: skipped when it has its questions, else batches until it does, or
    until the generator keeps repeating itself."""
    data = ctx.data
    templates = Templates(ctx.project_dir, "questions.txt")
    subtopics = data.read(SUBTOPICS)
    questions = data.read(QUESTIONS)
    rejected = data.read(REJECTED)
    reasons = data.read(REJECTED_REASONS)
    if ctx.force:
        questions = without(questions, ctx.topic_names)
        rejected = without(rejected, ctx.topic_names, KIND)
        reasons = without(reasons, ctx.topic_names, KIND)
    stale: dict[str, set[str]] = defaultdict(set)
    if ctx.stale:
        stale = stale_questions(questions, subtopics, templates, ctx)
        dropped = {identifier for ids in stale.values() for identifier in ids}
        questions = [q for q in questions if q["id"] not in dropped]
    filler = _Filler(ctx, templates, questions, rejected)
    filler.stale = stale
    filler.count_removed(reasons)
    filler.forgetting = Forgetting(
        data, ctx.force, [(QUESTIONS, None), (REJECTED, KIND), (REJECTED_REASONS, KIND)]
    )
    todo: list[Work] = []
    for topic in ctx.topics:
        for subtopic in [s for s in subtopics if s["topic"] == topic.name][: topic.subtopics]:
            if len(filler.accepted[subtopic["id"]]) >= filler.target(topic, subtopic):
                ctx.report.skip(topic=topic.name)
            else:
                todo.append((topic, subtopic))
    ctx.report.start(len(todo))
    if not todo:
        return
    # What is held so far (modules, settings, the topics' questions) lives as long as the
    # stage: frozen, a full collection no longer walks it. At 100,000 questions a topic,
    # those collections were loop stalls of 60-80 ms.
    gc.freeze()
    try:
        with (
            data.writer(QUESTIONS) as filler.questions,
            data.writer(REJECTED) as filler.rejects,
            data.writer(REJECTED_REASONS) as filler.reasons,
        ):
            generator = ctx.settings.roles.generator.provider
            async with live_concurrency(ctx, "questions", generator) as concurrency:
                await for_each(todo, filler.fill, concurrency)
    finally:
        gc.unfreeze()


class _Filler:
    """Fills subtopics with questions, sharing one deduplicator per topic."""

    questions: JsonlWriter
    stale: dict[str, set[str]]
    """``questions --stale``: each subtopic's stale questions, dropped once it is asked."""
    rejects: JsonlWriter
    reasons: JsonlWriter
    forgetting: Forgetting

    def __init__(
        self,
        ctx: StageContext,
        templates: Templates,
        questions: list[dict[str, Any]],
        rejected: list[dict[str, Any]],
    ) -> None:
        self.ctx = ctx
        self.templates = templates
        self.accepted: dict[str, list[str]] = defaultdict(list)
        for question in questions:
            self.accepted[question["subtopic_id"]].append(question["text"])
        self._held = questions
        self._rejected = [r for r in rejected if r["kind"] == KIND]
        self._rejected_ids = {r.get("id") for r in self._rejected}
        self._dedups: dict[str, Deduplicator] = {}
        self._locks: dict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self.removed: dict[str, int] = defaultdict(int)

    def count_removed(self, reasons: list[dict[str, Any]]) -> None:
        """Count, per subtopic, the questions the user deleted: each keeps its place."""
        removed = {r["id"] for r in reasons if r["kind"] == KIND and r["reason"] == REMOVED}
        for record in self._rejected:
            if record.get("id") in removed:
                removed.discard(record["id"])  # a question rejected twice counts once
                self.removed[str(record.get("subtopic_id"))] += 1

    def target(self, topic: Topic, subtopic: dict[str, Any]) -> int:
        """The questions ``subtopic`` is to be given: its count less those deleted."""
        return max(topic.questions_per_subtopic - self.removed[subtopic["id"]], 0)

    async def fill(self, work: Work) -> None:
        topic, subtopic = work
        set_topic(topic.name)
        pipeline = self.ctx.settings.pipeline
        texts = self.accepted[subtopic["id"]]
        target = self.target(topic, subtopic)
        idle = added_in_all = 0
        while len(texts) < target:
            missing = target - len(texts)
            prompt = self.templates.render(
                "questions.txt",
                topic=topic.name,
                description=topic.description,
                subtopic=subtopic["name"],
                count=min(pipeline.question_batch_size, missing),
                accepted=list(texts),
            )
            try:
                candidates = await self.ctx.ask_list(self.ctx.settings.roles.generator, prompt,
                                                     subtopic["id"])
                self._drop_stale(subtopic["id"])
                self.forgetting.answered(
                    topic.name,
                    {
                        QUESTIONS: self.questions,
                        REJECTED: self.rejects,
                        REJECTED_REASONS: self.reasons,
                    },
                )
                added = await self._admit(topic.name, subtopic, candidates, missing)
            except ProviderError as error:
                self.ctx.report.fail(subtopic["id"], error.message)
                return
            added_in_all += added
            idle = 0 if added else idle + 1
            if idle >= max(pipeline.max_retries, 1):
                logger.warning(
                    f"subtopic `{subtopic['name']}`: stopped at {len(texts)} of {target} "
                    "questions, the generator kept repeating itself"
                )
                break
        if added_in_all:
            self.ctx.report.finish()
        else:
            self.ctx.report.settle()

    async def _admit(
        self, topic: str, subtopic: dict[str, Any], candidates: list[str], missing: int
    ) -> int:
        """Keep what is new of ``candidates``, set the rest aside; how many were kept."""
        async with self._locks[topic]:
            admitted, refused = await self._dedup(topic).admit(candidates, missing)
            made = self.fingerprint(subtopic)
            for text in admitted:
                self.questions.append(_question(topic, subtopic, text, made))
                self.accepted[subtopic["id"]].append(text)
            for text, reason in refused:
                record = _question(topic, subtopic, text)
                if record["id"] not in self._rejected_ids:
                    self._rejected_ids.add(record["id"])
                    self.rejects.append(rejected_question(record))
                    self.reasons.append(
                        {"id": record["id"], "kind": KIND, "topic": topic, "reason": reason}
                    )
            self.ctx.report.exclude(len(refused))
        return len(admitted)

    def _drop_stale(self, subtopic: str) -> None:
        """The provider answered for ``subtopic``: its stale questions go now (once), before
        the first new one; a stage that fails before keeps them where they were."""
        ids = self.stale.pop(subtopic, None)
        if ids:
            self.questions.close()  # reopened on the next append, on the new file
            data = self.ctx.data
            data.rewrite(QUESTIONS, [q for q in data.read(QUESTIONS) if q["id"] not in ids])

    def fingerprint(self, subtopic: dict[str, Any]) -> str:
        """What a question of ``subtopic`` is made from now (``pipeline.fingerprint``)."""
        return question_fingerprint(
            self.templates.source("questions.txt"), self.ctx.settings, subtopic
        )

    def _dedup(self, topic: str) -> Deduplicator:
        if topic not in self._dedups:
            pipeline = self.ctx.settings.pipeline
            embed = None
            if self.ctx.settings.roles.embedder is not None:
                embed = lambda texts: self.ctx.embed(texts, topic)  # noqa: E731
            dedup = Deduplicator(pipeline.dedup_threshold, embed, pipeline.embedding_threshold)
            dedup.seed(q["text"] for q in self._held if q["topic"] == topic)
            dedup.seed(rejected_text(r) or "" for r in self._rejected if r["topic"] == topic)
            self._dedups[topic] = dedup
        return self._dedups[topic]


def stale_questions(
    questions: list[dict[str, Any]],
    subtopics: list[dict[str, Any]],
    templates: Templates,
    ctx: StageContext,
) -> dict[str, set[str]]:
    """The stale questions of the selected topics, by subtopic id; one with no
    fingerprint (older) is not stale."""
    names = {s["id"]: s for s in subtopics}
    source = templates.source("questions.txt")
    selected = ctx.topic_names
    stale: dict[str, set[str]] = defaultdict(set)
    for question in questions:
        made = recorded(question)
        subtopic = names.get(question["subtopic_id"])
        if made is None or subtopic is None or question["topic"] not in selected:
            continue
        if made != question_fingerprint(source, ctx.settings, subtopic):
            stale[subtopic["id"]].add(question["id"])
    return stale


def question_fingerprint(template: str, settings: Settings, subtopic: dict[str, Any]) -> str:
    """A question's fingerprint: its template, the generator's settings, its topic (and
    description) and its subtopic (the prompt's other parts vary from ask to ask)."""
    topic = next((t for t in settings.topics if t.name == subtopic["topic"]), None)
    description = topic.description if topic is not None else None
    role = settings.roles.generator
    return fingerprint(template, role, subtopic["topic"], description, subtopic["name"])


def _question(
    topic: str, subtopic: dict[str, Any], text: str, made: str | None = None
) -> Question:
    """The ``questions.jsonl`` line of ``text``; ``made`` (its fingerprint) last, when given."""
    question: Question = {
        "id": question_id(subtopic["id"], text),
        "topic": topic,
        "subtopic_id": subtopic["id"],
        "subtopic": subtopic["name"],
        "text": text,
    }
    if made is not None:
        question["fingerprint"] = made
    return question
