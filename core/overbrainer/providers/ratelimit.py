"""What a provider says of its rate limit, read from the headers of any reply.

Two dialects: OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset as
a duration such as ``6m0s`` or ``40ms``) and Anthropic's ``anthropic-ratelimit-{requests,
tokens,input-tokens,output-tokens}-{limit,remaining,reset}`` (reset as an RFC 3339 time).
Both, and any other server, may send ``retry-after-ms`` or ``Retry-After`` (seconds, or an
HTTP date) with a 429. Unreadable values are ignored: a header never fails a request.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from overbrainer.providers.retry import parse_retry_after

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

BUCKETS = ("requests", "tokens", "input-tokens", "output-tokens")
"""What a limit can count: requests, or tokens (in and out together, or each alone)."""


@dataclass(frozen=True)
class Bucket:
    """One limit as a reply left it: its size, what is left, and the seconds until it is
    full again."""

    limit: float
    remaining: float
    reset_s: float

    @property
    def refill_per_s(self) -> float | None:
        """How fast it fills: what it lacks over the time it takes to fill it, or None when
        it is full (nothing to learn from)."""
        missing = self.limit - self.remaining
        if missing <= 0 or self.reset_s <= 0:
            return None
        return missing / self.reset_s


@dataclass(frozen=True)
class RateInfo:
    """The limits a reply told of, by what they count, and the wait a 429 asked for."""

    buckets: dict[str, Bucket] = field(default_factory=dict)
    retry_after: float | None = None


NO_INFO = RateInfo()
_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after")
_FIRSTS = frozenset("xXaArR")
"""The first letters of ``_PREFIXES``, in either case: most names are told apart by it."""


def parse_duration(value: str) -> float | None:
    """Seconds in an OpenAI reset: ``1s``, ``6m0s``, ``40ms``, ``1h2m3.5s``, or a bare number
    of seconds."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        return number if math.isfinite(number) and number >= 0 else None
    total, at = 0.0, 0
    for found in _DURATION.finditer(text):
        if found.start() != at:
            return None
        total += float(found.group(1)) * _UNIT_SECONDS[found.group(2)]
        at = found.end()
    return total if at == len(text) and at else None


def parse_instant(value: str, now: datetime) -> float | None:
    """Seconds from ``now`` to an RFC 3339 time (Anthropic's reset), at least 0."""
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - now).total_seconds(), 0.0)


def parse_rate_headers(headers: Mapping[str, str], now: datetime | None = None) -> RateInfo:
    """The limits in ``headers`` (any case), in whichever dialect they come."""
    if not _tells_limits(headers):
        return NO_INFO  # most replies of most servers: nothing to read
    lowered = {key.lower(): value for key, value in headers.items()}
    moment = now or datetime.now(UTC)
    buckets: dict[str, Bucket] = {}
    for name in BUCKETS:
        openai = _bucket(lowered, f"x-ratelimit-{{}}-{name}", parse_duration)
        anthropic = _bucket(
            lowered, f"anthropic-ratelimit-{name}-{{}}", lambda v: parse_instant(v, moment)
        )
        found = anthropic or openai
        if found is not None:
            buckets[name] = found
    return RateInfo(buckets, _retry_after(lowered, moment))


def _tells_limits(headers: Mapping[str, str]) -> bool:
    """Whether a name in ``headers`` starts as a limit's or a wait's does (a reply's
    headers are screened on every request: no copy of them is made for that)."""
    for key in headers:  # noqa: SIM110 - a loop: half the CPU of any() and a generator
        if key[:1] in _FIRSTS and key.lower().startswith(_PREFIXES):
            return True
    return False


def _bucket(headers: Mapping[str, str], pattern: str, reset: object) -> Bucket | None:
    raw = [headers.get(pattern.format(part)) for part in ("limit", "remaining", "reset")]
    if any(value is None for value in raw):
        return None
    limit, remaining = _number(raw[0]), _number(raw[1])
    reset_s = reset(raw[2]) if callable(reset) else None
    if limit is None or remaining is None or reset_s is None or limit <= 0:
        return None
    return Bucket(limit, min(max(remaining, 0.0), limit), reset_s)


def _number(value: str | None) -> float | None:
    try:
        number = float(value or "")
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    milliseconds = _number(headers.get("retry-after-ms"))
    if milliseconds is not None and milliseconds >= 0:
        return milliseconds / 1000
    return parse_retry_after(headers.get("retry-after"), now)
