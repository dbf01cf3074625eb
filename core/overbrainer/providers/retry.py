"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

BACKOFF_UNIT = 1.0
"""Seconds of the first backoff step; a test may shrink it so that retries take no time."""

BACKOFF_CAP = 60.0
RETRY_AFTER_CAP = 600.0
PLAUSIBLE_WAIT_S = 86_400.0
"""The longest wait a provider's header is believed to mean (a day's limit resets within a
day): a longer one, like a NaN, a negative or an infinite one, is taken for no wait told."""

RETRIED_STATUSES = frozenset({408, 429})
FATAL_STATUSES = frozenset({401, 402, 403, 404})


def _unit() -> float:
    return BACKOFF_UNIT


@dataclass(frozen=True)
class RetryPolicy:
    """``1 + max_retries`` attempts; the wait is what the provider asked for (capped at 600 s),
    else ``min(2^attempt, 60)`` steps of ``unit`` seconds times a uniform draw in [0.5, 1]."""

    max_retries: int
    unit: float = field(default_factory=_unit)

    @property
    def attempts(self) -> int:
        return 1 + self.max_retries

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after the ``attempt``-th failed try (counted from 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), RETRY_AFTER_CAP)
        jitter = random.uniform(0.5, 1.0)  # noqa: S311 - spreading retries, not a secret
        return min(2.0**attempt, BACKOFF_CAP) * self.unit * jitter


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """The wait a ``Retry-After`` header asks for: seconds, or an HTTP date (one past is
    "now"); None when it asks for nothing plausible (garbage, NaN, negative, beyond a day)."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return plausible_wait(seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return plausible_wait(max((when - (now or datetime.now(UTC))).total_seconds(), 0.0))


def plausible_wait(seconds: float) -> float | None:
    """``seconds`` when it is a wait a provider could mean: finite, 0 to a day."""
    return seconds if math.isfinite(seconds) and 0 <= seconds <= PLAUSIBLE_WAIT_S else None
