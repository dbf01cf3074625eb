"""Running one stage: its report, progress, history line and outcome.

Used by the stage commands and by ``run``; it prints nothing on stdout itself: the caller
prints ``Outcome.summary`` and turns ``Outcome.error`` into the command's error.
"""

from __future__ import annotations

import asyncio
import importlib
import signal
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from loguru import logger

from overbrainer.collector import release
from overbrainer.config.env import Environment
from overbrainer.config.model import Role, Settings, Topic
from overbrainer.errors import Interrupted, Terminated, UserError, signal_of
from overbrainer.events import ItemExcluded, StageEnd, StageStart, publish
from overbrainer.pipeline.budget import Budget, BudgetExceeded
from overbrainer.pipeline.history import STAGES, append_history, timestamp
from overbrainer.pipeline.progress import StageProgress
from overbrainer.pipeline.records import DataFiles
from overbrainer.pipeline.report import Report
from overbrainer.pipeline.requests import record_requests
from overbrainer.pipeline.served_concurrency import served_concurrency
from overbrainer.pipeline.spend import SpendJournal, spent
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.prices import PriceBook

if TYPE_CHECKING:
    from overbrainer.pipeline import split

__all__ = ["STAGES", "Outcome", "run_stage", "select_topics"]

INTERRUPTED = "interrupted: the stage resumes on its next run"
NO_TOPICS = "no topics: add a [[topics]] table to overbrainer.toml"
NOTHING_TO_SPLIT = (
    "no usable answer to split (run `overbrainer answers` first): "
    "train.jsonl and eval.jsonl are left as they were"
)

Status = Literal["ok", "failed", "interrupted"]

Body = Callable[[StageContext], Awaitable[None]]


@dataclass(frozen=True)
class Outcome:
    """How a stage ended: its summary line, and the error to report when it did not succeed
    (``signum``: the signal that interrupted it)."""

    stage: str
    status: Status
    summary: str
    error: str | None
    signum: int | None = None
    done: int = 0
    cost: float = 0.0
    brief: str = ""
    """A few words for a cycle's summary line: what the stage did, if anything."""

    def check(self) -> None:
        """Raise the error the command ends with, if the stage did not succeed."""
        if self.signum is not None:
            raise Interrupted(self.error or INTERRUPTED, self.signum)
        if self.error is not None:
            raise UserError(self.error)


def select_topics(settings: Settings, topic: str | None) -> list[Topic]:
    """The topics a stage works on: all, or the one ``--topic`` names. A project with no
    topic gives a stage no work: refused, so that nothing (an empty train.jsonl) is made."""
    if not settings.topics:
        raise UserError(NO_TOPICS)
    if topic is None:
        return list(settings.topics)
    chosen = [t for t in settings.topics if t.name == topic]
    if not chosen:
        raise UserError(f"unknown topic `{topic}`")
    return chosen


def stage_role(stage: str, settings: Settings) -> Role | None:
    """The role whose model a stage asks."""
    return {"subtopics": settings.roles.generator, "questions": settings.roles.generator,
            "answers": settings.roles.parent}.get(stage)


