"""The run record, ``runs/<id>/run.json``: what a later process needs to find a job again."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator


class RunState(StrEnum):
    """Where a run stands; the last four are final."""

    PREPARING = "preparing"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"

    @property
    def ended(self) -> bool:
        return self not in (RunState.PREPARING, RunState.RUNNING)


class SnapshotReason(StrEnum):
    """Why a snapshot was asked for, as written in ``snapshot.request``."""

    REQUESTED = "requested"
    DEADLINE = "deadline"
    COST = "cost"
    DISK = "disk"

    @classmethod
    def parse(cls, text: str) -> SnapshotReason:
        """The reason a request file holds; empty or unknown text reads as ``requested``."""
        try:
            return cls(text.strip())
        except ValueError:
            return cls.REQUESTED


M = TypeVar("M", bound=BaseModel)

ARTIFACTS_NOT_RETRIEVED = "artifacts not retrieved"
"""How a run's message says its artifacts could not be brought home (``runs.outcome``)."""


class _Record(BaseModel):
    # Fields this version does not know are ignored, not refused: a newer overbrainer, or
    # the reference tool, may have written them (its run.json is read here as it is).
    model_config = ConfigDict(extra="ignore", frozen=True)


class Container(_Record):
    """The container a job runs in, so a cancel can stop it by name."""

    engine: str
    name: str


class JobHandle(_Record):
    """How a target finds its job again, from ``launch_job``, kept in ``run.json``.

    The host fields are optional: ``dir`` (the job directory there), ``pid`` (its process
    group), ``container`` and ``token`` (carried by the job's processes, so a stale pid is
    never signalled). ``data`` is the plugin's own, a JSON object: store a pydantic model of
    yours with :meth:`with_data` and read it back, validated, with :meth:`data_as`.
    """

    dir: str | None = None
    pid: int | None = Field(default=None, gt=1)
    container: Container | None = None
    token: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    def with_data(self, data: BaseModel) -> JobHandle:
        """A copy holding ``data`` (a plugin's model) as JSON."""
        return self.model_copy(update={"data": data.model_dump(mode="json")})

    def data_as(self, model: type[M]) -> M:
        """The plugin's data as ``model``; raises ``pydantic.ValidationError`` if it is not."""
        return model.model_validate(self.data)


class Snapshot(_Record):
    """The checkpoint a stopped run saved, relative to its run directory."""

    checkpoint: str
    step: int = Field(ge=0)
    reason: SnapshotReason = SnapshotReason.REQUESTED


class RunRecord(_Record):
    """One training run. Saved atomically after every transition."""

    id: str
    target: str
    created: str
    remote_dir: str
    job: JobHandle | None = None
    state: RunState = RunState.PREPARING
    message: str | None = None
    snapshot: Snapshot | None = None
    resumed_from: str | None = None
    snapshots: bool = False
    artifacts_missing: bool = False
    """The run ended, but what it made could not be brought home (its message says why):
    a target that ends the machine keeps it for a later ``train attach``."""

    @model_validator(mode="before")
    @classmethod
    def _missing_of_old(cls, data: Any) -> Any:
        """A record written before ``artifacts_missing`` said it in its message alone."""
        if isinstance(data, dict) and "artifacts_missing" not in data:
            message = data.get("message")
            if isinstance(message, str) and ARTIFACTS_NOT_RETRIEVED in message:
                return {**data, "artifacts_missing": True}
        return data

    def to_json(self) -> dict[str, Any]:
        """The record as ``run.json`` holds it: optional parts only when set."""
        data = self.model_dump(mode="json")
        for key in ("snapshot", "resumed_from"):
            if data[key] is None:
                del data[key]
        if not data["artifacts_missing"]:
            del data["artifacts_missing"]
        if data["job"] is not None:
            for key in ("data", "token"):
                if not data["job"][key]:
                    del data["job"][key]
        return data

    def evolve(self, **changes: Any) -> RunRecord:
        """A copy with ``changes`` applied and validated."""
        return RunRecord.model_validate({**self.model_dump(), **changes})
