"""What a stage did: counts, tokens and cost; its summary line and its history entry."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from loguru import logger

from overbrainer.events import (
    TOPIC,
    ItemDone,
    ItemExcluded,
    ItemFailed,
    ItemRateLimited,
    ItemRetry,
    ItemSkipped,
    Tokens,
    listening,
    publish,
)
from overbrainer.pipeline.progress import StageProgress
from overbrainer.providers.limiter import Refusal
from overbrainer.providers.prices import Price
from overbrainer.providers.ratelimit import Pace

PriceOf = Callable[[str, str], Price | None]
"""The price of a (provider, model), when known."""
PaceOf = Callable[[], Pace | None]
"""The provider's rate limit, as it set it, while it holds the stage back."""


class Report:
    """The tallies of one stage execution, shown as progress while it runs."""

    def __init__(self, stage: str, progress: StageProgress | None = None) -> None:
        self.stage = stage
        self.progress = progress or StageProgress(stage, live=False)
        self.price_of: PriceOf = lambda provider, model: None
        self.done = 0
        self.skipped = 0
        self.failed = 0
        self.excluded = 0
        self.pace_of: PaceOf = lambda: None
        self.rate_limited = 0
        self.limit_stopped = False
        """The stage gave up waiting for the rate limit (``pipeline.max_wait_s``)."""
        self.requests = 0
        """Chat requests answered (embeddings not counted): the measured averages' divisor."""
        self.counted_as = stage
        """The stage the chat requests count for in the measured averages (``answers``
        asks its judge for ``select``)."""
        self.measured: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
        """Chat requests, tokens in and out, by (``counted_as``, model)."""
        self.usage: dict[tuple[str, str, float], list[int]] = defaultdict(lambda: [0, 0])
        """Tokens by (provider, model, discount): a batch's are priced less."""
        self.stated: dict[tuple[str, str, float], list[float]] = defaultdict(
            lambda: [0, 0, 0.0]
        )
        """Of those, the tokens in and out of replies that said what they cost, and the
        USD they said (a gateway's): counted as said, not at the price."""
        self.batched: set[str] = set()
        """The batches the stage sent or collected: it ran in batch when there are any."""
        self.waiting = 0
        """Items left in batches still running when the stage returned (``--no-wait``)."""
        self.empty = 0
        """Items that ended with nothing to show and no error (a subtopic whose generator
        kept repeating itself before its first new question)."""
        self.unsure = 0
        """Tries whose reply never came (a timeout, a dropped connection): maybe billed."""
        self.unsure_usd = 0.0
        """What they can have cost at most: counted spent."""
        self._processed = 0

    def start(self, total: int) -> None:
        self.progress.start(total)

    def skip(self, count: int = 1, topic: str | None = None) -> None:
        self.skipped += count
        publish(ItemSkipped(self.stage, count, topic or TOPIC.get()))

    def exclude(self, count: int = 1) -> None:
        """Count records set aside without finishing an item (rejected near-duplicates)."""
        self.excluded += count
        publish(ItemExcluded(self.stage, count, TOPIC.get()))

    def finish(self, excluded: bool = False) -> None:
        """One item completed: done, or done but excluded."""
        if excluded:
            self.excluded += 1
        else:
            self.done += 1
        if listening():
            counted = ItemExcluded if excluded else ItemDone
            publish(counted(self.stage, 1, TOPIC.get()))
        self._advance()

    def settle(self) -> None:
        """An item that ended with nothing to show and no error (a warning said why): it
        counts neither as done nor as failed, and the summary says how many there were."""
        self.empty += 1
        self._advance()

    def fail(self, item: str, message: str) -> None:
        self.failed += 1
        publish(ItemFailed(self.stage, 1, TOPIC.get()))
        logger.warning(f"{self.stage}: {item} failed: {message}")
        self._advance()

    def retrying(self, item: str) -> Callable[[str, float], None]:
        """What a client calls before trying a request for ``item`` again."""

        def warn(message: str, delay: float) -> None:
            publish(ItemRetry(self.stage, TOPIC.get()))
            logger.warning(f"{self.stage}: {item}: {message}; retrying in {delay:.1f}s")

        return warn

    def limited(self, refusal: Refusal) -> None:
        """A 429, waited out: said once a stage (then counted, and shown at debug); or the
        one the stage gave up at."""
        self.rate_limited += 1
        publish(ItemRateLimited(self.stage, TOPIC.get()))
        if refusal.gave_up:
            self.limit_stopped = True
            return  # the stage's error says why
        whose = "" if refusal.pause.asked else " (the provider said not how long)"
        text = f"{self.stage}: {refusal.message}; waiting {refusal.pause.seconds:.1f}s{whose}"
        if self.rate_limited == 1:
            logger.info(f"{text}: the provider's rate limit sets the pace from now on")
        else:
            logger.debug(text)

    def used(
        self,
        provider: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        requests: int = 1,
        *,
        discount: float = 0.0,
        stated: float | None = None,
    ) -> None:
        """Tokens of ``requests`` answered chat requests (0: an embedding) of ``model``;
        ``discount``: the share of the price taken off (a batch's); ``stated``: the USD
        the reply said it cost, which wins over its tokens at the price."""
        self.requests += requests
        if requests:
            counted = self.measured[(self.counted_as, model)]
            counted[0] += requests
            counted[1] += input_tokens
            counted[2] += output_tokens
        tally = self.usage[(provider, model, discount)]
        tally[0] += input_tokens
        tally[1] += output_tokens
        if stated is not None:
            said = self.stated[(provider, model, discount)]
            said[0] += input_tokens
            said[1] += output_tokens
            said[2] += stated
        if not listening():
            return  # the price and cost are for the event alone: once a request, for no one
        price = self.price_of(provider, model)
        cost = _cost(price, input_tokens, output_tokens, discount) if price else None
        if stated is not None:
            cost = stated
        publish(
            Tokens(
                stage=self.stage,
                model=model,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                cost=cost,
                topic=TOPIC.get(),
            )
        )

    def possibly_billed(self, bound: float | None) -> None:
        """A try whose reply never came: the provider may bill it, up to ``bound``."""
        self.unsure += 1
        self.unsure_usd += bound or 0.0

    @property
    def input_tokens(self) -> int:
        return sum(tally[0] for tally in self.usage.values())

    @property
    def output_tokens(self) -> int:
        return sum(tally[1] for tally in self.usage.values())

    def cost(self) -> float | None:
        """USD spent, or None when a model that was used has no known price."""
        total = 0.0
        for key in self.usage:
            known, priced = self._cost_of(key)
            if not priced:
                return None
            total += known
        return total + self.unsure_usd

    def history_entry(
        self, stage: str, started: str, ended: str, status: str, role: tuple[str, str] | None
    ) -> dict[str, object]:
        """The stage's line of ``history.jsonl`` (the reference tool's fields): ``role``,
        the provider and model it asked (None: none)."""
        return {
            "stage": stage,
            "started_at": started,
            "ended_at": ended,
            "status": status,
            "provider": role[0] if role else None,
            "model": role[1] if role else None,
            "done": self.done,
            "skipped": self.skipped,
            "failed": self.failed,
            "excluded": self.excluded,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost": self.cost(),
        }

    def tokens_of(self, provider: str, model: str) -> tuple[int, int]:
        """Tokens in and out of ``model`` at ``provider``, at every price (batch or not)."""
        found = [used for (p, m, _), used in self.usage.items() if (p, m) == (provider, model)]
        return sum(u[0] for u in found), sum(u[1] for u in found)

    def spent_at_known_prices(self) -> float:
        """USD spent at the prices known (a model without one counts 0, where ``cost``
        would make the whole unknown)."""
        return sum(self._cost_of(key)[0] for key in self.usage) + self.unsure_usd

    def _cost_of(self, key: tuple[str, str, float]) -> tuple[float, bool]:
        """USD of the tokens tallied under ``key`` as far as known (what replies said they
        cost, the rest at the price), and whether all of them are known."""
        provider, model, discount = key
        input_tokens, output_tokens = self.usage[key]
        said_in, said_out, said_usd = self.stated.get(key, (0, 0, 0.0))
        rest_in, rest_out = input_tokens - int(said_in), output_tokens - int(said_out)
        if not rest_in and not rest_out:
            return said_usd, True
        price = self.price_of(provider, model)
        if price is None:
            return said_usd, False
        return said_usd + _cost(price, rest_in, rest_out, discount), True

    def batch_note(self) -> str:
        """What the summary line adds when the stage ran in batch, else nothing."""
        if not self.batched:
            return ""
        count = len(self.batched)
        note = f"; in batch ({count} batch{'es' if count > 1 else ''}"
        if self.waiting:
            note += f", {self.waiting} waiting: `overbrainer answers` collects them"
        return note + ")"

    def summary(self) -> str:
        cost = self.cost()
        spent = "cost unknown" if cost is None else f"cost ${cost:.4f}"
        limited = ""
        if self.rate_limited:
            ended = "the stage stopped waiting" if self.limit_stopped else "waited out"
            limited = f"; {self.rate_limited} request(s) refused by the rate limit (429), {ended}"
        unsure = (
            f" ({self.unsure} request(s) without a reply counted at their bound, "
            f"${self.unsure_usd:.4f}: the provider may have billed them)"
            if self.unsure
            else ""
        )
        empty = f", {self.empty} with nothing new" if self.empty else ""
        return (
            f"{self.stage}: {self.done} done, {self.skipped} skipped, {self.failed} failed, "
            f"{self.excluded} excluded{empty}; tokens {self.input_tokens} in, "
            f"{self.output_tokens} out; {spent}{unsure}{limited}{self.batch_note()}"
        )

    def _advance(self) -> None:
        self._processed += 1
        if self.progress.live:
            tokens = self.input_tokens, self.output_tokens
            self.progress.update(self._processed, *tokens, self.cost(), self.pace_of())
        elif self.progress.due(self._processed):  # a plain line at each tenth: the pace then
            self.progress.update(self._processed, 0, 0, None, self.pace_of())


def _cost(price: Price, input_tokens: int, output_tokens: int, discount: float) -> float:
    return (input_tokens * price.prompt + output_tokens * price.completion) * (1 - discount)
