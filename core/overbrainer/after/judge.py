"""The judge of a compare: which of two answers is better, asked of a provider's model.

The child's answer and the other's (the parent's; its base model's or another run's child's,
served the same way as the child) are shown without their reasoning, in both orders (the
one drawn per question from the seed first): judges prefer a position, so a verdict that
flips with the order is a tie. A reply without a verdict is asked once more with a stricter
instruction. Each question's verdicts, with the judge's raw replies, are appended to the
verdicts file as they come: a compare that stopped resumes with the questions not judged yet.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash
from loguru import logger

from overbrainer import files
from overbrainer.config.model import Role, Settings
from overbrainer.errors import UserError
from overbrainer.pipeline.exchanges import ExchangeLog, first_line
from overbrainer.pipeline.verdict import STRICTER, parse_verdict, strip_reasoning
from overbrainer.providers.errors import ProviderError

TEMPLATE = "judge.txt"
REFERENCE_TEMPLATE = "judge_reference.txt"
"""The judge's prompt with the parent's answer as a reference (``[compare] reference``)."""


def child_first(seed: int, question_id: str) -> bool:
    """Whether the child's answer is A for this question: XXH3-64 of the id under the seed
    is odd."""
    return xxhash.xxh3_64_intdigest(question_id.encode("utf-8"), seed=seed) % 2 == 1


def verdicts_key(provider: str, model: str, template: str) -> str:
    """16 hex digits naming the judge (provider, model and template): another judge writes
    another verdicts file (and so did the one-order judging of earlier versions)."""
    return xxhash.xxh3_64_hexdigest(f"{provider}\x1f{model}\x1f{template}\x1fboth orders".encode())


def outcome(verdict: str, first: bool) -> str:
    """The child's result: ``win``, ``tie`` or ``loss``."""
    if verdict == "tie":
        return "tie"
    child = "A" if first else "B"
    return "win" if verdict == child else "loss"


def combined(first: str, second: str) -> str:
    """The question's verdict from its two orders: ``unparsed`` when either is, the same
    when both agree, else a ``tie`` (a preference that follows the position is none)."""
    if "unparsed" in (first, second):
        return "unparsed"
    return first if first == second else "tie"


@dataclass(frozen=True)
class Judge:
    """Who judges: ``roles.judge``, else the parent; ``is_parent`` also when the judge is
    set to the parent's own model (a judge prefers its own answers)."""

    provider: str
    role: Role
    is_parent: bool

    @classmethod
    def of(cls, settings: Settings) -> Judge:
        parent = settings.roles.parent
        role = settings.roles.judge or parent
        same = (role.provider, role.model) == (parent.provider, parent.model)
        return cls(role.provider, role, settings.roles.judge is None or same)


