"""What a provider says of its rate limit, read from the headers of any reply.

Three dialects: OpenAI's ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset as
a duration such as ``6m0s`` or ``40ms``), Anthropic's ``anthropic-ratelimit-{requests,tokens,
input-tokens,output-tokens}-{limit,remaining,reset}`` (reset as an RFC 3339 time), and
LiteLLM's, OpenAI's names without the reset. Any server may send ``retry-after-ms`` or
``Retry-After`` (seconds, or an HTTP date) with a 429, and a gateway its upstream's under a
prefix of its own (``llm_provider-retry-after``). A value that is not a finite, plausible
number (NaN, infinite, negative, beyond a day, garbage) is ignored and named in
``RateInfo.ignored``: a header never fails a request, nor holds one back for ever.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from overbrainer.providers.retry import parse_retry_after, plausible_wait

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}

BUCKETS = ("requests", "tokens", "input-tokens", "output-tokens")
"""What a limit can count: requests, or tokens (in and out together, or each alone)."""
WINDOWS = (("s", 1.0), ("min", 60.0), ("h", 3600.0), ("day", 86400.0))
"""The periods a limit is set in, to show it as it was set (``4/min``)."""
SHOWN_VALUE = 40
"""Characters of an ignored header's value quoted in the warning."""


@dataclass(frozen=True)
class Bucket:
    """One limit as a reply left it: its size, what is left, and the seconds until it is
    full again (None when the provider does not say, as LiteLLM, or said nonsense)."""

    limit: float
    remaining: float
    reset_s: float | None = None

    @property
    def refill_per_s(self) -> float | None:
        """How fast it fills: what it lacks over the time it takes to fill it, or None when
        it is full or its reset is unknown (nothing to learn from)."""
        missing = self.limit - self.remaining
        if missing <= 0 or self.reset_s is None or self.reset_s <= 0:
            return None
        return missing / self.reset_s


@dataclass(frozen=True)
class Pace:
    """A limit as the provider set it: ``count`` of ``what`` a ``unit``."""

    count: float
    what: str
    unit: str

    def __str__(self) -> str:
        things = "" if self.what == "requests" else f" {self.what.replace('-', ' ')}"
        return f"{self.count:g}{things}/{self.unit}"


def stated_pace(name: str, bucket: Bucket, refill_per_s: float | None) -> Pace:
    """``bucket``'s limit in the period it fills in (``limit / refill``): the nearest of a
    second, a minute, an hour and a day; a minute when the rate is unknown (the period of
    RPM and TPM limits, the common ones)."""
    unit = "min"
    if refill_per_s:
        period = bucket.limit / refill_per_s
        unit = min(WINDOWS, key=lambda window: abs(math.log(period / window[1])))[0]
    return Pace(bucket.limit, name, unit)


@dataclass(frozen=True)
class RateInfo:
    """The limits a reply told of, by what they count, the wait a 429 asked for, and the
    headers ignored as implausible (``name = 'value'``)."""

    buckets: dict[str, Bucket] = field(default_factory=dict)
    retry_after: float | None = None
    ignored: tuple[str, ...] = ()


NO_INFO = RateInfo()
_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after")
_SUFFIXES = ("-retry-after", "-retry-after-ms")
_FIRSTS = frozenset("xXaArR")
"""The first letters of ``_PREFIXES``, in either case: most names are told apart by it."""
_LASTS = frozenset("rRsS")
"""The last letters of ``_SUFFIXES``, in either case."""


def parse_duration(value: str) -> float | None:
    """Seconds in an OpenAI reset: ``1s``, ``6m0s``, ``40ms``, ``1h2m3.5s``, or a bare number
    of seconds; None when not a plausible wait."""
    text = value.strip()
    try:
        number = float(text)
    except ValueError:
        pass
    else:
        return plausible_wait(number)
    total, at = 0.0, 0
    for found in _DURATION.finditer(text):
        if found.start() != at:
            return None
        total += float(found.group(1)) * _UNIT_SECONDS[found.group(2)]
        at = found.end()
    return plausible_wait(total) if at == len(text) and at else None


