"""The judge of a compare: which of two answers is better, asked of a provider's model.

The child's answer and the other's (the parent's; its base model's or another run's child's,
served the same way as the child) are shown without their reasoning, in both orders (the
one drawn per question from the seed first): judges prefer a position, so a verdict that
flips with the order is a tie. A reply without a verdict is asked once more with a stricter
instruction. Each question's verdicts, with the judge's raw replies, are appended to the
verdicts file as they come: a compare that stopped resumes with the questions not judged yet.

The judge is paid as a stage's requests are (:func:`judging`): each request is reserved by
``[budget] max_usd`` before it is sent and in the spend journal before the next, and the
compare's judging ends with a ``compare`` line in ``history.jsonl``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash
from loguru import logger

from overbrainer import files
from overbrainer.config.model import Role, Settings
from overbrainer.errors import UserError
from overbrainer.pipeline.budget import BudgetExceeded
from overbrainer.pipeline.exchanges import first_line
from overbrainer.pipeline.history import append_history, timestamp
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.report import Report
from overbrainer.pipeline.requests import record_requests
from overbrainer.pipeline.runner import budget_of
from overbrainer.pipeline.spend import SpendJournal
from overbrainer.pipeline.stage import StageContext
from overbrainer.pipeline.verdict import STRICTER, parse_verdict, strip_reasoning
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError
from overbrainer.providers.prices import PriceBook

TEMPLATE = "judge.txt"
REFERENCE_TEMPLATE = "judge_reference.txt"
"""The judge's prompt with the parent's answer as a reference (``[compare] reference``)."""
STAGE = "compare"
"""The stage the judge's requests are journalled and its history line written under."""
COUNTED_AS = "judge"
"""What the judge's requests count for in ``requests.jsonl``: apart from the parent's
answers of a compare (often the same model), whose measured average a verdict's few tokens
would drag down (and the budget's lowered ``max_tokens`` with it)."""


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


@contextmanager
def judging(project_dir: Path, settings: Settings) -> Iterator[StageContext]:
    """The context the judge of one compare asks through, paid as a stage: ``[budget]
    max_usd`` kept from what the project spent before, each request in the spend journal
    before the next, and at the end (however it ends) a ``compare`` line in
    ``history.jsonl`` when anything was to be judged."""
    started = timestamp()
    report = Report(STAGE)
    report.counted_as = COUNTED_AS
    budget = budget_of(STAGE, project_dir, settings, None)
    context = StageContext(project_dir, settings, [], False, report, budget)
    context.journal = SpendJournal(project_dir, STAGE, started)
    status = "failed"
    try:
        context.journal.begin()
        yield context
        status = "ok"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        context.journal.finish()
        if "exchanges" in vars(context):  # made on the first request
            context.exchanges.close()
        if status != "ok" or report.done or report.skipped:
            judge = Judge.of(settings)
            asked = (judge.provider, judge.role.model)
            append_history(
                project_dir, report.history_entry(STAGE, started, timestamp(), status, asked)
            )
        record_requests(project_dir, STAGE, report)


