"""One pace per provider and model, shared by every request of every stage of a command.

Each request takes a slot before it is sent, with what it costs (one request, its prompt
and its ``max_tokens``: what providers count against their limits), and gives it back with
what its reply said. Four things hold a request back:

- the window: how many may be in flight. It starts at the stage's concurrency, is halved
  by a 429 (once per round: the refusals of requests sent before the last cut do not cut
  it again), and climbs back by one per window of clean replies (AIMD, as TCP does);
- a pause: a 429 stops every request for the time the provider asked (``Retry-After``),
  or until its limit says it has room, or for a backoff of ours that grows with each round
  of such refusals and starts over after a calm minute;
- the pace: when a limit's ``remaining`` comes near what is in flight, requests are spaced
  at the rate the limit refills (from its reset), a little under it, never further apart
  than ``max_wait_s``;
- the credit of a limit told without a reset (LiteLLM's): what the newest reply said was
  left, less what was sent since, plus what has refilled since at the rate learnt from
  what was admitted. A request goes when its cost is covered; with nothing in flight and
  no rate learnt yet, one goes to ask.

Grants are first come, first served, and made by the event loop's timer, so a thousand
waiting requests cost nothing until one may go. The numbers outlive a stage (the next
stage, or ``watch``'s next cycle, starts at the pace the last one learnt); what belongs to
an event loop (waiters, the timer) lasts only while requests wait.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass

from overbrainer.providers import retry
from overbrainer.providers.ratelimit import Bucket, Pace, RateInfo, stated_pace

PACE_MARGIN = 0.95
"""Requests are spaced at this share of the refill rate: at the full rate, the jitter of a
real network would run the bucket dry now and then."""
PACE_SHOWN_S = 5.0
"""The pace is reported while requests were held back by it within this many seconds."""
BACKOFF_START = 0.25
"""Backoff units of a 429 that says nothing of when to come back; doubled at each round of
them, up to ``BACKOFF_MAX`` units, and back to the start after ``RECENT_REFUSAL_S`` without
a 429."""
BACKOFF_MAX = 30.0
RECENT_REFUSAL_S = 60.0
LEARN_SPAN_S = 1.0
"""The refill of a limit told without a reset is measured over spans at least this long,
or at least ``LEARN_QUICK_S`` long when ``LEARN_COUNT`` requests' worth refilled in them."""
LEARN_QUICK_S = 0.2
LEARN_COUNT = 8
_LIMITERS: dict[tuple[str, str, str], Limiter] = {}
_LIMITERS_KEPT = 256


@dataclass(frozen=True)
class Cost:
    """What a request is charged when a provider admits it: providers count its prompt
    plus its ``max_tokens`` against a token limit, whatever the reply then uses. Summed,
    it is what a run of requests was charged."""

    input_tokens: float = 0.0
    output_tokens: float = 0.0
    requests: float = 1.0

    def of(self, bucket: str) -> float:
        """The part of it the limit ``bucket`` counts."""
        if bucket == "requests":
            return self.requests
        if bucket == "input-tokens":
            return self.input_tokens
        if bucket == "output-tokens":
            return self.output_tokens
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
        )


ONE_REQUEST = Cost()
NOTHING = Cost(requests=0.0)


@dataclass(frozen=True)
class Pause:
    """The wait a 429 brought on every request of the limiter."""

    seconds: float
    asked: bool
    """Whether the provider asked for it (``Retry-After``, or its limit's reset); else it is
    a backoff of ours: the provider said nothing of when to come back."""


@dataclass(frozen=True)
class Refusal:
    """A 429 as the stage is told of it."""

    message: str
    pause: Pause
    gave_up: bool = False
    """The stage stops here: the wait would pass ``pipeline.max_wait_s``, or no wait helps."""


@dataclass(frozen=True)
class _Seen:
    """The newest word of a limit without a reset: what was left after request ``number``,
    when that reply came, and what had been charged up to that request."""

    number: int
    remaining: float
    at: float
    charged: float


