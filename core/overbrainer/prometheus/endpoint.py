"""Starting and stopping the endpoint with the project lock."""

from __future__ import annotations

from pathlib import Path

from loguru import logger

from overbrainer.config.listen import is_loopback, parse_listen
from overbrainer.events import subscribe
from overbrainer.prometheus.collect import ProjectMetrics
from overbrainer.prometheus.server import MetricsServer


class Endpoint:
    """The metrics of ``project_dir`` served at ``listen`` and fed by the event bus."""

    def __init__(self, project_dir: Path, listen: str) -> None:
        host, port = parse_listen(listen)
        self.metrics = ProjectMetrics(project_dir)
        self.server = MetricsServer(self.metrics.registry, host, port)
        self._unsubscribe = subscribe(self.metrics)

    @property
    def url(self) -> str:
        return f"http://{self.server.address}/metrics"

    def close(self) -> None:
        self._unsubscribe()
        self.server.close()


def start_endpoint(project_dir: Path, listen: str) -> Endpoint | None:
    """Serve the metrics, saying where; a bind failure is a warning and no endpoint."""
    try:
        endpoint = Endpoint(project_dir, listen)
    except OSError as error:
        logger.warning(
            f"metrics: cannot listen on {listen} ({error.strerror or error}); going on without"
        )
        return None
    logger.info(f"metrics at {endpoint.url}")
    if not is_loopback(listen):
        logger.warning(
            f"metrics: {endpoint.url} is open to the network without authentication "
            "(metrics.allow_remote = true)"
        )
    return endpoint
