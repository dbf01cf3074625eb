"""``runs/<id>/pod.json``: what the client knows of a run's pod, saved before every create.

Never a private key nor the API key: the host key is its public half, the client key
stays in ``runs/<id>/ssh/`` (mode 0600, never uploaded).
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from overbrainer.plugin import UserError, layout
from overbrainer.plugin.files import MachineSpend, mkdir_nofollow, read_regular, write_spend

POD_FILE = "pod.json"
SSH_DIR = "ssh"
AFTER_DIR = "after-pod"
"""``runs/<id>/after-pod/``: the record, SSH files and logs of the run's pod for the
commands after training (``overbrainer_runpod.after``)."""


class PodState(StrEnum):
    CREATING = "creating"
    PROVISIONING = "provisioning"
    READY = "ready"
    RUNNING = "running"
    AWAITING_RETRIEVAL = "awaiting_retrieval"
    KEPT = "kept"
    DELETING = "deleting"
    DELETED = "deleted"


class Attempt(BaseModel):
    """One create call: the GPU type and data center asked for, and how it went."""

    model_config = ConfigDict(extra="ignore")

    name: str
    gpu_type: str
    data_center: str | None = None
    outcome: str = "pending"
    detail: str | None = None


class PodRecord(BaseModel):
    model_config = ConfigDict(extra="ignore")

    version: int = 1
    run_id: str
    state: PodState = PodState.CREATING
    attempts: list[Attempt] = Field(default_factory=list)
    pod_id: str | None = None
    pod_name: str | None = None
    gpu_type: str | None = None
    cost_per_hour: float | None = None
    created: str | None = None
    ready: str | None = None
    deleted: str | None = None
    delete_at: int | None = None
    """When the watchdog deletes the pod at the latest (epoch seconds)."""
    ssh_host: str | None = None
    ssh_port: int | None = None
    ssh_user: str | None = None
    host_key: str | None = None
    """The pod's public host key, ``ssh-ed25519 AAAA...``: pinned in ssh/known_hosts."""
    workdir: str | None = None
    secret: str | None = None
    """The Runpod secret holding the host key, until it is deleted."""
    secret_id: str | None = None
    """Its id, which deleting it takes."""
    keep: bool = False
    deleted_by: str | None = None
    estimated_spend: float | None = None

    def spend(self, until: datetime | None = None) -> float | None:
        """cost/h x hours since the create (to the deletion, or ``until``)."""
        if self.cost_per_hour is None or self.created is None:
            return None
        start = parse_time(self.created)
        end = parse_time(self.deleted) if self.deleted else (until or datetime.now(UTC))
        hours = max((end - start).total_seconds(), 0) / 3600
        return round(self.cost_per_hour * hours, 4)

    def machine(self, name: str) -> MachineSpend:
        """The pod as the run's spend record holds it: its final figure once deleted, else
        its rate since its create."""
        started = parse_time(self.created).timestamp() if self.created else None
        try:
            return MachineSpend(name, self.cost_per_hour, started, self.estimated_spend)
        except ValueError:  # a price no figure can come from: the pod's cost is unknown
            return MachineSpend(name)

    def summary(self) -> str:
        """The pod part of a ``runs ls`` line."""
        if self.state is PodState.DELETED:
            spend = self.estimated_spend
            return f"pod deleted about ${spend:.2f}" if spend is not None else "pod deleted"
        pod = f" {self.pod_id}" if self.pod_id else ""
        rate = f" ${self.cost_per_hour:.2f}/h" if self.cost_per_hour is not None else ""
        return f"pod {self.state.value}{pod}{rate}"


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def pod_path(run_dir: Path) -> Path:
    return run_dir / POD_FILE


def load(run_dir: Path) -> PodRecord | None:
    """The run's pod record; None when it has none."""
    path = pod_path(run_dir)
    data = read_regular(path, str(path), 16 << 20, follow=False)  # no link, FIFO or device
    if data is None:
        return None
    try:
        return PodRecord.model_validate(json.loads(data))
    except (json.JSONDecodeError, UnicodeDecodeError, ValidationError):
        raise UserError(f"{path} is not a valid pod record") from None


def save(run_dir: Path, record: PodRecord) -> None:
    """Write ``pod.json`` atomically (a temporary file, synced, renamed), then the run's
    ``runs ls`` note and spend record from it (and from the run's other pod: training's
    and the one after)."""
    mkdir_nofollow(run_dir, str(run_dir))
    _write(run_dir, POD_FILE, json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
    after = run_dir.name == AFTER_DIR
    note_dir = run_dir.parent if after else run_dir
    training = _quiet_load(note_dir) if after else record
    after_pod = record if after else _quiet_load(run_dir / AFTER_DIR)
    parts = [training.summary()] if training is not None else []
    if after_pod is not None:
        parts.append(f"after-training {after_pod.summary()}")
    _write(note_dir, layout.TARGET_NOTE, "; ".join(parts) + "\n")
    pods = (("training", training), ("after-training", after_pod))
    write_spend(note_dir, [pod.machine(name) for name, pod in pods if pod is not None])


def _quiet_load(run_dir: Path) -> PodRecord | None:
    try:
        return load(run_dir)
    except UserError:
        return None


def _write(run_dir: Path, name: str, text: str) -> None:
    fd, temporary = tempfile.mkstemp(dir=run_dir, prefix=".pod.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, run_dir / name)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
