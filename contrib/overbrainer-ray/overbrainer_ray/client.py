"""The Ray Jobs API, imported when first used, its failures turned into overbrainer's errors.

``ray.job_submission`` costs about a second to import: it is loaded by the first call that
talks to the cluster, never by ``overbrainer --help`` nor by a command that does not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from overbrainer.plugin import TransientError, UserError

T = TypeVar("T")


class JobNotFound(Exception):
    """The cluster does not know the job (deleted, or the cluster was restarted)."""


@dataclass(frozen=True)
class RayJobInfo:
    """What overbrainer reads of a Ray job's status."""

    status: str  # PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED
    exit_code: int | None
    message: str

    @property
    def terminal(self) -> bool:
        return self.status in ("STOPPED", "SUCCEEDED", "FAILED")


class RayClient:
    """One target's connection to a Ray cluster's Jobs API."""

    def __init__(self, target_name: str, address: str) -> None:
        self.target_name = target_name
        self.address = address
        self._client: Any = None

    def _call(self, what: str, call: Callable[[Any], T]) -> T:
        try:
            import requests
            from ray.job_submission import JobSubmissionClient
        except ImportError as error:
            raise UserError(
                f"target `{self.target_name}` needs Ray's Jobs client, which does not import "
                f"here ({error}): install overbrainer-ray with its dependencies "
                '(pip install "overbrainer-ray")'
            ) from None
        try:
            if self._client is None:
                self._client = JobSubmissionClient(self.address)
            return call(self._client)
        except (requests.ConnectionError, requests.Timeout, ConnectionError) as error:
            raise TransientError(
                f"target `{self.target_name}`: cannot reach the Ray cluster at {self.address}"
                f" to {what}: {type(error).__name__}"
            ) from None
        except RuntimeError as error:
            text = str(error)
            if "404" in text or "does not exist" in text:
                raise JobNotFound(text) from None
            if any(f"status code {code}" in text for code in (500, 502, 503, 504)):
                raise TransientError(
                    f"target `{self.target_name}`: the Ray cluster failed to {what}: "
                    f"{text.splitlines()[0][:300]}"
                ) from None
            raise UserError(
                f"target `{self.target_name}`: the Ray cluster at {self.address} refused to "
                f"{what}: {text.splitlines()[0][:300] if text else type(error).__name__}"
            ) from None

    def submit(
        self,
        *,
        submission_id: str,
        entrypoint: str,
        runtime_env: Mapping[str, Any],
        metadata: Mapping[str, str],
        num_cpus: float,
        num_gpus: float,
    ) -> None:
        self._call(
            "submit the job",
            lambda c: c.submit_job(
                entrypoint=entrypoint,
                submission_id=submission_id,
                runtime_env=dict(runtime_env),
                metadata=dict(metadata),
                entrypoint_num_cpus=num_cpus or None,
                entrypoint_num_gpus=num_gpus or None,
            ),
        )

    def info(self, submission_id: str) -> RayJobInfo:
        details = self._call("read the job's status", lambda c: c.get_job_info(submission_id))
        return RayJobInfo(
            status=str(getattr(details.status, "value", details.status)),
            exit_code=details.driver_exit_code,
            message=details.message or "",
        )

    def stop(self, submission_id: str) -> bool:
        return bool(self._call("stop the job", lambda c: c.stop_job(submission_id)))

    def logs(self, submission_id: str) -> str:
        return str(self._call("read the job's log", lambda c: c.get_job_logs(submission_id)))

    def close(self) -> None:
        """The client holds no connection between calls (one HTTP request each): forget it."""
        self._client = None
