"""The parent's answers to held-out questions of the user's own (``[eval] files``).

They are asked through the parent role's provider as the ``answers`` stage asks it: each
request in the spend journal before the next, under ``[budget] max_usd``, with a history
line of stage ``compare``. Each answer is kept in ``.overbrainer/eval_answers.jsonl`` by
its fingerprint (the question, the system prompt and the parent's settings), so a later
compare asks only the questions that are new, or whose parent changed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from loguru import logger

from overbrainer.after.judge import strip_reasoning
from overbrainer.config.model import Role
from overbrainer.errors import Interrupted, UserError, signal_of
from overbrainer.pipeline.answering import exclusion
from overbrainer.pipeline.budget import BudgetExceeded
from overbrainer.pipeline.fingerprint import fingerprint
from overbrainer.pipeline.history import append_history, timestamp
from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl
from overbrainer.pipeline.pool import for_each
from overbrainer.pipeline.report import Report
from overbrainer.pipeline.requests import record_requests
from overbrainer.pipeline.runner import budget_of
from overbrainer.pipeline.spend import SpendJournal
from overbrainer.pipeline.stage import StageContext
from overbrainer.project import Project
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError
from overbrainer.providers.prices import PriceBook

CACHE = Path(".overbrainer") / "eval_answers.jsonl"
STAGE = "compare"
"""The stage the requests are journalled and the history line written under."""


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_line(record: dict[str, Any]) -> bool:
    return (
        isinstance(record.get("fingerprint"), str)
        and isinstance(record.get("answer"), str)
        and _count(record.get("input_tokens"))
        and _count(record.get("output_tokens"))
    )


def answer_key(messages: list[dict[str, str]], role: Role) -> str:
    """What the parent's answer to ``messages`` is made from: the system prompt, the
    question and the parent's settings (another model or ``max_tokens`` asks again)."""
    system = "\n".join(m["content"] for m in messages if m["role"] == "system")
    return fingerprint(system, role, messages[-1]["content"])


def read_cache(project_dir: Path) -> dict[str, dict[str, Any]]:
    """The kept answers by fingerprint, the later line winning."""
    return {
        record["fingerprint"]: record
        for record in read_jsonl(project_dir / CACHE, str(CACHE), _is_line)
    }


def fill_parent_answers(project: Project, questions: list[dict[str, Any]]) -> None:
    """Give each question whose ``parent`` is None the parent's answer (its text without
    reasoning goes to the judge; its tokens to the cost per 1,000 requests): the one kept,
    else asked now. A question the parent could not answer is an error once the others'
    answers are kept."""
    missing = [question for question in questions if question.get("parent") is None]
    if not missing:
        return
    role = project.settings.roles.parent
    cache = read_cache(project.dir)
    todo: dict[str, dict[str, Any]] = {}
    for question in missing:
        key = answer_key(question["messages"], role)
        if key not in cache:
            todo.setdefault(key, question)
    if todo:
        logger.info(
            f"compare: asking the parent {role.provider}/{role.model} {len(todo)} held-out "
            f"question(s) ({len(missing) - len(todo)} answered before, kept in {CACHE})"
        )
        _ask(project, role, todo, cache)
    unfit: dict[str, list[str]] = {}
    for question in missing:
        record = cache[answer_key(question["messages"], role)]
        question["parent"] = strip_reasoning(record["answer"])
        question["parent_input_tokens"] = record["input_tokens"]
        question["parent_output_tokens"] = record["output_tokens"]
        if isinstance(record.get("excluded"), str):
            unfit.setdefault(record["excluded"], []).append(question["id"])
    for reason, ids in unfit.items():
        shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        why = f" ({UNFIT[reason]})" if reason in UNFIT else ""
        logger.warning(f"compare: the parent's answer to {shown} is {reason}{why}: judged as it is")


UNFIT = {
    "truncated": "cut at roles.parent.max_tokens: raised, compare asks it again",
    "refused": "the provider refused or filtered it",
    "empty": "it holds no text",
}
"""Why a parent's answer is a poor one to judge against (``answering.exclusion``'s reasons)."""


def _ask(
    project: Project, role: Role, todo: dict[str, dict[str, Any]], cache: dict[str, Any]
) -> None:
    """Ask ``todo`` (by fingerprint) of the parent, each answer kept as it comes."""
    started = timestamp()
    report = Report(STAGE)
    budget = budget_of(STAGE, project.dir, project.settings, None)
    context = StageContext(project.dir, project.settings, [], False, report, budget)
    context.journal = SpendJournal(project.dir, STAGE, started)
    status, error = "failed", None
    try:
        context.journal.begin()
        with JsonlWriter(project.dir / CACHE, _is_line, str(CACHE)) as writer:
            asyncio.run(_ask_all(context, project, role, todo, cache, writer))
        status = "failed" if report.failed else "ok"
    except KeyboardInterrupt as interrupt:
        status = "interrupted"
        raise Interrupted(
            "interrupted: the parent's answers so far are kept; compare again asks the rest",
            signal_of(interrupt),
        ) from None
    except BudgetExceeded:
        assert budget is not None
        error = budget.stopped(report)
    finally:
        context.journal.finish()
        append_history(project.dir, _entry(started, status, role, report))
        record_requests(project.dir, STAGE, report)
    if error is not None:
        raise UserError(f"compare: {error}")
    if report.failed:
        raise UserError(
            f"compare: the parent failed on {report.failed} held-out question(s) (the "
            "warnings above say why); the answers it gave are kept: compare again asks the rest"
        )


async def _ask_all(  # noqa: PLR0917 - _ask's state, passed once
    context: StageContext,
    project: Project,
    role: Role,
    todo: dict[str, dict[str, Any]],
    cache: dict[str, Any],
    writer: JsonlWriter,
) -> None:
    from overbrainer.providers.registry import ProviderSet  # noqa: PLC0415 - aiohttp: to ask

    providers = ProviderSet(project.settings, dict(project.env), PriceBook())
    context.providers = providers
    context.report.price_of = providers.price
    context.report.start(len(todo))

    async def one(item: tuple[str, dict[str, Any]]) -> None:
        key, question = item

        def keep(completion: Completion) -> None:
            record = {
                "fingerprint": key,
                "question": question["question"],
                "model": role.model,
                "answer": completion.content,
                "input_tokens": completion.input_tokens,
                "output_tokens": completion.output_tokens,
                "finish_reason": completion.finish_reason,
                "excluded": exclusion(completion, completion.reasoning_kind, False),
            }
            writer.append(record)
            cache[key] = record

        try:
            await context.chat(role, question["messages"], question["id"], None, keep)
        except ProviderError as error:
            context.report.fail(question["id"], error.message)
            return
        context.report.finish()

    try:
        await for_each(list(todo.items()), one, project.settings.pipeline.concurrency)
        await providers.settle_prices()
    finally:
        await providers.aclose()
        if "exchanges" in vars(context):  # made on the first request
            context.exchanges.close()


def _entry(started: str, status: str, role: Role, report: Report) -> dict[str, object]:
    """The history line of the parent's answers, as a stage's."""
    return report.history_entry(STAGE, started, timestamp(), status, (role.provider, role.model))
