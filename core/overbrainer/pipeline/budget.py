"""``[budget] max_usd`` kept by a stage: the project's spend never passes it.

The spend is the project's before the stage (rebuilt from the spend journal, see
``pipeline/spend.py``) plus this stage's so far, plus what the requests in flight can cost
*at most*: a request is reserved at its bound (every byte of its prompt a token, and its
``max_tokens`` out) and released to what its reply cost once it is in. A reply whose cost
is unknown (no usage given) or that never came (a timeout) counts at its bound.

Reserving the bound keeps few requests in flight when ``max_tokens`` is far above what
answers take. So, once the budget cannot hold another request at ``max_tokens``, requests
go with ``max_tokens`` lowered: to four times the longest reply of the stage (or twice the
project's measured average, before one), and at the very end to what the budget can still
pay (never below the measured average reply, or 256 tokens before one: a reply sure to be
cut is not worth paying for). An answer cut by it is a truncation like any other. A
request that does not fit waits for those in flight; with none in flight it is refused,
and the stage stops as a fatal error does (:meth:`Budget.stopped`).

A batch is sent whole and cannot learn from its first replies: its questions go with
``max_tokens`` as they are, as many as the budget holds (see :meth:`Budget.admit_batch`).
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import replace
from typing import TYPE_CHECKING

from loguru import logger

from overbrainer.config.model import Role
from overbrainer.pipeline.projection import MESSAGE_FRAMING, REQUEST_FRAMING, tally
from overbrainer.pipeline.report import Report
from overbrainer.providers.errors import FatalProviderError

if TYPE_CHECKING:
    from pathlib import Path

    from overbrainer.providers.prices import Price
    from overbrainer.providers.registry import ProviderSet

RAISE = (
    "raise the budget ([budget] max_usd in overbrainer.toml, or `overbrainer run --max-usd`)"
)
GO_ON = f"{RAISE}, then run again: it resumes where it stopped"

LOWERED_FLOOR = 256
"""The least ``max_tokens`` is lowered to while the budget is not nearly spent."""
HEADROOM = 4
"""Times the longest reply so far that a lowered ``max_tokens`` leaves room for."""


class BudgetExceeded(FatalProviderError):
    """A request refused by the budget; the stage's message is :meth:`Budget.stopped`."""


def usd(amount: float) -> str:
    return f"${amount:.4f}"


def prompt_bound(messages: list[dict[str, str]]) -> int:
    """The most tokens ``messages`` can count: a token holds at least one byte of text."""
    return sum(len(m["content"].encode()) + MESSAGE_FRAMING for m in messages) + REQUEST_FRAMING


def cost_of(price: Price, tokens_in: int, tokens_out: int) -> float:
    """USD of ``tokens_in`` and ``tokens_out``: a request's bound, given its most."""
    return tokens_in * price.prompt + tokens_out * price.completion


