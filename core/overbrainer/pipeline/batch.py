"""``answers`` through a provider's batch API, at the batch price.

Each batch is in the ledger before the provider is asked to start it, so nothing stops the
stage in a way that loses one: the next run finds a batch whose id never came back (by the
project's key for it, which the batch carries: only a batch carrying it is taken), polls
the live ones, and never sends again a question a live batch holds. A batch the provider
does not list, or will not give (a 404), is held, not sent again: ``answers
--forget-batch`` gives it up. Results are written as answers as they download; an item
that failed, expired, or came back unreadable goes into a new batch, up to ``max_retries``
times, then fails.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, TypeVar

from loguru import logger

from overbrainer.config.model import Role
from overbrainer.errors import UserError
from overbrainer.pipeline import batch_watch
from overbrainer.pipeline.answering import Answering
from overbrainer.pipeline.batch_ledger import KEY_BYTES, Batch, Ledger, State
from overbrainer.pipeline.budget import BudgetExceeded, cost_of, prompt_bound
from overbrainer.pipeline.records import Answer
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.batch_anthropic import AnthropicBatches
from overbrainer.providers.batch_api import (
    BatchAPI,
    BatchStatus,
    Finding,
    Limits,
    Request,
    Unreachable,
    item_id,
    question_of,
)
from overbrainer.providers.batch_openai import OpenAIBatches, request_line
from overbrainer.providers.client import PROTOCOLS, Client
from overbrainer.providers.errors import (
    FatalProviderError,
    ProviderError,
    RateLimitedError,
    TransientProviderError,
)
from overbrainer.providers.retry import RetryPolicy
from overbrainer.providers.wire import WireFormat

T = TypeVar("T")

NO_PROVIDER = (
    "batch {name} was sent to provider `{provider}`, which overbrainer.toml no longer has: "
    "add it back to collect the batch"
)
GAVE_UP = (
    "batch {name}: {what} failed ({error}); the batch stays recorded: "
    "run `overbrainer answers` again to collect it"
)
NOT_STARTED = "cannot start a batch ({error}): its questions were not sent"
MAYBE_STARTED = (
    "batch {key}: no reply to its making ({error}), and the provider does not list it: it "
    "may have been made; its questions wait, and the next `overbrainer answers` looks again"
)
NOT_LISTED = "the provider does not list it, and its making got no reply"
HELD = (
    "answers: batch {name}: {why}: its {count} question(s) without an answer stay held "
    "(never sent twice) and the stage goes on without them; if you know it will never "
    "answer, `overbrainer answers --forget-batch {name}` gives them up"
)
STILL_HELD = (
    "answers: batch {name} is still held ({why}): `overbrainer answers --forget-batch "
    "{name}` gives up its {count} question(s)"
)
UNDECIDED = (
    "answers: batch {key}: {count} batch(es) of the provider may be it, still running: the "
    "one whose results carry its key is taken when it ends; its questions wait"
)


class Lookup(Enum):
    """What became of a recorded batch when the provider was asked about it."""

    ADOPTED = "adopted"
    """Live, with its id."""
    NEVER_STARTED = "never started"
    """The provider was never asked to make it: its questions are free."""
    UNDECIDED = "undecided"
    """Batches of the provider may be it, still running: looked at again as they run."""
    HELD = "held"
    """The provider does not list it: its questions stay held."""


@dataclass
class Refusals:
    """The 429s one request meets in a row: refusals, not lost replies. Each is waited out
    as the provider asks (else with backoff), none counts as a failure, until
    ``max_wait_s`` of them have passed."""

    policy: RetryPolicy
    max_wait_s: float
    since: float | None = None
    count: int = 0

    def pause(self, error: RateLimitedError) -> float:
        """Seconds to wait before asking again; ``ProviderError`` past ``max_wait_s``."""
        now = time.monotonic()
        self.since = now if self.since is None else self.since
        self.count += 1
        pause = self.policy.delay(self.count, error.retry_after)
        if now + pause - self.since > self.max_wait_s:
            raise ProviderError(
                f"{error.message}: still rate-limited after {now - self.since:.0f} s "
                f"(pipeline.max_wait_s = {self.max_wait_s:g})"
            )
        return pause


def chunks(requests: list[Request], limits: Limits, size: Callable[[Request], int]
           ) -> Iterator[list[Request]]:
    """``requests`` cut into batches of at most ``limits.requests`` requests and
    ``limits.bytes`` bytes (``size``: a request's bytes)."""
    chunk: list[Request] = []
    used = 0
    for request in requests:
        cost = size(request)
        if chunk and (len(chunk) >= limits.requests or used + cost > limits.bytes):
            yield chunk
            chunk, used = [], 0
        chunk.append(request)
        used += cost
    if chunk:
        yield chunk


def request_size(request: Request) -> int:
    """A request's bytes in a batch: its line of the uploaded file, its ``custom_id``
    behind the batch's key (the JSON each protocol sends differs from it by a few bytes)."""
    return len(request_line(request)) + KEY_BYTES + 1


class BatchStage:
    """The batches of one ``answers`` execution: those it finds live and those it sends."""

    def __init__(
        self,
        ctx: StageContext,
        answering: Answering,
        append: Callable[[Answer], None],
        answered: dict[str, str | None],
        questions: dict[str, dict[str, Any]],
    ) -> None:
        """``append``: writes an answer's line; ``answered``: the batch (or None) of each
        question's answer so far, kept up to date as answers are appended."""
        self.ctx = ctx
        self.answering = answering
        self.append = append
        self.answered = answered
        self.questions = questions
        self.ledger = Ledger(ctx.project_dir)
        self._tries: dict[str, int] = {}
        self._reserved: dict[str, float] = {}
        """The budget's reservation of each question in a batch, until its result is in."""
        self.over_budget = False
        """Whether the budget kept questions from being sent: the stage ends with it."""
        self._pending: list[Batch] = []
        self._apis: dict[str, BatchAPI] = {}
        self._pipeline = ctx.settings.pipeline
        self._submit = True
        """Whether this run sends the items a batch left without an answer (else they are
        answered online, or by ``--cancel`` left for a later run)."""
        self._told: set[str] = set()
        """The batches whose undecided search was told of in this run."""
        self._watch = batch_watch.BatchWatch(self._pipeline.batch_poll_s)

    # -- the whole ----------------------------------------------------------------------

    async def run(
        self, todo: list[dict[str, Any]], live: list[Batch], *, submit: bool
    ) -> list[dict[str, Any]]:
        """Collect ``live`` and, when ``submit``, send ``todo``; wait for the end of every
        batch unless the stage was told not to (``--no-wait``). Returns the items that
        failed in a batch, to be answered online (when not ``submit``: the stage runs
        online). Raises ``BudgetExceeded`` at the end when the budget kept questions back."""
        leftover = await self._run(todo, live, submit=submit)
        if self.over_budget:
            raise BudgetExceeded("budget: max_usd reached")
        return leftover

    async def _run(
        self, todo: list[dict[str, Any]], live: list[Batch], *, submit: bool
    ) -> list[dict[str, Any]]:
        self._submit = submit
        leftover: list[dict[str, Any]] = []
        for batch in live:
            for question in batch.questions:
                self._tries[question] = 1
            self.ctx.report.batched.add(batch.name)
        self._pending = []
        try:
            await self._reserve_live(live)
            retry: list[dict[str, Any]] = []
            for batch in live:
                found = await self._found(batch)
                if found in (Lookup.ADOPTED, Lookup.UNDECIDED):
                    self._pending.append(batch)
                elif found is Lookup.NEVER_STARTED:  # its questions are free to send
                    retry += self._unanswered(batch.questions)
            if self._pending:
                self._pending, failed = await self._poll(self._pending)
                retry += failed
            while True:
                if submit:
                    self._pending += await self.submit([*todo, *retry])
                else:
                    leftover += retry
                todo = []
                if not self._pending or not self.ctx.wait:
                    return leftover
                await asyncio.sleep(self._pipeline.batch_poll_s)
                self._pending, retry = await self._poll(self._pending)
        finally:
            self._count_waiting()
            self._release_all()

    async def _reserve_live(self, live: list[Batch]) -> None:
        """What the live batches will cost counts against the budget from the start."""
        budget = self.ctx.budget
        if budget is None:
            return
        # Counted as spent when the stage began: from now on, as reserved per question.
        budget.before -= sum(batch.projected_usd for batch in live)
        waiting = [q for batch in live for q in self._unanswered(batch.questions)]
        if not waiting:
            return
        role = self.answering.role
        _, costs = await budget.admit_batch(
            self.ctx.providers, self.ctx.report, role,
            [self.answering.messages(q) for q in waiting],
            self._discount(role.provider), refuse=False,
        )
        self._reserved.update(zip((q["id"] for q in waiting), costs, strict=True))

    def _release(self, question_id: str) -> None:
        cost = self._reserved.pop(question_id, None)
        if cost is not None and self.ctx.budget is not None:
            self.ctx.budget.release_batch(cost)

    def _release_all(self) -> None:
        for question in list(self._reserved):
            self._release(question)

    def _discount(self, provider: str) -> float:
        found = self.ctx.settings.providers.get(provider)
        return found.batch_discount if found is not None else 0.0

    async def cancel(self, live: list[Batch]) -> None:
        """Cancel ``live``: what they finished is collected (it is paid for), the rest is
        neither paid nor tried again, until a later ``answers`` asks it anew."""
        for batch in live:
            self.ctx.report.batched.add(batch.name)
        self._pending = []
        try:
            for batch in live:
                found = await self._found(batch)
                if found is Lookup.UNDECIDED:
                    logger.warning(
                        f"answers: batch {batch.key}: not cancelled: no batch of the provider "
                        "is known yet to be it"
                    )
                if found is not Lookup.ADOPTED:
                    continue
                self.ledger.update(batch, cancelled=True)
                try:
                    status = await self._kept(batch, "a poll", self._status(batch))
                    if not status.ended:  # one that ended is only collected
                        api = self._api(batch)
                        await self._kept(batch, "cancelling it", self._cancel(api, batch.name))
                        logger.info(f"answers: batch {batch.name}: cancelled")
                except Unreachable as error:
                    self._hold(batch, error.message)
                    continue
                self._pending.append(batch)
            while self._pending:
                self._pending, _ = await self._poll(self._pending)
                if not self._pending or not self.ctx.wait:
                    return
                await asyncio.sleep(self._pipeline.batch_poll_s)
        finally:
            self._count_waiting()

    def _count_waiting(self) -> None:
        self.ctx.report.waiting = len(
            {q for b in self._pending for q in b.questions} - set(self.answered)
        )

    def _cancel(self, api: BatchAPI, batch_id: str) -> Callable[[], Awaitable[None]]:
        return lambda: api.cancel(batch_id)

    def _unanswered(self, ids: list[str]) -> list[dict[str, Any]]:
        return [self.questions[q] for q in ids if q in self.questions and q not in self.answered]

    # -- sending ------------------------------------------------------------------------

    async def submit(self, questions: list[dict[str, Any]]) -> list[Batch]:
        """Send ``questions`` in as many batches as the provider's limits take."""
        if not questions:
            return []
        questions, role = await self._within_budget(questions)
        if not questions:
            return []
        wire = self._wire(role.provider)
        limits = (OpenAIBatches if wire is PROTOCOLS["openai"] else AnthropicBatches).limits
        requests = [
            Request(q["id"], wire.chat_body(role, self.answering.messages(q))) for q in questions
        ]
        return [await self._submit_one(chunk) for chunk in chunks(requests, limits, request_size)]

    def _fate(self) -> str:
        """What becomes, in this run, of the items a batch left without an answer."""
        if self.ctx.cancel:
            return "are left for a later `overbrainer answers` (`--cancel` sends nothing)"
        return "go into a new batch" if self._submit else "are answered online"

    async def _within_budget(
        self, questions: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], Role]:
        """The first of ``questions`` whose cost at most, at the batch price, fits in the
        budget, reserved, and the role to send them as (its ``max_tokens`` lowered where
        the budget says so); the others are not sent, and the stage will say why."""
        role = self.answering.role
        budget = self.ctx.budget
        if budget is None:  # no budget to keep: the bound recorded all the same (spent())
            price = await self.ctx.providers.ask_price(role.provider, role.model)
            if price is not None:
                scale = 1 - self._discount(role.provider)
                for question in questions:
                    most = prompt_bound(self.answering.messages(question))
                    self._reserved[question["id"]] = cost_of(price, most, role.max_tokens) * scale
            return questions, role
        for question in questions:
            self._release(question["id"])  # a retried item's first reservation
        cap, costs = await budget.admit_batch(
            self.ctx.providers, self.ctx.report, role,
            [self.answering.messages(q) for q in questions], self._discount(role.provider),
        )
        if len(costs) < len(questions):
            self.over_budget = True
        admitted = questions[: len(costs)]
        self._reserved.update(zip((q["id"] for q in admitted), costs, strict=True))
        if cap != role.max_tokens:
            role = role.model_copy(update={"max_tokens": cap})
        return admitted, role

    async def _submit_one(self, requests: list[Request]) -> Batch:
        role = self.answering.role
        ids = [request.custom_id for request in requests]
        projected = sum(self._reserved.get(question, 0.0) for question in ids)
        batch = self.ledger.open(role.provider, role.model, ids, projected)
        for question in ids:
            self._tries[question] = self._tries.get(question, 0) + 1
        # Each item carries the batch's key: where the provider keeps nothing else of a
        # batch, it is how one found again is told to be this project's.
        requests = [Request(item_id(batch.key, r.custom_id), r.body) for r in requests]
        api = self._api(batch)
        try:
            prepared = await self._retried(
                batch, "the upload", lambda: api.prepare(batch.key, requests)
            )
        except (ProviderError, FatalProviderError) as error:
            self.ledger.update(batch, State.ABANDONED)
            raise UserError(NOT_STARTED.format(error=error.message)) from None
        self.ledger.update(batch, prepared=prepared, asked=True)
        batch_id = await self._create(api, batch, requests)
        if batch_id is None:  # a batch of the provider may be it: looked at as it runs
            return batch
        self.ledger.update(batch, State.SUBMITTED, batch_id=batch_id)
        self.ctx.report.batched.add(batch_id)
        logger.info(f"answers: batch {batch_id}: {len(ids)} question(s) sent")
        return batch

    async def _create(
        self, api: BatchAPI, batch: Batch, requests: list[Request]
    ) -> str | None:
        """The id of the batch made of ``requests``, or None when batches of the provider
        may be it but cannot be told yet (``batch`` is looked for again as they run)."""
        # Never simply tried again: a reply lost on the way may hide a batch that was made
        # (and is paid for). The provider is asked first whether it has it. A 429 is no
        # lost reply but a refusal: nothing was made, it is waited out and asked again.
        policy = self._client(batch).retry
        refusals = self._refusals(batch)
        attempt = 0
        while True:
            try:
                return await api.create(batch.key, requests, batch.prepared)
            except RateLimitedError as error:
                try:
                    await self._wait_refused(batch, "its making", refusals, error)
                except ProviderError as stop:
                    self.ledger.update(batch, State.ABANDONED)
                    raise UserError(NOT_STARTED.format(error=stop.message)) from None
                continue
            except FatalProviderError as error:
                self.ledger.update(batch, State.ABANDONED)
                raise UserError(NOT_STARTED.format(error=error.message)) from None
            except ProviderError as error:
                attempt += 1
                transient = isinstance(error, TransientProviderError)
                if isinstance(error, TransientProviderError):
                    # A batch made as the reply was lost takes a moment to be listed: it is
                    # looked for after the wait, not before, and only then made again.
                    await asyncio.sleep(policy.delay(attempt, error.retry_after))
                found = await self._kept(batch, "looking for it", lambda: self._find(batch))
                if found.batch_id is not None:
                    return found.batch_id
                if found.undecided:
                    self._tell_undecided(batch, found.undecided)
                    return None
                if not transient:
                    self.ledger.update(batch, State.ABANDONED)
                    raise UserError(NOT_STARTED.format(error=error.message)) from None
                if attempt == policy.attempts:
                    # It may yet show: kept as being made, looked for again by the next run.
                    raise UserError(
                        MAYBE_STARTED.format(key=batch.key, error=error.message)
                    ) from None
                logger.warning(
                    f"answers: batch {batch.key}: not started ({error.message}); trying again"
                )

    async def _find(self, batch: Batch) -> Finding:
        known = {b.batch_id for b in self.ledger.batches() if b.batch_id}
        api = self._api(batch)
        return await api.find(batch.key, batch.prepared, len(batch.questions), batch.at, known)

    def _asked(self, batch: Batch) -> bool:
        """Whether the provider may have been asked to make ``batch``."""
        if batch.asked is not None:
            return batch.asked
        # A line from before ``asked`` was kept: on openai a batch needs its uploaded file.
        return bool(batch.prepared) or self._wire(batch.provider) is not PROTOCOLS["openai"]

    async def _found(self, batch: Batch) -> Lookup:
        """Where ``batch`` stands, looked for when a crash or a lost reply came before its
        id was recorded: only a batch of the provider that carries its key is taken."""
        if batch.state is State.SUBMITTED:
            return Lookup.ADOPTED
        if not self._asked(batch):
            self.ledger.update(batch, State.ABANDONED)
            self.ctx.report.batched.discard(batch.name)
            for question in batch.questions:
                self._tries.pop(question, None)
            logger.info(
                f"answers: batch {batch.key} was never started by the provider: "
                "its questions are sent again"
            )
            return Lookup.NEVER_STARTED
        found = await self._kept(batch, "looking for it", lambda: self._find(batch))
        if found.batch_id is None and found.undecided:
            self._tell_undecided(batch, found.undecided)
            return Lookup.UNDECIDED
        if found.batch_id is None:
            self._hold(batch, NOT_LISTED)
            return Lookup.HELD
        self.ctx.report.batched.discard(batch.name)
        self.ledger.update(batch, State.SUBMITTED, batch_id=found.batch_id)
        self.ctx.report.batched.add(found.batch_id)
        logger.info(f"answers: batch {found.batch_id}: found again, recorded")
        return Lookup.ADOPTED

    def _tell_undecided(self, batch: Batch, count: int) -> None:
        if batch.key not in self._told:
            self._told.add(batch.key)
            logger.info(UNDECIDED.format(key=batch.key, count=count))

    def _hold(self, batch: Batch, why: str) -> None:
        """Keep ``batch``'s questions from being sent while the provider will not give it;
        said in full the first time, in a line on each later run."""
        count = len([q for q in batch.questions if q not in self.answered])
        message = HELD if batch.held != why else STILL_HELD
        if batch.held != why:
            self.ledger.update(batch, held=why)
        logger.warning(message.format(name=batch.name, why=why, count=count))

    # -- collecting ---------------------------------------------------------------------

    async def _poll(self, pending: list[Batch]) -> tuple[list[Batch], list[dict[str, Any]]]:
        """Look at each batch once; collect those that ended. Returns the batches still
        running and the questions to try again."""
        running, retry = [], []
        for batch in pending:
            if batch.state is State.SUBMITTING:  # made, its id unknown: looked for again
                found = await self._found(batch)
                if found is Lookup.UNDECIDED:
                    running.append(batch)
                if found is not Lookup.ADOPTED:
                    continue
            try:
                status = await self._kept(batch, "a poll", self._status(batch))
                said = self._watch.line(batch, status)
                if said is not None:
                    logger.info(said)
                if not status.ended:
                    running.append(batch)
                    continue
                failed = await self._kept(batch, "its results", self._results(batch, status))
            except Unreachable as error:
                self._hold(batch, error.message)
                continue
            retry += self._again(batch, failed)
        return running, retry

    def _status(self, batch: Batch) -> Callable[[], Awaitable[BatchStatus]]:
        return lambda: self._api(batch).status(batch.batch_id or "")

    def _results(
        self, batch: Batch, status: BatchStatus
    ) -> Callable[[], Awaitable[dict[str, str]]]:
        return lambda: self._collect(batch, status)

    async def _collect(self, batch: Batch, status: BatchStatus) -> dict[str, str]:
        """Write the answers of an ended batch; the items with none, and why."""
        if status.status not in ("completed", "ended") or status.reason:
            why = status.reason or "no reason given"
            logger.warning(
                f"answers: batch {batch.name} {status.status} ({why}): "
                f"its items without an answer {self._fate()}"
            )
        mine = set(batch.questions)
        got: set[str] = set()
        failed: dict[str, str] = {}
        malformed = 0
        async for result in self._api(batch).results(status):
            question = result.custom_id
            if question is not None and question not in mine:  # items carry the batch's key
                question = question_of(batch.key, question) or ""  # (but those sent before)
            if question is None:
                malformed += 1
                logger.warning(
                    f"answers: batch {batch.name}: a line of its results is malformed "
                    f"({result.error or 'no item named'}): the other lines are kept, and "
                    "an item left without a result is tried again"
                )
                continue
            if question not in mine:
                malformed += 1
                logger.warning(
                    f"answers: batch {batch.name}: a line of its results names no item of "
                    "the batch: it is ignored, the other lines are kept"
                )
                continue
            if question in got:
                continue
            if result.completion is None:
                failed.setdefault(question, result.error or "no result")
                continue
            got.add(question)
            failed.pop(question, None)
            self._write(batch, question, result.completion)
        for question in mine - got - set(failed):
            failed[question] = "no result"
        self.ledger.update(batch, State.ENDED, failed=failed)
        return failed

    def _write(self, batch: Batch, question_id: str, completion: Any) -> None:
        if question_id in self.answered and self.answered[question_id] == batch.batch_id:
            return  # collected before this run was stopped, its tokens counted then
        report = self.ctx.report
        discount = self._discount(batch.provider)
        self._release(question_id)
        question = self.questions.get(question_id)
        if not completion.metered and question is not None:  # priced at its bound
            completion = replace(
                completion,
                input_tokens=prompt_bound(self.answering.messages(question)),
                output_tokens=self.answering.role.max_tokens,
            )
        price = self.ctx.providers.price(batch.provider, batch.model)
        cost = None if price is None else cost_of(
            price, completion.input_tokens, completion.output_tokens
        ) * (1 - discount)
        self.ctx.journal.paid(
            None, completion.input_tokens, completion.output_tokens, cost, batch=batch.key
        )
        report.used(
            batch.provider, batch.model, completion.input_tokens, completion.output_tokens,
            discount=discount,
        )
        if question is None:
            return  # paid, but no longer asked for
        record = self.answering.record(question, completion)
        record["meta"]["model"] = batch.model
        record["meta"]["batch"] = batch.batch_id
        self.append(record)
        self.answered[question_id] = batch.batch_id
        report.finish(excluded=record["meta"]["excluded"] is not None)

    def _again(self, batch: Batch, failed: dict[str, str]) -> list[dict[str, Any]]:
        """The failed items to try again; those out of tries fail. A ``--cancel`` run
        sends nothing: it leaves them for a later one."""
        if self.ctx.cancel:
            left = [q for q in failed if q not in self.answered]
            if left:
                logger.info(
                    f"answers: batch {batch.name}: {len(left)} item(s) without an answer, "
                    "left for a later `overbrainer answers`"
                )
            return []
        retry = []
        attempts = self._pipeline.max_retries + 1
        for question_id, why in failed.items():
            question = self.questions.get(question_id)
            if question is None or question_id in self.answered:
                continue
            if self._tries.get(question_id, 1) >= attempts:
                self.ctx.report.fail(question_id, f"{why} (batch {batch.name})")
            else:
                retry.append(question)
        if retry:
            reasons = list(dict.fromkeys(failed[q["id"]] for q in retry))
            shown = "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "")
            logger.warning(
                f"answers: batch {batch.name}: {len(retry)} item(s) without an answer "
                f"({shown}): tried again"
            )
        return retry

    # -- plumbing -----------------------------------------------------------------------

    async def _retried(self, batch: Batch, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """``attempt()``, tried again with backoff on a failure worth trying again (a
        transport error, 408, 429, >= 500, a reply that is not JSON or not a batch);
        any other failure, and the last, is raised."""
        policy = self._client(batch).retry
        refusals = self._refusals(batch)
        number = 0
        while True:
            try:
                return await attempt()
            except RateLimitedError as error:
                await self._wait_refused(batch, what, refusals, error)
            except TransientProviderError as error:
                number += 1
                if number == policy.attempts:
                    raise
                delay = policy.delay(number, error.retry_after)
                logger.warning(
                    f"answers: batch {batch.name}: {what} failed ({error.message}); "
                    f"trying again in {delay:.1f}s"
                )
                await asyncio.sleep(delay)

    def _refusals(self, batch: Batch) -> Refusals:
        client = self._client(batch)
        return Refusals(client.retry, client.max_wait_s)

    async def _wait_refused(
        self, batch: Batch, what: str, refusals: Refusals, error: RateLimitedError
    ) -> None:
        pause = refusals.pause(error)
        logger.info(
            f"answers: batch {batch.name}: {what} refused ({error.message}); "
            f"waiting {pause:.1f}s"
        )
        await asyncio.sleep(pause)

    async def _kept(self, batch: Batch, what: str, attempt: Callable[[], Awaitable[T]]) -> T:
        """``_retried``, for a batch that may be live: when it gives up, the stage stops
        and says the batch stays recorded (``Unreachable`` is the caller's: the batch is
        held, and the stage goes on)."""
        try:
            return await self._retried(batch, what, attempt)
        except Unreachable:
            raise
        except (ProviderError, FatalProviderError) as error:
            message = GAVE_UP.format(name=batch.name, what=what, error=error.message)
            raise UserError(message) from None

    def _client(self, batch: Batch) -> Client:
        if batch.provider not in self.ctx.settings.providers:
            raise UserError(NO_PROVIDER.format(name=batch.name, provider=batch.provider))
        return self.ctx.providers.client(batch.provider)

    def _wire(self, provider: str) -> WireFormat:
        return PROTOCOLS[self.ctx.settings.providers[provider].protocol]

    def _api(self, batch: Batch) -> BatchAPI:
        api = self._apis.get(batch.provider)
        if api is None:
            client = self._client(batch)
            kind = OpenAIBatches if client.protocol == "openai" else AnthropicBatches
            api = kind(
                client, self._pipeline.request_timeout_secs, batch_watch.POLL_TIMEOUT_S
            )
            self._apis[batch.provider] = api
        return api