def parse_instant(value: str, now: datetime) -> float | None:
    """Seconds from ``now`` to an RFC 3339 time (Anthropic's reset), at least 0; None past
    a day."""
    try:
        when = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return plausible_wait(max((when - now).total_seconds(), 0.0))


def parse_rate_headers(headers: Mapping[str, str], now: datetime | None = None) -> RateInfo:
    """The limits in ``headers`` (any case), in whichever dialect they come."""
    if not _tells_limits(headers):
        return NO_INFO  # most replies of most servers: nothing to read
    lowered = {key.lower(): value for key, value in headers.items()}
    moment = now or datetime.now(UTC)
    ignored: list[str] = []
    buckets: dict[str, Bucket] = {}
    for name in BUCKETS:
        found = _bucket(
            lowered, f"anthropic-ratelimit-{name}-{{}}", lambda v: parse_instant(v, moment),
            ignored,
        ) or _bucket(lowered, f"x-ratelimit-{{}}-{name}", parse_duration, ignored)
        if found is not None:
            buckets[name] = found
    return RateInfo(buckets, _retry_after(lowered, moment, ignored), tuple(ignored))


def _tells_limits(headers: Mapping[str, str]) -> bool:
    """Whether a name in ``headers`` starts as a limit's or a wait's does, or ends as a
    vendor's wait (a reply's headers are screened on every request: no copy of them is
    made for that)."""
    for key in headers:
        if key[:1] in _FIRSTS and key.lower().startswith(_PREFIXES):
            return True
        if key[-1:] in _LASTS and key.lower().endswith(_SUFFIXES):
            return True
    return False


def _bucket(
    headers: Mapping[str, str],
    pattern: str,
    reset: Callable[[str], float | None],
    ignored: list[str],
) -> Bucket | None:
    names = [pattern.format(part) for part in ("limit", "remaining", "reset")]
    raw = [headers.get(name) for name in names]
    if raw[0] is None or raw[1] is None:
        return None
    limit, remaining = _number(raw[0]), _number(raw[1])
    if limit is None or limit <= 0:
        ignored.append(_shown(names[0], raw[0]))
        return None
    if remaining is None:
        ignored.append(_shown(names[1], raw[1]))
        return None
    reset_s = None
    if raw[2] is not None:
        reset_s = reset(raw[2])
        if reset_s is None:  # kept as a bucket without a reset: its refill is learnt
            ignored.append(_shown(names[2], raw[2]))
    return Bucket(limit, min(max(remaining, 0.0), limit), reset_s)


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _retry_after(headers: Mapping[str, str], now: datetime, ignored: list[str]) -> float | None:
    """The wait asked: ``retry-after-ms``, ``retry-after``, then a vendor's (``*-retry-after
    -ms``, ``*-retry-after``: the longest when several)."""
    vendors = sorted(name for name in headers if name.endswith(_SUFFIXES))
    names = ["retry-after-ms", "retry-after"]
    names += [name for name in vendors if name.endswith("-ms")]
    names += [name for name in vendors if not name.endswith("-ms")]
    found: list[float] = []
    for name in names:
        value = headers.get(name)
        if value is None:
            continue
        if name.endswith("-ms"):
            milliseconds = _number(value)
            wait = plausible_wait(milliseconds / 1000) if milliseconds is not None else None
        else:
            wait = parse_retry_after(value, now)
        if wait is None:
            ignored.append(_shown(name, value))
        elif name in ("retry-after-ms", "retry-after"):
            return wait
        else:
            found.append(wait)
    return max(found) if found else None


def _shown(name: str, value: str) -> str:
    return f"{name} = {value[:SHOWN_VALUE]!r}"
