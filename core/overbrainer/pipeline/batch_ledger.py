"""``.overbrainer/batches.jsonl``: every batch sent to a provider, recorded before it is paid.

One line per change, appended: the first names the batch's questions (``submitting``,
written before the provider is asked to start it), a later one its id (``submitted``),
the last how it ended (``ended``, with the items that failed) or that the provider never
started it (``abandoned``). A line's fields update the batch's earlier ones. A batch that is
``submitting`` or ``submitted`` is live: its questions are never sent again while it is,
and the next ``answers`` or ``run`` polls it, whatever stopped the one that sent it.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl

LEDGER = Path(".overbrainer") / "batches.jsonl"


class State(StrEnum):
    SUBMITTING = "submitting"
    SUBMITTED = "submitted"
    ENDED = "ended"
    ABANDONED = "abandoned"


LIVE = frozenset({State.SUBMITTING, State.SUBMITTED})


def _is_line(record: dict[str, Any]) -> bool:
    questions = record.get("questions")
    return (
        isinstance(record.get("key"), str)
        and record.get("state") in set(State)
        and (questions is None or isinstance(questions, list))
    )


@dataclass
class Batch:
    """One batch as its lines add up: ``key`` is the project's name for it, ``batch_id``
    the provider's once it is known."""

    key: str
    state: State
    provider: str
    model: str
    questions: list[str]
    at: float
    """When it was recorded (Unix seconds): where to look for it if its id never came."""
    batch_id: str | None = None
    prepared: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    projected_usd: float = 0.0
    """What it can cost at most, recorded when it was sent: spent, for every other stage's
    budget, until it is collected."""
    cancelled: bool = False
    """Cancelled by ``answers --cancel``: its items without an answer are not tried again
    when it is collected (a later ``answers`` asks them anew)."""

    @property
    def live(self) -> bool:
        return self.state in LIVE

    @property
    def name(self) -> str:
        """How messages name it: the provider's id, else the project's key."""
        return self.batch_id or self.key


class Ledger:
    """The batches of the project at ``project_dir``."""

    def __init__(self, project_dir: Path) -> None:
        self.path = project_dir / LEDGER

    def batches(self) -> list[Batch]:
        """Every batch, oldest first."""
        merged: dict[str, dict[str, Any]] = {}
        for line in read_jsonl(self.path, str(LEDGER), _is_line):
            merged.setdefault(line["key"], {}).update(line)
        found = []
        for record in merged.values():
            try:
                found.append(_batch(record))
            except (KeyError, TypeError, ValueError):
                continue  # a key with no first line (a hand edit): nothing to poll
        return found

    def live(self) -> list[Batch]:
        return [batch for batch in self.batches() if batch.live]

    def open(
        self, provider: str, model: str, questions: list[str], projected_usd: float = 0.0
    ) -> Batch:
        """Record a new batch of ``questions``, before anything is sent."""
        batch = Batch(
            key=f"ob-{secrets.token_hex(8)}",
            state=State.SUBMITTING,
            provider=provider,
            model=model,
            questions=questions,
            at=time.time(),
            projected_usd=projected_usd,
        )
        line = {"key": batch.key, "state": batch.state.value, "provider": provider,
                "model": model, "questions": questions, "at": batch.at}  # fmt: skip
        if projected_usd:
            line["projected_usd"] = round(projected_usd, 6)
        self._append(line)
        return batch

    def update(self, batch: Batch, state: State | None = None, **fields: Any) -> None:
        """Record a change of ``batch`` (and make it in ``batch``)."""
        if state is not None:
            batch.state = state
        for name, value in fields.items():
            setattr(batch, name, value)
        self._append({"key": batch.key, "state": batch.state.value, **fields})

    def _append(self, line: dict[str, Any]) -> None:
        with JsonlWriter(self.path, _is_line, str(LEDGER)) as writer:
            writer.append(line)
        # On disk before the provider is asked anything: a closed laptop keeps it too.
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _batch(record: dict[str, Any]) -> Batch:
    questions = record["questions"]
    if not all(isinstance(q, str) for q in questions):
        raise TypeError("questions")
    batch_id = record.get("batch_id")
    return Batch(
        key=record["key"],
        state=State(record["state"]),
        provider=str(record["provider"]),
        model=str(record["model"]),
        questions=questions,
        at=float(record["at"]),
        batch_id=batch_id if isinstance(batch_id, str) else None,
        prepared=dict(record.get("prepared") or {}),
        failed=dict(record.get("failed") or {}),
        cancelled=record.get("cancelled") is True,
        projected_usd=float(record.get("projected_usd") or 0.0),
    )