def run_stage(
    stage: str,
    project_dir: Path,
    settings: Settings,
    env: Environment,
    prices: PriceBook,
    *,
    topic: str | None = None,
    force: bool = False,
    max_usd: float | None = None,
    batch: bool | None = None,
    wait: bool = True,
    cancel: bool = False,
    limit: int | None = None,
    stale: bool = False,
) -> Outcome:
    """Run ``stage`` to its end (or the first fatal error, the budget, or Ctrl-C) and record
    it in the history. Raises ``UserError`` only for a ``--topic`` that names no topic.

    ``max_usd``: the budget, when not ``[budget] max_usd``; ``batch``: send ``answers``
    through the batch API or not, whatever the parent role says; ``wait``: wait for the
    batches to end (else submit and return); ``cancel``: cancel the live batches instead,
    collecting what they finished; ``limit``: answer that many questions at most (spread
    over those left: a pilot); ``stale``: make the stale records again too."""
    topics = select_topics(settings, topic)
    settings = served_concurrency(settings, stage)
    started = timestamp()
    report = Report(stage, StageProgress(stage))
    budget = budget_of(stage, project_dir, settings, max_usd)
    result: split.SplitResult | None = None
    status: Status = "failed"
    error: str | None = None
    signum: int | None = None
    publish(StageStart(stage))
    try:
        if stage == "split":
            # Not for a stage that asks a provider: it starts faster without split's imports.
            from overbrainer.pipeline import split  # noqa: PLC0415

            result = split.run(DataFiles(project_dir), settings, topics)
        else:
            context = StageContext(
                project_dir, settings, topics, force, report, budget,
                batch=batch, wait=wait, cancel=cancel, limit=limit, stale=stale,
            )
            _ask(context, started, env, prices)
        if report.failed:
            error = f"{report.failed} {stage} item(s) failed; run the command again to retry them"
        elif result is not None and not result.written:
            error = NOTHING_TO_SPLIT
        else:
            status = "ok"
    except KeyboardInterrupt as interrupt:
        status, error, signum = "interrupted", INTERRUPTED, signal_of(interrupt)
    except BudgetExceeded:
        assert budget is not None
        error = budget.stopped(report)  # now: the requests that were in flight are in
    except UserError as failure:
        error = failure.message
    finally:
        release()
        report.progress.close()
        if result is not None:  # counted as its history line counts it: excluded only
            publish(ItemExcluded(stage, result.excluded.total()))
        publish(StageEnd(stage))
        entry = _entry(stage, started, status, settings, report=report, result=result)
        error = _recorded(project_dir, stage, entry, report, error)
    summary = result.summary() if result is not None else report.summary()
    if result is not None:
        brief = f"split {result.train}/{result.eval}" if result.written else ""
        done = result.train + result.eval
    else:
        brief = f"{stage} {report.done} done" if report.done else ""
        done = report.done
    cost = report.cost() or 0.0
    return Outcome(stage, status, summary, error, signum, done=done, cost=cost, brief=brief)


def _ask(context: StageContext, started: str, env: Environment, prices: PriceBook) -> None:
    """Run a stage that asks a provider, each request's cost in the spend journal."""
    stage = context.report.stage
    # Imported here: split, which asks no provider, does not pay for aiohttp.
    body = importlib.import_module(f"overbrainer.pipeline.{stage}").run
    context.journal = SpendJournal(context.project_dir, stage, started)
    try:
        context.journal.begin()
        _run_async(_run(body, context, env, prices), context.drain)
    finally:
        context.journal.finish()


def _recorded(
    project_dir: Path, stage: str, entry: dict[str, object], report: Report, error: str | None
) -> str | None:
    """Write the execution's history and requests lines; the error the stage ends with
    (the stage's own, else why they could not be written: its spend is in the journal)."""
    try:
        append_history(project_dir, entry)
        record_requests(project_dir, stage, report)
    except UserError as failure:
        logger.warning(f"{stage}: {failure.message} (the spend journal keeps its cost)")
        return error or failure.message
    return error


def budget_of(
    stage: str, project_dir: Path, settings: Settings, max_usd: float | None
) -> Budget | None:
    """The budget ``stage`` keeps: ``max_usd``, else ``[budget] max_usd``; None when
    unset or for ``split``, which asks no provider."""
    limit = max_usd if max_usd is not None else settings.budget.max_usd
    if limit is None or stage == "split":
        return None
    return Budget(limit, spent(project_dir), project_dir, stage)


