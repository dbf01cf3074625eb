"""``[budget] max_usd`` kept by a stage: no request starts whose projected cost would take
the project's spend past it.

The spend is the history's (the stages before) plus this stage's so far, plus what the
requests in flight are projected to cost. A request's projection is the stage's measured
average (the history's and this execution's, for its model), else assumed from its messages
and the role's ``max_tokens``. A refused request stops the stage as a fatal error does: the
requests in flight finish and are saved, then the stage ends with :meth:`Budget.stopped`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from overbrainer.config.model import Role
from overbrainer.pipeline.projection import PerRequest, Tally, assumed, average, tally
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


class BudgetExceeded(FatalProviderError):
    """A request refused by the budget; the stage's message is :meth:`Budget.stopped`."""


def usd(amount: float) -> str:
    return f"${amount:.4f}"


class Budget:
    """The budget of one stage execution: ``max_usd``, and ``before``, spent by the
    project before the stage started."""

    def __init__(self, max_usd: float, before: float, project_dir: Path, stage: str) -> None:
        self.max_usd = max_usd
        self.before = before
        self._project_dir = project_dir
        self._stage = stage
        self._reserved = 0.0
        self._history: dict[str, Tally] = {}
        self.next_cost: float | None = None
        """The projected cost of the first request refused."""

    async def admit(
        self, providers: ProviderSet, report: Report, role: Role, messages: list[dict[str, str]]
    ) -> float:
        """Reserve the projected cost of ``role``'s request of ``messages``, or refuse it
        (``BudgetExceeded``); :meth:`release` the amount returned once it is answered."""
        price = await _price(providers, role)
        cost = self._per_request(report, role, messages).cost(price)
        if self.spent(report) + self._reserved + cost > self.max_usd:
            if self.next_cost is None:
                self.next_cost = cost
            raise BudgetExceeded("budget: max_usd reached")
        self._reserved += cost
        return cost

    def release(self, reserved: float) -> None:
        self._reserved -= reserved

    async def admit_batch(
        self,
        providers: ProviderSet,
        report: Report,
        role: Role,
        requests: list[list[dict[str, str]]],
        discount: float,
        *,
        refuse: bool = True,
    ) -> list[float]:
        """Reserve the projected cost, at the batch price, of as many of ``requests`` (the
        messages of each) as fit, in order: the reservations, one a request admitted
        (release each as its result is paid for). With ``refuse`` false every one is
        reserved (a batch already live: it is paid for whatever the budget says)."""
        price = await _price(providers, role)
        admitted: list[float] = []
        for messages in requests:
            cost = self._per_request(report, role, messages).cost(price) * (1 - discount)
            if refuse and self.spent(report) + self._reserved + cost > self.max_usd:
                if self.next_cost is None:
                    self.next_cost = cost
                break
            self._reserved += cost
            admitted.append(cost)
        return admitted

    def spent(self, report: Report) -> float:
        """The project's spend now: the history's and this stage's answered requests."""
        return self.before + self.stage_spent(report)

    @staticmethod
    def stage_spent(report: Report) -> float:
        """This stage's spend at the prices known (an embedder without one counts 0, where
        ``Report.cost`` would make the whole unknown)."""
        return report.spent_at_known_prices()

    def stopped(self, report: Report) -> str:
        """What the stage ends with once the budget refused a request and the requests in
        flight are in: what was spent, what is left, how to go on."""
        spent = self.spent(report)
        left = max(self.max_usd - spent, 0.0)
        upcoming = f" (about {usd(self.next_cost)})" if self.next_cost is not None else ""
        return (
            f"budget: {self._stage} stopped before a request{upcoming} that would take the "
            f"project past max_usd {usd(self.max_usd)}: spent {usd(spent)} (this stage "
            f"{usd(self.stage_spent(report))}), {usd(left)} left; {GO_ON}"
        )

    def _per_request(
        self, report: Report, role: Role, messages: list[dict[str, str]]
    ) -> PerRequest:
        if role.model not in self._history:
            self._history[role.model] = tally(self._project_dir, self._stage, role.model)
        requests, tokens_in, tokens_out = self._history[role.model]
        now_in, now_out = report.tokens_of(role.provider, role.model)
        found = average((requests + report.requests, tokens_in + now_in, tokens_out + now_out))
        if found is not None:
            return found
        chars = sum(len(message["content"]) for message in messages)
        return assumed(chars, len(messages), role)


async def _price(providers: ProviderSet, role: Role) -> Price:
    """The price of ``role``'s model: a budget cannot be kept without one."""
    price = await providers.ask_price(role.provider, role.model)
    if price is None:
        raise FatalProviderError(
            f"budget: the price of {role.provider}/{role.model} is unknown, so max_usd "
            f"cannot be kept: set [providers.{role.provider}.prices]"
        )
    return price