class Budget:
    """The budget of one stage execution: ``max_usd``, and ``before``, spent by the
    project before the stage started."""

    def __init__(self, max_usd: float, before: float, project_dir: Path, stage: str) -> None:
        self.max_usd = max_usd
        self.before = before
        self._project_dir = project_dir
        self._stage = stage
        self._reserved = 0.0
        self._in_flight = 0
        self._waiters: list[asyncio.Future[None]] = []
        self._longest: dict[str, int] = {}
        self._averages: dict[str, float | None] = {}
        self._lowered_said = False
        self.next_cost: float | None = None
        """The bound of the first request refused."""
        self.batch_cap: int | None = None
        """The max_tokens a batch cut by the budget held its questions at."""

    # -- online requests -----------------------------------------------------------------

    async def admit(
        self,
        providers: ProviderSet,
        report: Report,
        role: Role,
        messages: list[dict[str, str]],
        n: int = 1,
    ) -> tuple[int, float]:
        """Reserve what ``role``'s request of ``messages`` can cost at most: the
        ``max_tokens`` to send it with (``role``'s, or lower) and the amount reserved
        (:meth:`release` it once answered). Waits while requests in flight hold the
        budget; refuses (``BudgetExceeded``) when none does and it cannot be paid.
        ``n``: the replies it asks for, each up to ``max_tokens`` (its output's price
        is ``n`` times one reply's)."""
        price = await _price(providers, role)
        price = replace(price, completion=price.completion * n)
        tokens_in = prompt_bound(messages)
        while True:
            left = self.max_usd - self.spent(report) - self._reserved
            cap = self._cap(role, price, tokens_in, left, waiting=self._in_flight > 0)
            if cap is not None:
                cost = cost_of(price, tokens_in, cap)
                self._reserved += cost
                self._in_flight += 1
                return cap, cost
            if self._in_flight == 0:
                self._refuse(cost_of(price, tokens_in, role.max_tokens))
            await self._freed()

    def again(self, report: Report) -> None:
        """Let a request whose try may have been billed (now counted spent, see
        :meth:`Report.possibly_billed`) try again on the reservation it holds: refused when
        the budget no longer holds both."""
        if self.spent(report) + self._reserved > self.max_usd:
            self._refuse(0.0)

    def release(self, reserved: float, model: str | None = None, output_tokens: int = 0) -> None:
        """Give back a reservation of :meth:`admit` (``model``'s reply took
        ``output_tokens``: the lowered ``max_tokens`` makes room for it)."""
        self._reserved -= reserved
        self._in_flight -= 1
        if model is not None:
            self._longest[model] = max(self._longest.get(model, 0), output_tokens)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    # -- batches -------------------------------------------------------------------------

    async def admit_batch(
        self,
        providers: ProviderSet,
        report: Report,
        role: Role,
        requests: list[list[dict[str, str]]],
        discount: float,
        *,
        refuse: bool = True,
    ) -> tuple[int, list[float]]:
        """Reserve, at the batch price, what each of ``requests`` (the messages of each)
        can cost at most, in order, as many as fit: the ``max_tokens`` to send them with
        and one reservation a request admitted (release each as its result is paid for).
        With ``refuse`` false every one is reserved at ``role``'s ``max_tokens`` (a batch
        already live: it is paid for whatever the budget says)."""
        price = await _price(providers, role)
        bounds = [prompt_bound(messages) for messages in requests]
        scale = 1 - discount
        cap = role.max_tokens
        if refuse and bounds:
            # A batch is sent whole: it cannot learn from its first replies as online
            # requests do, and a lowered max_tokens measured on earlier answers would cut
            # every answer of a parent that now writes more. So its questions go with
            # max_tokens, as many as the budget holds; only when not even one fits does
            # that one go with what the budget can pay (256 tokens at least).
            left = self.max_usd - self.spent(report) - self._reserved
            if cost_of(price, bounds[0], cap) * scale > left:
                last = self._affordable(role, price, bounds[0], left / scale)
                if last is None or last < min(LOWERED_FLOOR, role.max_tokens):
                    self._refuse(cost_of(price, bounds[0], cap) * scale)
                assert last is not None
                cap = last
                self._say_lowered(cap, role.max_tokens)
        admitted: list[float] = []
        for tokens_in in bounds:
            cost = cost_of(price, tokens_in, cap) * scale
            if refuse and self.spent(report) + self._reserved + cost > self.max_usd:
                if self.next_cost is None:
                    self.next_cost = cost
                self.batch_cap = cap
                break
            self._reserved += cost
            admitted.append(cost)
        return cap, admitted

    def release_batch(self, reserved: float) -> None:
        """Give back the reservation of one request of a batch."""
        self._reserved -= reserved

    # -- what the stage says -------------------------------------------------------------

    def spent(self, report: Report) -> float:
        """The project's spend now: before the stage, and this stage's paid requests."""
        return self.before + self.stage_spent(report)

    @staticmethod
    def stage_spent(report: Report) -> float:
        """This stage's spend at the prices known (an embedder without one counts 0, where
        ``Report.cost`` would make the whole unknown), tries possibly billed included."""
        return report.spent_at_known_prices()

    def stopped(self, report: Report, go_on: str = GO_ON) -> str:
        """What the stage ends with once the budget refused a request and the requests in
        flight are in: what was spent, what is left, how to go on (``go_on``: a command
        that resumes otherwise, as ``compare --rejudge``)."""
        spent = self.spent(report)
        left = max(self.max_usd - spent, 0.0)
        upcoming = f" (up to {usd(self.next_cost)})" if self.next_cost is not None else ""
        held = (
            f" (a batch holds each question at what it can cost at most, max_tokens "
            f"{self.batch_cap}: a lower roles.parent.max_tokens sends more at once)"
            if self.batch_cap is not None
            else ""
        )
        return (
            f"budget: {self._stage} stopped before a request{upcoming} that could take the "
            f"project past max_usd {usd(self.max_usd)}: spent {usd(spent)} (this stage "
            f"{usd(self.stage_spent(report))}), {usd(left)} left{held}; {go_on}"
        )

    # -- the caps ------------------------------------------------------------------------

    def _cap(
        self, role: Role, price: Price, tokens_in: int, left: float, *, waiting: bool
    ) -> int | None:
        """The ``max_tokens`` a request goes with now, or None to wait (``waiting``: some
        are in flight) or to refuse it."""
        if cost_of(price, tokens_in, role.max_tokens) <= left:
            return role.max_tokens
        lowered = self._lowered(role)
        if lowered is not None and cost_of(price, tokens_in, lowered) <= left:
            self._say_lowered(lowered, role.max_tokens)
            return lowered
        if waiting:
            return None
        last = self._affordable(role, price, tokens_in, left)
        if last is not None:
            self._say_lowered(last, role.max_tokens)
        return last

    def _lowered(self, role: Role) -> int | None:
        """``max_tokens`` as lowered while the budget is not nearly spent: room for four
        times the longest reply so far; None before any reply is known."""
        longest = self._longest.get(role.model)
        if longest is None:
            average = self._average(role.model)
            if average is None:
                return None
            longest = math.ceil(2 * average)
        return min(role.max_tokens, max(LOWERED_FLOOR, HEADROOM * longest, _least(role)))

    def _affordable(self, role: Role, price: Price, tokens_in: int, left: float) -> int | None:
        """The ``max_tokens`` of the last request the budget pays, or None when it could
        not hold a reply of the measured average length, or 256 tokens before one is
        measured (it would only be cut)."""
        rest = left - tokens_in * price.prompt
        if rest <= 0:
            return None
        cap = role.max_tokens if price.completion <= 0 else int(rest / price.completion)
        cap = min(cap, role.max_tokens)
        average = self._average(role.model)
        least = max(1, math.ceil(average)) if average is not None else LOWERED_FLOOR
        least = max(min(least, role.max_tokens), _least(role))
        return cap if cap >= least else None

    def _average(self, model: str) -> float | None:
        if model not in self._averages:
            requests, _, tokens_out = tally(self._project_dir, self._stage, model)
            self._averages[model] = tokens_out / requests if requests else None
        return self._averages[model]

    def _say_lowered(self, cap: int, max_tokens: int) -> None:
        if cap >= max_tokens or self._lowered_said:
            return
        self._lowered_said = True
        logger.warning(
            f"budget: {self._stage}: requests now go with max_tokens lowered to {cap} (of "
            f"{max_tokens}) so that max_usd {usd(self.max_usd)} holds; a longer reply is "
            "cut, and set aside as truncated"
        )

    def _refuse(self, cost: float) -> None:
        if self.next_cost is None and cost:
            self.next_cost = cost
        raise BudgetExceeded("budget: max_usd reached")

    async def _freed(self) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        await waiter


def _least(role: Role) -> int:
    """The lowest ``max_tokens`` a request of ``role`` is valid with (above its thinking
    budget, when it sets one)."""
    return role.thinking_budget + 1 if role.thinking_budget is not None else 1


async def _price(providers: ProviderSet, role: Role) -> Price:
    """The price of ``role``'s model: a budget cannot be kept without one."""
    price = await providers.ask_price(role.provider, role.model)
    if price is None:
        raise FatalProviderError(
            f"budget: the price of {role.provider}/{role.model} is unknown, so max_usd "
            f"cannot be kept: set [providers.{role.provider}.prices]"
        )
    return price