@dataclass
class _Signals:
    """What SIGTERM and Ctrl-C asked of a running stage."""

    drain: Callable[[], bool] | None
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    terminated: bool = False
    interrupts: int = 0

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()

    def terminate(self) -> None:
        self.terminated = True
        self.cancel()

    def interrupt(self) -> None:
        self.interrupts += 1
        if self.interrupts > 1 or self.drain is None or not self.drain():
            self.cancel()

    def raise_any(self) -> None:
        """The stage's end when a signal came: ``Terminated`` or ``KeyboardInterrupt``."""
        if self.terminated:
            raise Terminated
        if self.interrupts:
            raise KeyboardInterrupt


def _run_async(
    main: Coroutine[Any, Any, None], drain: Callable[[], bool] | None = None
) -> None:
    """``asyncio.run(main)``, SIGTERM included: like Ctrl-C, it cancels the stage (its
    files are closed, its requests in flight abandoned), then raises ``Terminated``.

    ``drain``: asked at the first Ctrl-C; when it says the stage now stops sending and lets
    its requests in flight land (they are paid for), a second Ctrl-C is needed to cancel.
    Either way the stage ends in ``KeyboardInterrupt``."""
    signals = _Signals(drain)
    with asyncio.Runner() as runner:
        loop = runner.get_loop()

        async def stage() -> None:
            task = asyncio.current_task()
            assert task is not None
            signals.tasks.append(task)
            await main

        previous = signal.getsignal(signal.SIGTERM)
        watching = threading.current_thread() is threading.main_thread()
        if watching:
            loop.add_signal_handler(signal.SIGTERM, signals.terminate)
            if drain is not None:
                loop.add_signal_handler(signal.SIGINT, signals.interrupt)
        try:
            runner.run(stage())
        except (asyncio.CancelledError, Exception):
            signals.raise_any()  # a stage that stopped sending ends as interrupted
            raise
        else:
            signals.raise_any()  # it came before the stage's task could be cancelled
        finally:
            if watching:
                loop.remove_signal_handler(signal.SIGTERM)
                signal.signal(signal.SIGTERM, previous)
                if drain is not None:
                    loop.remove_signal_handler(signal.SIGINT)


async def _run(body: Body, context: StageContext, env: Environment, prices: PriceBook) -> None:
    # aiohttp comes with the providers: not for the split stage, which asks none.
    from overbrainer.providers.registry import ProviderSet  # noqa: PLC0415

    providers = ProviderSet(context.settings, env.merged, prices)
    context.providers = providers
    context.report.price_of = providers.price
    role = stage_role(context.report.stage, context.settings)
    if role is not None:
        context.report.pace_of = lambda: providers.pace(role.provider, role.model)
    release()  # start-up is over: the stage's own objects come and go (see collector)
    try:
        try:
            await body(context)
        finally:
            task = asyncio.current_task()
            if task is None or not task.cancelling():
                await providers.settle_prices()
    finally:
        await providers.aclose()
        if "exchanges" in vars(context):  # made on the first request
            context.exchanges.close()


def _entry(
    stage: str,
    started: str,
    status: Status,
    settings: Settings,
    *,
    report: Report,
    result: split.SplitResult | None,
) -> dict[str, object]:
    role = stage_role(stage, settings)
    asked = (role.provider, role.model) if role else None
    entry = report.history_entry(stage, started, timestamp(), status, asked)
    if report.rate_limited:
        entry["rate_limited"] = report.rate_limited
    if report.batched:
        entry["batch"] = {"batches": len(report.batched), "waiting": report.waiting}
    if result is not None:
        # As the reference tool writes a split line: nothing "done" (the counts are in
        # `split`) and no cost (it asks no provider).
        entry.update(done=0, excluded=result.excluded.total(), cost=None)
        split: dict[str, Any] = {
            "train": result.train, "eval": result.eval, "orphaned": result.orphaned
        }
        if result.unkept:  # only then: the line stays the reference tool's otherwise
            split["selected"] = {"kept": result.selected - result.unkept, "of": result.selected}
        if result.contaminated:  # likewise: said when decontamination dropped some
            split["contaminated"] = result.contaminated
        entry["split"] = split
    return entry
