"""The Prometheus endpoint scraped and parsed with prometheus_client's own OpenMetrics parser."""

from __future__ import annotations

import socket
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from overbrainer.prometheus.collect import ProjectMetrics
from overbrainer.prometheus.server import MetricsServer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(url: str) -> tuple[str, dict]:
    """The content type and {(name, labels as a sorted tuple): (type, value)} at ``url``."""
    with urllib.request.urlopen(url, timeout=10) as response:
        content_type = response.headers["Content-Type"]
        text = response.read().decode("utf-8")
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = (sample.name, tuple(sorted(sample.labels.items())))
            samples[key] = (family.type, sample.value)
    return content_type, samples


def sample(samples: dict, name: str, **labels: str) -> tuple[str, float]:
    """The type and value of series ``name`` with exactly ``labels``, from ``scrape``."""
    return samples[(name, tuple(sorted(labels.items())))]


def scraped(metrics: ProjectMetrics) -> dict:
    """Every sample of ``metrics``, scraped from a server of their own."""
    server = MetricsServer(metrics.registry, "127.0.0.1", 0)
    try:
        return scrape(f"http://{server.address}/metrics")[1]
    finally:
        server.close()
