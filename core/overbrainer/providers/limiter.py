"""One pace per provider and model, shared by every request of every stage of a command.

Each request takes a slot before it is sent and gives it back with what its reply said.
Three things hold a request back:

- the window: how many may be in flight. It starts at the stage's concurrency, is halved
  by a 429 (once per round: the refusals of requests sent before the last cut do not cut
  it again), and climbs back by one per window of clean replies (AIMD, as TCP does);
- a pause: a 429 stops every request for the time the provider asked (``Retry-After``),
  or until its limit says it has room, or for a short backoff;
- the pace: when a limit's ``remaining`` comes near what is in flight, requests are spaced
  at the rate the limit refills (learnt from the headers), a little under it.

Grants are first come, first served, and made by the event loop's timer, so a thousand
waiting requests cost nothing until one may go. The numbers outlive a stage (the next
stage, or ``watch``'s next cycle, starts at the pace the last one learnt); what belongs to
an event loop (waiters, the timer) lasts only while requests wait.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

from overbrainer.providers import retry
from overbrainer.providers.ratelimit import RateInfo

PACE_MARGIN = 0.95
"""Requests are spaced at this share of the refill rate: at the full rate, the jitter of a
real network would run the bucket dry now and then."""
PACE_SHOWN_S = 5.0
"""The pace is reported while requests were spaced within this many seconds."""
BACKOFF_START = 0.25
"""Backoff units of a 429 that says nothing of when to come back; doubled at each one in a
row, up to ``BACKOFF_MAX`` units."""
BACKOFF_MAX = 30.0
RECENT_REFUSAL_S = 60.0
_LIMITERS: dict[tuple[str, str, str], Limiter] = {}
_LIMITERS_KEPT = 256


@dataclass
class Usage:
    """The tokens one request cost, to learn how much of a token limit a request takes."""

    input_tokens: int = 0
    output_tokens: int = 0


class Limiter:
    """The pace of one (provider, model). Not thread-safe: one event loop at a time uses it."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
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
        self._average = {"input-tokens": 0.0, "output-tokens": 0.0}
        self._replies = 0
        self._paced_at = -PACE_SHOWN_S
        self._sends: deque[float] = deque(maxlen=256)
        self._queue: deque[asyncio.Future[int]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    # -- taking and giving back a slot -----------------------------------------------------

    def try_acquire(self) -> int | None:
        """A slot now, if one is free and nothing waits before; else None."""
        now = time.monotonic()
        if not self._queue and self._may_send(now):
            return self._grant(now)
        return None

    async def acquire(self) -> int:
        """Wait for a slot; returns the request's number, to give back with ``release``."""
        number = self.try_acquire()
        if number is not None:
            return number
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append(future)
        self._pump()
        try:
            return await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self._give_back()  # granted as it was cancelled: the slot goes to the next
            raise

    def release(self, number: int, info: RateInfo | None, usage: Usage | None) -> None:
        """A reply came (``usage``: what it cost, when it says), or a request ended without
        one (both None)."""
        if info is not None:
            self._learn(info, usage)
        if usage is not None:
            self._backoff = BACKOFF_START
            if self.window < self.ceiling:
                self.window = min(float(self.ceiling), self.window + 1 / self.window)
        self._give_back()

    def refuse(self, number: int, info: RateInfo) -> float:
        """A 429: the window cut (once a round), every request paused; returns the pause
        in seconds."""
        self.refused += 1
        now = time.monotonic()
        self._refused_at = now
        if number > self._cut_after:
            self.window = max(1.0, self.window / 2)
            self._cut_after = self._sent
        self._learn(info, None)
        pause = info.retry_after
        if pause is None:
            pause = _refill_wait(info)
        if pause is None or pause <= 0:  # no word of when (or "now"): a backoff of ours
            pause = self._backoff * retry.BACKOFF_UNIT
            self._backoff = min(self._backoff * 2, BACKOFF_MAX)
        pause = min(pause, retry.RETRY_AFTER_CAP)
        self.paused_until = max(self.paused_until, now + pause)
        self._give_back()
        return pause

    def resize(self, ceiling: int) -> None:
        """A stage of another concurrency: the window follows it, unless a 429 came within
        the last minute (then it only never exceeds it)."""
        self.ceiling = ceiling
        if time.monotonic() - self._refused_at > RECENT_REFUSAL_S:
            self.window = float(ceiling)
        else:
            self.window = min(self.window, float(ceiling))

    def pace(self) -> float | None:
        """Requests a second over the last few seconds, while the provider's limit sets the
        pace (requests spaced or paused); else None."""
        now = time.monotonic()
        if now - self._paced_at > PACE_SHOWN_S:
            return None
        recent = [at for at in self._sends if now - at <= PACE_SHOWN_S]
        if len(recent) < 2 or recent[-1] <= recent[0]:
            return None
        return (len(recent) - 1) / (recent[-1] - recent[0])

    # -- inside ------------------------------------------------------------------------------

    def _may_send(self, now: float) -> bool:
        return (
            self.in_flight < max(1, int(self.window))
            and now >= self.paused_until
            and now >= self._next_send
        )

    def _grant(self, now: float) -> int:
        self.in_flight += 1
        self._sent += 1
        if self.interval > 0:
            self._next_send = max(now, self._next_send) + self.interval
            self._paced_at = now
        self._sends.append(now)
        return self._sent

    def _give_back(self) -> None:
        self.in_flight -= 1
        self._pump()

    def _pump(self) -> None:
        """Grant what may go now, first come first served; wake again when the pause or the
        pace allows the next."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        now = time.monotonic()
        while self._queue:
            future = self._queue[0]
            if future.done() or future.get_loop().is_closed():
                self._queue.popleft()
                continue
            if self.in_flight >= max(1, int(self.window)):
                return  # a release pumps again
            ready_at = max(self.paused_until, self._next_send)
            if ready_at > now:
                if now < self.paused_until:
                    self._paced_at = now
                self._timer = future.get_loop().call_later(ready_at - now, self._pump)
                return
            self._queue.popleft()
            future.set_result(self._grant(now))

    def _learn(self, info: RateInfo, usage: Usage | None) -> None:
        """Space requests when a limit is near: at the rate it refills, per request's share."""
        if usage is not None:
            self._replies += 1
            weight = 1 / min(self._replies, 20)  # an average, then a moving one
            average = self._average  # both written out: this runs once a reply
            average["input-tokens"] += (usage.input_tokens - average["input-tokens"]) * weight
            average["output-tokens"] += (usage.output_tokens - average["output-tokens"]) * weight
        if not info.buckets:  # the provider says nothing of its limits: no pace to set
            return
        per_request = {
            "requests": 1.0,
            "tokens": self._average["input-tokens"] + self._average["output-tokens"],
            **self._average,
        }
        interval = 0.0
        for name, bucket in info.buckets.items():
            cost = per_request.get(name, 0.0)
            refill = bucket.refill_per_s
            if cost <= 0 or refill is None:
                continue
            # Near: what is left would not cover two windows of requests.
            if bucket.remaining < 2 * max(self.window, self.in_flight) * cost:
                interval = max(interval, cost / (refill * PACE_MARGIN))
        self.interval = interval


def _refill_wait(info: RateInfo) -> float | None:
    """The time until an empty limit has room for one request, when the headers tell."""
    waits = [
        1 / bucket.refill_per_s
        for name, bucket in info.buckets.items()
        if name == "requests" and bucket.remaining < 1 and bucket.refill_per_s
    ]
    return max(waits) if waits else None


def limiter_for(provider: str, base_url: str, model: str, ceiling: int) -> Limiter:
    """The limiter of ``model`` at ``provider`` for this process, made on first use; its
    window is never above ``ceiling`` (the stage's concurrency)."""
    key = (provider, base_url, model)
    limiter = _LIMITERS.get(key)
    if limiter is None:
        if len(_LIMITERS) >= _LIMITERS_KEPT:
            idle = [k for k, v in _LIMITERS.items() if not v.in_flight and not v._queue]
            for old in idle[: len(idle) // 2 or 1]:
                del _LIMITERS[old]
        limiter = _LIMITERS[key] = Limiter(ceiling)
    elif limiter.ceiling != ceiling:
        limiter.resize(ceiling)
    return limiter
