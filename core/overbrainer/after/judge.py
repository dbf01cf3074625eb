"""The judge of a compare: which of two answers is better, asked of a provider's model.

The child's and the parent's answers are shown without their reasoning, in an order drawn
per question from the seed, so a judge that favours the first answer favours each side as
often. Each verdict is appended to the verdicts file as it comes: a compare that stopped
resumes with the questions not judged yet.
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
from overbrainer.providers.errors import ProviderError

TEMPLATE = "judge.txt"
VERDICTS = ("A", "B", "TIE")


def strip_reasoning(text: str) -> str:
    """``text`` without ``<think>…</think>``: an unclosed open drops the rest, a close before
    any open drops what precedes it; trimmed."""
    close = text.find("</think>")
    opening = text.find("<think>")
    if close != -1 and (opening == -1 or close < opening):
        text = text[close + len("</think>") :]
    while (opening := text.find("<think>")) != -1:
        end = text.find("</think>", opening)
        if end == -1:
            text = text[:opening]
            break
        text = text[:opening] + text[end + len("</think>") :]
    return text.strip()


def child_first(seed: int, question_id: str) -> bool:
    """Whether the child's answer is A for this question: XXH3-64 of the id under the seed
    is odd."""
    return xxhash.xxh3_64_intdigest(question_id.encode("utf-8"), seed=seed) % 2 == 1


def verdicts_key(provider: str, model: str, template: str) -> str:
    """16 hex digits naming the judge (provider, model and template): another judge writes
    another verdicts file."""
    return xxhash.xxh3_64_hexdigest(f"{provider}\x1f{model}\x1f{template}".encode())


def parse_verdict(text: str) -> tuple[str, str] | None:
    """``(A|B|tie, reason)`` from the judge's reply (the JSON between its first ``{`` and its
    last ``}``), or None when it holds none. A reply of one word, A, B or tie, is read too:
    projects made before the JSON verdict have a ``judge.txt`` that asks for it."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        word = text.strip().rstrip(".").upper()
        return ("tie" if word == "TIE" else word, "") if word in VERDICTS else None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    verdict = str(data.get("verdict", "")).strip().upper()
    if verdict not in VERDICTS:
        return None
    reason = data.get("reason")
    return ("tie" if verdict == "TIE" else verdict), (
        reason.strip() if isinstance(reason, str) else ""
    )


def outcome(verdict: str, first: bool) -> str:
    """The child's result: ``win``, ``tie`` or ``loss``."""
    if verdict == "tie":
        return "tie"
    child = "A" if first else "B"
    return "win" if verdict == child else "loss"


@dataclass(frozen=True)
class Judge:
    """Who judges: ``roles.judge``, else the parent."""

    provider: str
    role: Role
    is_parent: bool

    @classmethod
    def of(cls, settings: Settings) -> Judge:
        role = settings.roles.judge or settings.roles.parent
        return cls(role.provider, role, settings.roles.judge is None)


def records_by_id(path: Path) -> dict[str, dict[str, Any]]:
    """The JSONL records of ``path`` by their ``id``, the last one winning; a missing file
    is empty and a torn last line ignored (both appended to as the compare goes)."""
    records: dict[str, dict[str, Any]] = {}
    try:
        text = files.read_text(path, path.name, files.READ_LIMIT) or ""
    except UserError:  # a FIFO, a device: nothing recorded
        return records
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("id"), str):
            records[record["id"]] = record
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


async def judge_all(  # noqa: PLR0917 - one call site, every argument named there
    settings: Settings,
    env: dict[str, str],
    questions: list[dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    render: Callable[[str, str, str], str],
    log: VerdictLog,
    seed: int,
    compare_id: str,
    *,
    exchanges: ExchangeLog | None = None,
) -> None:
    """Judge every question without a verdict in ``log``, ``pipeline.concurrency`` at a time;
    each exchange with the judge is kept in ``exchanges`` (``overbrainer log``)."""
    from overbrainer.providers.prices import PriceBook
    from overbrainer.providers.registry import ProviderSet

    judge = Judge.of(settings)
    done = read_verdicts(log.path)
    providers = ProviderSet(settings, env, PriceBook())
    gate = asyncio.Semaphore(settings.pipeline.concurrency)

    async def one(question: dict[str, Any]) -> None:
        qid = question["id"]
        first = child_first(seed, qid)
        child = answers.get(qid)
        if child is None or "error" in child:
            reason = (child or {}).get("error", "the child gave no answer")
            log.append({"id": qid, "verdict": "error", "reason": reason, "child_first": first})
            return
        child_text = strip_reasoning(child.get("answer", ""))
        parent_text = strip_reasoning(question["parent"])
        a, b = (child_text, parent_text) if first else (parent_text, child_text)
        prompt = render(question["question"], a, b)
        client = providers.client(judge.provider)

        def on_retry(error: str, delay: float) -> None:
            logger.warning(f"compare: judging {qid} failed: {error}; retrying in {delay:.0f}s")

        parsed = None
        async with gate:
            for _attempt in range(2):
                try:
                    completion = await client.chat(
                        judge.role, [{"role": "user", "content": prompt}], on_retry
                    )
                except ProviderError as error:
                    if exchanges is not None:
                        exchanges.record("compare", qid, judge.role.model,
                                         [{"role": "user", "content": prompt}], None,
                                         failure=error.message)
                    raise UserError(f"the judge failed on question {qid}: {error}") from None
                parsed = parse_verdict(strip_reasoning(completion.content))
                if exchanges is not None:
                    exchanges.record(
                        "compare", qid, judge.role.model, [{"role": "user", "content": prompt}],
                        completion.content, completion.reasoning,
                        None if parsed is not None else UNPARSED,
                    )
                if parsed is not None:
                    break
                logger.debug(f"compare: {qid}: the judge's reply was:\n{completion.content}")
        if parsed is None:
            logger.warning(
                f"compare: {qid}: {UNPARSED} (it began "
                f"{first_line(strip_reasoning(completion.content))!r}): kept as unparsed "
                "(`overbrainer log --failed --stage compare` shows the replies)"
            )
            log.append({"id": qid, "verdict": "unparsed", "reason": "", "child_first": first})
            return
        verdict, reason = parsed
        log.append({
            "id": qid, "verdict": outcome(verdict, first), "reason": reason, "child_first": first,
        })  # fmt: skip

    try:
        pending = [question for question in questions if question["id"] not in done]
        await asyncio.gather(*(one(question) for question in pending))
    except UserError as error:
        raise UserError(
            f"the verdicts so far are kept; resume with `overbrainer compare --rejudge "
            f"{compare_id}`: {error.message}"
        ) from None
    finally:
        await providers.aclose()
