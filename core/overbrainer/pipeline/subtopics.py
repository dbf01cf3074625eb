"""``subtopics``: the generator names the subtopics each topic is missing."""

from __future__ import annotations

from collections import defaultdict

from overbrainer.config.model import Role, Topic
from overbrainer.events import set_topic
from overbrainer.pipeline.fingerprint import fingerprint
from overbrainer.pipeline.ids import normalize, subtopic_id
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.records import (
    REJECTED,
    SUBTOPICS,
    Forgetting,
    Subtopic,
    rejected_text,
    without,
)
from overbrainer.pipeline.served_live import live_concurrency
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.errors import ProviderError

KIND = "subtopic"


async def run(ctx: StageContext) -> None:
    """Per topic: skipped when it has its subtopics, else one ask for the missing ones."""
    data = ctx.data
    templates = Templates(ctx.project_dir, "subtopics.txt")
    stored = data.read(SUBTOPICS)
    rejected = data.read(REJECTED)
    if ctx.force:
        stored = without(stored, ctx.topic_names)
        rejected = without(rejected, ctx.topic_names, KIND)
    forgetting = Forgetting(data, ctx.force, [(SUBTOPICS, None), (REJECTED, KIND)])
    known: dict[str, set[str]] = defaultdict(set)
    have: dict[str, int] = defaultdict(int)
    for subtopic in stored:
        known[subtopic["topic"]].add(subtopic["id"])
        have[subtopic["topic"]] += 1
    for record in rejected:
        if record["kind"] == KIND:
            known[record["topic"]].add(subtopic_id(record["topic"], rejected_text(record) or ""))
    todo: list[tuple[Topic, int]] = []
    for topic in ctx.topics:
        if have[topic.name] >= topic.subtopics:
            ctx.report.skip(topic=topic.name)
        else:
            todo.append((topic, topic.subtopics - have[topic.name]))
    ctx.report.start(len(todo))
    if not todo:
        return
    role = ctx.settings.roles.generator

    with data.writer(SUBTOPICS) as writer:

        async def ask(work: tuple[Topic, int]) -> None:
            topic, missing = work
            set_topic(topic.name)
            prompt = templates.render(
                "subtopics.txt", topic=topic.name, description=topic.description, count=missing
            )
            try:
                names = await ctx.ask_list(role, prompt, topic.name)
            except ProviderError as error:
                ctx.report.fail(topic.name, error.message)
                return
            forgetting.answered(topic.name, {SUBTOPICS: writer})
            seen = known[topic.name]
            made = subtopic_fingerprint(templates.source("subtopics.txt"), role, topic)
            kept = 0
            for name in names:
                if kept == missing:
                    break
                identifier = subtopic_id(topic.name, name)
                if not normalize(name) or identifier in seen:
                    ctx.report.exclude()
                    continue
                seen.add(identifier)
                made_one: Subtopic = {
                    "id": identifier, "topic": topic.name, "name": name, "fingerprint": made
                }
                writer.append(made_one)
                kept += 1
            ctx.report.finish()

        async with live_concurrency(ctx, "subtopics", role.provider) as concurrency:
            await for_each(todo, ask, concurrency)


def subtopic_fingerprint(template: str, role: Role, topic: Topic) -> str:
    """A subtopic's fingerprint: its template, the generator's settings and its topic
    (the count asked for varies from ask to ask)."""
    return fingerprint(template, role, topic.name, topic.description)
