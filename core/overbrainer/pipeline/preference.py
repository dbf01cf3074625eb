"""``[pipeline] select = "judge"``: of a question's answers, the one the judge prefers.

The answers meet in a knockout, in the order of their samples: the first holds until a
later one beats it, and a challenger beats the holder only when the judge prefers it in
both orders (judges prefer a position: a preference that flips with the order is a tie, and
the holder stays). The second order is asked only when the first prefers the challenger,
so a question of N answers asks the judge N - 1 to 2 (N - 1) times.

``answers`` asks the judge once a question's answers are in, and keeps each pair's verdict
in ``data/preferences.jsonl`` under a key made of the judge (its settings and
``prompts/judge.txt``), the question's id and the two answers' texts: an interrupted stage asks
only what it has not, an answer made again or another judge is judged again, and ``split``
plays the knockout again from the file to keep the winner.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer.config.model import Role, Settings
from overbrainer.pipeline.fingerprint import fingerprint
from overbrainer.pipeline.ids import stable_id
from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.projection import (
    ANSWER_TOKENS,
    CHARS_PER_TOKEN,
    QUESTION_CHARS,
    StageWork,
)
from overbrainer.pipeline.prompts import Templates
from overbrainer.pipeline.records import ANSWERS, DATA_DIR, QUESTIONS, DataFiles
from overbrainer.pipeline.samples import question_of, sample_of
from overbrainer.pipeline.stage import StageContext
from overbrainer.pipeline.verdict import STRICTER, parse_verdict, strip_reasoning
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError

PREFERENCES = "preferences.jsonl"
TEMPLATE = "judge.txt"
UNREAD = "the judge's verdict cannot be read"


def judging(settings: Settings) -> bool:
    """Whether ``answers`` asks the judge: ``select = "judge"`` with several samples."""
    return settings.pipeline.select == "judge" and settings.roles.parent.samples > 1


def judge_role(settings: Settings) -> Role:
    """Who judges: ``roles.judge``, else the parent (as ``compare``'s judge)."""
    return settings.roles.judge or settings.roles.parent


def _is_preference(record: dict[str, Any]) -> bool:
    return all(isinstance(record.get(key), str) for key in ("id", "question", "winner"))


def read_preferences(project_dir: Path) -> dict[str, dict[str, Any]]:
    """The verdicts kept so far, by pair key."""
    path = project_dir / DATA_DIR / PREFERENCES
    if not path.is_file():
        return {}
    return {r["id"]: r for r in read_jsonl(path, f"{DATA_DIR}/{PREFERENCES}", _is_preference)}


@dataclass(frozen=True)
class Pairing:
    """How a pair of answers is keyed and put to the judge."""

    judge: Role
    made: str
    """The judge's fingerprint: its settings and the template's text."""
    templates: Templates

    @classmethod
    def of(cls, project_dir: Path, settings: Settings) -> Pairing:
        templates = Templates(project_dir, TEMPLATE)
        role = judge_role(settings)
        return cls(role, fingerprint(templates.source(TEMPLATE), role), templates)

    def key(self, question: str, holder: str, challenger: str) -> str:
        """The pair's key: the judge, the question's id and both answers' texts."""
        return stable_id("preference", self.made, question, holder, challenger)

    def prompt(self, question: str, answer_a: str, answer_b: str) -> str:
        return self.templates.render(
            TEMPLATE, question=question, answer_a=answer_a, answer_b=answer_b
        )


def answer_text(record: dict[str, Any]) -> str:
    """What the judge reads of an answer: its last turn, without reasoning."""
    return strip_reasoning(str(record["messages"][-1]["content"]))


def preferred(
    pairing: Pairing, known: dict[str, dict[str, Any]], question: str, texts: list[str]
) -> int | None:
    """The position of the answer of ``texts`` (by sample) that wins the knockout, as the
    verdicts ``known`` say, or None when a pair on its way has none yet."""
    best = 0
    for challenger in range(1, len(texts)):
        found = known.get(pairing.key(question, texts[best], texts[challenger]))
        if found is None:
            return None
        if found["winner"] == "challenger":
            best = challenger
    return best


def groups(
    answers: Iterable[dict[str, Any]], questions: Iterable[dict[str, Any]], topics: set[str]
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Each question of ``topics`` with its usable answers (the latest of each id, not
    excluded) by sample, for those with two or more."""
    latest = {answer["id"]: answer for answer in answers}
    by_question: dict[str, list[dict[str, Any]]] = {}
    for answer in latest.values():
        if answer["meta"].get("excluded") is None:
            by_question.setdefault(question_of(answer), []).append(answer)
    found = []
    for question in {q["id"]: q for q in questions}.values():
        mine = by_question.get(question["id"], [])
        if question["topic"] in topics and len(mine) > 1:
            found.append((question, sorted(mine, key=sample_of)))
    return found


def judge_work(project_dir: Path, settings: Settings) -> StageWork:
    """The judge's requests left: two a pair of answers the knockouts still need (an
    upper bound: the second order is asked only when the first prefers the challenger),
    of the answers there and of those to come (``samples`` a question)."""
    if not judging(settings):
        return StageWork()
    pairing = Pairing.of(project_dir, settings)
    known = read_preferences(project_dir)
    data = DataFiles(project_dir)
    topics = {topic.name for topic in settings.topics}
    questions = list({q["id"]: q for q in data.read(QUESTIONS) if q["topic"] in topics}.values())
    answers = data.read(ANSWERS)
    found = {question["id"]: mine for question, mine in groups(answers, questions, topics)}
    lengths = [len(answer_text(answer)) for answer in answers]
    answer_chars = sum(lengths) // len(lengths) if lengths else CHARS_PER_TOKEN * ANSWER_TOKENS
    frame = len(pairing.templates.source(TEMPLATE)) + 2 * answer_chars
    samples = settings.roles.parent.samples
    pairs = chars = 0
    for question in questions:
        texts = [answer_text(answer) for answer in found.get(question["id"], [])]
        left = samples - 1 - _known_pairs(pairing, known, question["id"], texts)
        pairs += left
        chars += left * (len(question["text"]) + frame)
    planned = sum(topic.subtopics * topic.questions_per_subtopic for topic in settings.topics)
    coming = max(planned - len(questions), 0) * (samples - 1)
    pairs += coming
    chars += coming * (QUESTION_CHARS + frame)
    # each pair two requests at most; a character 4 bytes at most (the bound)
    return StageWork(2 * pairs, 2 * chars, 1, 0, 2 * 4 * chars)


def _known_pairs(
    pairing: Pairing, known: dict[str, dict[str, Any]], question: str, texts: list[str]
) -> int:
    """How many pairs of the knockout of ``texts`` have their verdict already."""
    best = 0
    for challenger in range(1, len(texts)):
        found = known.get(pairing.key(question, texts[best], texts[challenger]))
        if found is None:
            return challenger - 1
        if found["winner"] == "challenger":
            best = challenger
    return max(len(texts) - 1, 0)


async def judge_answers(ctx: StageContext) -> None:
    """Ask the judge the verdicts the knockout of each question's answers still needs."""
    pairing = Pairing.of(ctx.project_dir, ctx.settings)
    known = read_preferences(ctx.project_dir)
    data = ctx.data
    todo = groups(data.read(ANSWERS), data.read(QUESTIONS), ctx.topic_names)
    path = ctx.project_dir / DATA_DIR / PREFERENCES
    ctx.report.counted_as = "select"  # the judge's own average, apart from the answers'
    with JsonlWriter(path, _is_preference, f"{DATA_DIR}/{PREFERENCES}") as writer:

        async def one(group: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
            question, answers = group
            texts = [answer_text(answer) for answer in answers]
            best = 0
            for challenger in range(1, len(answers)):
                key = pairing.key(question["id"], texts[best], texts[challenger])
                if key not in known:
                    try:
                        verdict = await _verdict(
                            ctx, pairing, question, texts[best], texts[challenger]
                        )
                    except ProviderError as error:
                        logger.warning(
                            f"answers: judging the answers of {question['id']} failed "
                            f"({error.message}): split keeps them all until it is judged"
                        )
                        return
                    known[key] = record = {
                        "id": key, "question": question["id"], "holder": answers[best]["id"],
                        "challenger": answers[challenger]["id"], **verdict,
                    }  # fmt: skip
                    writer.append(record)
                if known[key]["winner"] == "challenger":
                    best = challenger

        await for_each(todo, one, ctx.settings.pipeline.concurrency)


async def _verdict(
    ctx: StageContext, pairing: Pairing, question: dict[str, Any], holder: str, challenger: str
) -> dict[str, str]:
    """The pair's verdict: the challenger's if the judge prefers it in both orders (the
    second asked only when the first does), else the holder's."""
    first = await _order(ctx, pairing, question, holder, challenger)
    if first != "B":
        return {"winner": "holder", "reason": f"holder first: {first}"}
    second = await _order(ctx, pairing, question, challenger, holder)
    if second != "A":
        return {"winner": "holder", "reason": f"flipped with the order: B, then {second}"}
    return {"winner": "challenger", "reason": "preferred in both orders"}


async def _order(
    ctx: StageContext, pairing: Pairing, question: dict[str, Any], answer_a: str, answer_b: str
) -> str:
    """The judge's verdict in one order, ``A``, ``B`` or ``tie`` (asked once more, stricter,
    when its reply holds none; ``unread`` after that)."""
    prompt = pairing.prompt(question["text"], answer_a, answer_b)

    def unread(completion: Completion) -> str | None:
        return None if parse_verdict(strip_reasoning(completion.content)) else UNREAD

    for extra in ("", STRICTER):
        messages = [{"role": "user", "content": prompt + extra}]
        completion = await ctx.chat(pairing.judge, messages, question["id"], unread)
        parsed = parse_verdict(strip_reasoning(completion.content))
        if parsed is not None:
            return parsed[0]
    return "unread"
