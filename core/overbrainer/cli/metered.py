"""The project lock that also serves ``[metrics] listen`` while it is held."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from overbrainer.runs.lock import ProjectLock


class MeteredLock(ProjectLock):
    """A :class:`ProjectLock` that starts the Prometheus endpoint once acquired and stops it
    before release. ``listen`` is asked only then, so a command that never locks never reads
    the setting."""

    def __init__(self, project_dir: Path, listen: Callable[[], str | None]) -> None:
        super().__init__(project_dir)
        self.project_dir = project_dir
        self._listen = listen
        self._endpoint: Any = None

    def acquire(self) -> None:
        super().acquire()
        listen = self._listen()
        if listen:
            from overbrainer.prometheus.endpoint import start_endpoint

            self._endpoint = start_endpoint(self.project_dir, listen)

    def release(self) -> None:
        endpoint, self._endpoint = self._endpoint, None
        if endpoint is not None:
            endpoint.close()
        super().release()