async def judge_all(  # noqa: PLR0915, PLR0917 - one call site; its closures share its state
    context: StageContext,
    env: dict[str, str],
    questions: list[dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    render: Callable[[dict[str, Any], str, str], str],
    log: VerdictLog,
    seed: int,
    compare_id: str,
    *,
    others: Others | None = None,
) -> None:
    """Judge every question without a verdict in ``log``, ``pipeline.concurrency`` at a time,
    through ``context`` (:func:`judging`): the child's answer against ``others``' (the
    parent's, in the question, when None); each exchange with the judge is kept for
    ``overbrainer log``. A request the budget refuses stops the judging once those in flight
    are in, saying how many verdicts are kept and how to go on."""
    settings = context.settings
    report = context.report
    judge = Judge.of(settings)
    done = read_verdicts(log.path)
    # aiohttp comes with the providers: not for what only reads verdicts (report, export).
    from overbrainer.providers.registry import ProviderSet  # noqa: PLC0415

    providers = ProviderSet(settings, env, PriceBook())
    context.providers = providers
    report.price_of = providers.price

    def unparsed(completion: Completion) -> str | None:
        return None if parse_verdict(strip_reasoning(completion.content)) else UNPARSED

    async def ask(qid: str, prompt: str, first: bool) -> dict[str, Any]:
        """One order's verdict: asked once more, stricter, when the reply holds none."""
        replies: list[str] = []
        parsed = None
        for attempt in range(2):
            messages = [{"role": "user", "content": prompt + (STRICTER if attempt else "")}]
            try:
                completion = await context.chat(judge.role, messages, qid, unparsed)
            except ProviderError as error:
                raise UserError(f"the judge failed on question {qid}: {error}") from None
            replies.append(completion.content)
            parsed = parse_verdict(strip_reasoning(completion.content))
            if parsed is not None:
                break
            logger.debug(f"compare: {qid}: the judge's reply was:\n{completion.content}")
        if parsed is None:
            against = f" (against {others.name if others is not None else 'its parent'})"
            logger.warning(
                f"compare: {qid}{against}: {UNPARSED} (it began "
                f"{first_line(strip_reasoning(replies[-1]))!r}): kept as unparsed "
                "(`overbrainer log --failed --stage compare` shows the replies)"
            )
            return {"child_first": first, "verdict": None, "outcome": "unparsed", "reason": "",
                    "replies": replies}  # fmt: skip
        verdict, reason = parsed
        return {"child_first": first, "verdict": verdict, "outcome": outcome(verdict, first),
                "reason": reason, "replies": replies}  # fmt: skip

    def unjudged(record: dict[str, Any]) -> None:
        """A question not put to the judge (no answer to judge): its line, no request."""
        log.append(record)
        report.skip()

    async def one(question: dict[str, Any]) -> None:
        qid = question["id"]
        first = child_first(seed, qid)
        child = answers.get(qid)
        if child is None or "error" in child:
            reason = (child or {}).get("error", "the child gave no answer")
            unjudged({"id": qid, "verdict": "error", "reason": reason, "child_first": first})
            return
        child_text = strip_reasoning(child.get("answer", ""))
        if others is None:
            other_text = strip_reasoning(question["parent"])
        else:
            other = others.answers.get(qid)
            if other is None or "error" in other:
                said = (other or {}).get("error", "no answer")
                reason = f"{others.name} gave no answer ({said}): not judged"
                unjudged({"id": qid, "verdict": "skipped", "reason": reason, "child_first": first})
                return
            other_text = strip_reasoning(other.get("answer", ""))
        orders = []
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
        report.finish()

    pending = [  # an unparsed verdict is asked again (a rejudge after changing the judge)
        question
        for question in questions
        if done.get(question["id"], {}).get("verdict") in (None, "unparsed")
    ]
    report.start(len(pending))
    try:
        # An error stops the questions not started; those in flight end and keep theirs.
        await for_each(pending, one, settings.pipeline.concurrency)
        await providers.settle_prices()
    except BudgetExceeded:
        assert context.budget is not None
        raise UserError(_budget_stop(context, log, questions, compare_id, others)) from None
    except UserError as error:
        raise UserError(
            f"the verdicts so far are kept; resume with `overbrainer compare --rejudge "
            f"{compare_id}`: {error.message}"
        ) from None
    finally:
        await providers.aclose()


def _budget_stop(
    context: StageContext,
    log: VerdictLog,
    questions: list[dict[str, Any]],
    compare_id: str,
    others: Others | None,
) -> str:
    """What a compare stopped by the budget says: the budget's figures, the verdicts kept
    (of the questions, against whom) and how to judge the rest."""
    assert context.budget is not None
    asked = {question["id"] for question in questions}
    kept = sum(
        1
        for qid, record in read_verdicts(log.path).items()
        if qid in asked and record.get("verdict") != "unparsed"
    )
    whom = "its parent" if others is None else others.name
    go_on = (
        f"{kept} of {len(questions)} verdicts against {whom} are kept in {log.path.name}; "
        "raise the budget ([budget] max_usd in overbrainer.toml, or "
        f"OVERBRAINER_BUDGET__MAX_USD), then `overbrainer compare --rejudge {compare_id}` "
        "judges the rest"
    )
    return context.budget.stopped(context.report, go_on)
