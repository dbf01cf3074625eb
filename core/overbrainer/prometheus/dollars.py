"""A counter of US dollars shown to the micro-dollar.

Prices are sums of small floats (``0.0001 + 0.0007`` is ``0.0007999999999999999``): the
exact sum is kept and the scrape shows it rounded to six decimals, which no price a
provider quotes goes below and which keeps the counter monotonic.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

DECIMALS = 6
"""A micro-dollar."""


class DollarCounter(Collector):
    """A counter family ``NAME_total`` of dollars by ``labels``, registered on ``registry``."""

    def __init__(
        self, name: str, documentation: str, labels: list[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labels = labels
        self._sums: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, amount: float, **labels: str) -> None:
        """Add ``amount`` dollars (> 0) to the series of ``labels``."""
        key = tuple(labels[name] for name in self.labels)
        with self._lock:
            self._sums[key] = self._sums.get(key, 0.0) + amount

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        with self._lock:
            sums = sorted(self._sums.items())
        for key, dollars in sums:
            family.add_metric(list(key), round(dollars, DECIMALS))
        yield family