def records_by_id(path: Path, key: str = "id") -> dict[str, dict[str, Any]]:
    """The JSONL records of ``path`` by their ``key`` (a string), the last one winning; a
    missing file is empty and a torn last line ignored (both appended to as the compare
    goes). Lines end at ``\n`` alone: a text may hold U+2028."""
    records: dict[str, dict[str, Any]] = {}
    try:
        text = files.read_text(path, path.name, files.READ_LIMIT) or ""
    except UserError:  # a FIFO, a device: nothing recorded
        return records
    for line in text.split("\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get(key), str):
            records[record[key]] = record
    return records


def read_verdicts(path: Path) -> dict[str, dict[str, Any]]:
    """The verdicts recorded so far, by question id."""
    return records_by_id(path)


class VerdictLog:
    """The verdicts file, appended one synced line per verdict."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, record: dict[str, Any]) -> None:
        fd = files.open_append(self.path, self.path.name)  # never through a link
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
            file.flush()
            os.fsync(file.fileno())


UNPARSED = "the judge's verdict cannot be read"


@dataclass(frozen=True)
class Others:
    """The answers the child's are judged against when not the parent's (its base model's,
    another run's child's), by question id, as the server wrote them; ``name`` says whose."""

    name: str
    answers: dict[str, dict[str, Any]]


async def judge_all(  # noqa: PLR0915, PLR0917 - one call site; its closures share its state
    settings: Settings,
    env: dict[str, str],
    questions: list[dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    render: Callable[[dict[str, Any], str, str], str],
    log: VerdictLog,
    seed: int,
    compare_id: str,
    *,
    others: Others | None = None,
    exchanges: ExchangeLog | None = None,
) -> None:
    """Judge every question without a verdict in ``log``, ``pipeline.concurrency`` at a time:
    the child's answer against ``others``' (the parent's, in the question, when None);
    each exchange with the judge is kept in ``exchanges`` (``overbrainer log``)."""
    from overbrainer.providers.prices import PriceBook
    from overbrainer.providers.registry import ProviderSet

    judge = Judge.of(settings)
    done = read_verdicts(log.path)
    providers = ProviderSet(settings, env, PriceBook())
    gate = asyncio.Semaphore(settings.pipeline.concurrency)

    async def ask(qid: str, prompt: str, first: bool) -> dict[str, Any]:
        """One order's verdict: asked once more, stricter, when the reply holds none."""
        client = providers.client(judge.provider)

        def on_retry(error: str, delay: float) -> None:
            logger.warning(f"compare: judging {qid} failed: {error}; retrying in {delay:.0f}s")

        replies: list[str] = []
        parsed = None
        for attempt in range(2):
            messages = [{"role": "user", "content": prompt + (STRICTER if attempt else "")}]
            try:
                completion = await client.chat(judge.role, messages, on_retry)
            except ProviderError as error:
                if exchanges is not None:
                    exchanges.record("compare", qid, judge.role.model, messages, None,
                                     failure=error.message)  # fmt: skip
                raise UserError(f"the judge failed on question {qid}: {error}") from None
            replies.append(completion.content)
            parsed = parse_verdict(strip_reasoning(completion.content))
            if exchanges is not None:
                exchanges.record(
                    "compare", qid, judge.role.model, messages, completion.content,
                    completion.reasoning, None if parsed is not None else UNPARSED,
                )  # fmt: skip
            if parsed is not None:
                break
            logger.debug(f"compare: {qid}: the judge's reply was:\n{completion.content}")
        if parsed is None:
            logger.warning(
                f"compare: {qid}: {UNPARSED} (it began "
                f"{first_line(strip_reasoning(replies[-1]))!r}): kept as unparsed "
                "(`overbrainer log --failed --stage compare` shows the replies)"
            )
            return {"child_first": first, "verdict": None, "outcome": "unparsed", "reason": "",
                    "replies": replies}  # fmt: skip
        verdict, reason = parsed
        return {"child_first": first, "verdict": verdict, "outcome": outcome(verdict, first),
                "reason": reason, "replies": replies}  # fmt: skip

    async def one(question: dict[str, Any]) -> None:
        qid = question["id"]
        first = child_first(seed, qid)
        child = answers.get(qid)
        if child is None or "error" in child:
            reason = (child or {}).get("error", "the child gave no answer")
            log.append({"id": qid, "verdict": "error", "reason": reason, "child_first": first})
            return
        child_text = strip_reasoning(child.get("answer", ""))
        if others is None:
            other_text = strip_reasoning(question["parent"])
        else:
            other = others.answers.get(qid)
            if other is None or "error" in other:
                said = (other or {}).get("error", "no answer")
                reason = f"{others.name} gave no answer ({said}): not judged"
                log.append(
                    {"id": qid, "verdict": "skipped", "reason": reason, "child_first": first}
                )
                return
            other_text = strip_reasoning(other.get("answer", ""))
        orders = []
        async with gate:
            for child_is_a in (first, not first):
                a, b = (child_text, other_text) if child_is_a else (other_text, child_text)
                orders.append(await ask(qid, render(question, a, b), child_is_a))
                if orders[0]["outcome"] == "unparsed":
                    break  # unparsed whatever the other order says
        verdict = combined(orders[0]["outcome"], orders[-1]["outcome"])
        flipped = verdict == "tie" and orders[0]["outcome"] != orders[-1]["outcome"]
        reason = next((order["reason"] for order in orders if order["reason"]), "")
        if flipped:
            said = "; ".join(
                f"child {'first' if o['child_first'] else 'second'}: {o['outcome']}"
                + (f" ({o['reason']})" if o["reason"] else "")
                for o in orders
            )
            reason = f"the verdict flipped with the order, so a tie: {said}"
        log.append({
            "id": qid, "verdict": verdict, "reason": reason, "child_first": first,
            "flipped": flipped, "orders": orders,
        })  # fmt: skip

    try:
        pending = [  # an unparsed verdict is asked again (a rejudge after changing the judge)
            question
            for question in questions
            if done.get(question["id"], {}).get("verdict") in (None, "unparsed")
        ]
        await asyncio.gather(*(one(question) for question in pending))
    except UserError as error:
        raise UserError(
            f"the verdicts so far are kept; resume with `overbrainer compare --rejudge "
            f"{compare_id}`: {error.message}"
        ) from None
    finally:
        await providers.aclose()