@dataclass(frozen=True)
class _Anchor:
    """Where the measure of a limit's refill starts: when, what was left, what was admitted."""

    at: float
    remaining: float
    admitted: float


class Limiter:
    """The pace of one (provider, model). Not thread-safe: one event loop at a time uses it."""

    def __init__(self, ceiling: int, max_wait_s: float = 600.0) -> None:
        self.ceiling = ceiling
        self.max_wait_s = max_wait_s
        self.window = float(ceiling)
        self.in_flight = 0
        self.refused = 0
        self.paused_until = 0.0
        self.interval = 0.0
        self._next_send = 0.0
        self._sent = 0
        self._cut_after = 0
        self._refused_at = -RECENT_REFUSAL_S
        self._backoff = BACKOFF_START
        self._backoff_round = 0
        self._last_backoff = BACKOFF_START
        self._cost = NOTHING  # a moving average of what a request costs
        self._costed = 0
        self._charged = NOTHING  # what every request sent was charged, summed
        self._admitted = NOTHING  # and every request admitted
        self._flights: dict[int, tuple[Cost, Cost]] = {}  # in flight: its cost, charged to it
        self._seen: dict[str, _Seen] = {}
        self._open: dict[str, Bucket] = {}  # the limits without a reset, as last told
        self._anchor: dict[str, _Anchor] = {}
        self._refill: dict[str, float] = {}  # learnt, per second
        self._stated: tuple[str, Bucket, float | None] | None = None
        self._paced_at = -PACE_SHOWN_S
        self._queue: deque[tuple[asyncio.Future[int], Cost]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    # -- taking and giving back a slot -----------------------------------------------------

    def try_acquire(self, cost: Cost = ONE_REQUEST) -> int | None:
        """A slot now, if one is free and nothing waits before; else None."""
        now = time.monotonic()
        if not self._queue and self._ready_at(now, cost) == now:
            return self._grant(now, cost)
        return None

    async def acquire(self, cost: Cost = ONE_REQUEST) -> int:
        """Wait for a slot; returns the request's number, to give back with ``release``."""
        number = self.try_acquire(cost)
        if number is not None:
            return number
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append((future, cost))
        self._pump()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(future.result(), None)  # granted as it was cancelled
            raise

    def release(self, number: int, info: RateInfo | None) -> None:
        """A reply came and told ``info`` (a reply without limits: an empty one), or a
        request ended without one (None)."""
        cost, charged = self._flights.pop(number, (ONE_REQUEST, self._charged))
        if info is not None:
            self._admitted = self._admitted + cost
            self._learn(info, number, charged)
            if self.window < self.ceiling:
                self.window = min(float(self.ceiling), self.window + 1 / self.window)
        self._give_back()

    def refuse(self, number: int, info: RateInfo) -> Pause:
        """A 429: the window cut (once a round), every request paused; returns the pause."""
        _, charged = self._flights.pop(number, (ONE_REQUEST, self._charged))
        self.refused += 1
        now = time.monotonic()
        calm = now - self._refused_at > RECENT_REFUSAL_S
        self._refused_at = now
        if number > self._cut_after:
            self.window = max(1.0, self.window / 2)
            self._cut_after = self._sent
        self._learn(info, number, charged)
        if info.retry_after:  # a wait of 0 is no word of when
            pause = Pause(info.retry_after, asked=True)
        else:
            refill = self._refill_wait(info)
            learnt = self._credit_wait(now, self._cost) if refill is None else None
            if refill is not None:
                pause = Pause(refill, asked=True)
            elif learnt:  # a limit without a reset, its refill learnt: room comes then
                pause = Pause(learnt, asked=False)
            else:
                pause = Pause(self._next_backoff(number, calm) * retry.BACKOFF_UNIT, asked=False)
        self.paused_until = max(self.paused_until, now + pause.seconds)
        self._give_back()
        return pause

    def resize(self, ceiling: int, max_wait_s: float) -> None:
        """A stage of another concurrency: the window follows it, unless a 429 came within
        the last minute (then it only never exceeds it)."""
        self.ceiling = ceiling
        self.max_wait_s = max_wait_s
        if time.monotonic() - self._refused_at > RECENT_REFUSAL_S:
            self.window = float(ceiling)
        else:
            self.window = min(self.window, float(ceiling))

    def pace(self) -> Pace | None:
        """The provider's limit, as it set it, while it holds requests back (spaced, paused
        or waiting for its credit); else None."""
        if time.monotonic() - self._paced_at > PACE_SHOWN_S or self._stated is None:
            return None
        return stated_pace(*self._stated)

    def too_large(self, info: RateInfo, cost: Cost) -> tuple[str, Bucket] | None:
        """A token limit of ``info`` smaller than the ``max_tokens`` of the request costing
        ``cost``: no wait lets that request through."""
        for name, bucket in info.buckets.items():
            if name in ("tokens", "output-tokens") and bucket.limit < cost.output_tokens:
                return name, bucket
        return None

    # -- inside ------------------------------------------------------------------------------

    def _ready_at(self, now: float, cost: Cost) -> float | None:
        """When a request of ``cost`` may go (``now`` if now), or None when it waits for a
        reply to tell more. A request held back by the provider's limit sets the pace."""
        if self.in_flight >= max(1, int(self.window)):
            return None
        ready = max(now, self.paused_until, self._next_send)
        credit = self._credit_wait(ready, cost)
        if ready > now or credit != 0:
            self._paced_at = now
        if credit is None:
            return None if self.in_flight else ready  # nothing in flight: one goes to ask
        return ready + credit

    def _grant(self, now: float, cost: Cost) -> int:
        self.in_flight += 1
        self._sent += 1
        self._charged = self._charged + cost
        self._flights[self._sent] = (cost, self._charged)
        self._costed += 1
        weight = 1 / min(self._costed, 20)  # an average, then a moving one
        average = self._cost
        self._cost = Cost(
            average.input_tokens + (cost.input_tokens - average.input_tokens) * weight,
            average.output_tokens + (cost.output_tokens - average.output_tokens) * weight,
        )
        if self.interval > 0:
            self._next_send = max(now, self._next_send) + self.interval
            self._paced_at = now
        return self._sent

    def _give_back(self) -> None:
        self.in_flight -= 1
        self._pump()

    def _pump(self) -> None:
        """Grant what may go now, first come first served; wake again when the pause, the
        pace or a limit's credit allows the next."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        while self._queue:
            future, cost = self._queue[0]
            if future.done() or future.get_loop().is_closed():
                self._queue.popleft()
                continue
            ready = self._ready_at(now, cost)
            if ready is None:
                return  # a release pumps again
            if ready > now:
                self._timer = future.get_loop().call_later(ready - now, self._pump)
                return
            self._queue.popleft()
            future.set_result(self._grant(now, cost))

    def _learn(self, info: RateInfo, number: int, charged: Cost) -> None:
        """Space requests when a limit with a reset is near: at the rate it refills, per
        request's share; note what a limit without one says is left."""
        if not info.buckets:  # the provider says nothing of its limits: no pace to set
            return
        now = time.monotonic()
        interval = 0.0
        tightest = math.inf
        for name, bucket in info.buckets.items():
            cost = self._cost.of(name)
            if cost <= 0:
                continue
            if bucket.reset_s is None:
                self._observe(name, bucket, number, charged, now)
                refill = self._refill.get(name)
            else:
                refill = bucket.refill_per_s
                # Near: what is left would not cover two windows of requests.
                near = bucket.remaining < 2 * max(self.window, self.in_flight) * cost
                if refill is not None and near:
                    interval = max(interval, cost / (refill * PACE_MARGIN))
            if bucket.remaining / bucket.limit < tightest:
                tightest = bucket.remaining / bucket.limit
                self._stated = (name, bucket, refill)
        self.interval = min(interval, self.max_wait_s)

    def _observe(self, name: str, bucket: Bucket, number: int, charged: Cost, now: float) -> None:
        """What a limit without a reset says: the newest word sets its credit; two words
        tell its refill: what was left plus what was admitted between them, over the time
        between them (no more than a floor when it is full: it then refills unseen)."""
        seen = self._seen.get(name)
        if seen is not None and number < seen.number:
            return  # an older word, overtaken
        self._seen[name] = _Seen(number, bucket.remaining, now, charged.of(name))
        self._open[name] = bucket
        admitted = self._admitted.of(name)
        cost = self._cost.of(name)
        full = bucket.remaining >= bucket.limit - cost
        anchor = self._anchor.get(name)
        if anchor is None:
            if not full:
                self._anchor[name] = _Anchor(now, bucket.remaining, admitted)
            return
        span = now - anchor.at
        refilled = bucket.remaining - anchor.remaining + admitted - anchor.admitted
        if span < LEARN_SPAN_S and not (span >= LEARN_QUICK_S and refilled >= LEARN_COUNT * cost):
            if full:
                self._anchor.pop(name)
            return
        if refilled <= 0:
            return  # nothing refilled yet (a window that empties at once): measured on
        rate, learnt = refilled / span, self._refill.get(name)
        if full:  # a floor
            self._refill[name] = max(rate, learnt or 0.0)
            self._anchor.pop(name)
            return
        self._refill[name] = rate if learnt is None else (learnt + rate) / 2
        self._anchor[name] = _Anchor(now, bucket.remaining, admitted)

    def _credit_wait(self, at: float, cost: Cost) -> float | None:
        """Seconds after ``at`` until every limit without a reset has room for ``cost``
        (at most ``max_wait_s``); None when one lacks it and its refill is not known."""
        wait = 0.0
        for name, seen in self._seen.items():
            need = min(cost.of(name), self._open[name].limit)
            if need <= 0:
                continue
            refill = self._refill.get(name, 0.0)
            filled = min(seen.remaining + refill * (at - seen.at), self._open[name].limit)
            short = need - (filled - (self._charged.of(name) - seen.charged))
            if short <= 0:
                continue
            if not refill:
                return None
            wait = max(wait, min(short / refill, self.max_wait_s))
        return wait

    def _refill_wait(self, info: RateInfo) -> float | None:
        """The time until an empty limit with a reset has room for one request."""
        waits = [
            (self._cost.of(name) - bucket.remaining) / refill
            for name, bucket in info.buckets.items()
            if (refill := bucket.refill_per_s) and bucket.remaining < self._cost.of(name)
        ]
        return max(waits) if waits else None

    def _next_backoff(self, number: int, calm: bool) -> float:
        """Our own wait after a 429 that tells none: doubled once a round of refusals (the
        refusals of requests sent before the last doubling share it), kept across
        successes, started over after a calm minute."""
        if calm:
            self._backoff = BACKOFF_START
        if number > self._backoff_round:
            self._last_backoff = self._backoff
            self._backoff = min(self._backoff * 2, BACKOFF_MAX)
            self._backoff_round = self._sent
        return self._last_backoff


def limiter_for(
    provider: str, base_url: str, model: str, ceiling: int, max_wait_s: float = 600.0
) -> Limiter:
    """The limiter of ``model`` at ``provider`` for this process, made on first use; its
    window is never above ``ceiling`` (the stage's concurrency)."""
    key = (provider, base_url, model)
    limiter = _LIMITERS.get(key)
    if limiter is None:
        if len(_LIMITERS) >= _LIMITERS_KEPT:
            idle = [k for k, v in _LIMITERS.items() if not v.in_flight and not v._queue]
            for old in idle[: len(idle) // 2 or 1]:
                del _LIMITERS[old]
        limiter = _LIMITERS[key] = Limiter(ceiling, max_wait_s)
    elif limiter.ceiling != ceiling or limiter.max_wait_s != max_wait_s:
        limiter.resize(ceiling, max_wait_s)
    return limiter
