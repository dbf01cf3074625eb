"""``.overbrainer/batches.jsonl``: every batch sent to a provider, recorded before it is paid.

One line per change, appended: the first names the batch's questions (``submitting``,
written before the provider is asked to start it; ``asked`` once it is), a later one its id
(``submitted``), the last how it ended (``ended``, with the items that failed) or that the
provider never started it (``abandoned``; ``forgotten`` too when the user gave it up).
``cancelled`` records an ``answers --cancel``, ``held`` why the provider will not give it.
A line's fields update the batch's earlier ones. A batch that is ``submitting`` or
``submitted`` is live: its questions are never sent again while it is, and the next
``answers`` or ``run`` polls it, whatever stopped the one that sent it.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from overbrainer.errors import UserError
from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl

LEDGER = Path(".overbrainer") / "batches.jsonl"
KEY_BYTES = len("ob-") + 16
"""The length of a batch's key: ``ob-`` and 16 random hex digits."""


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
    asked: bool | None = None
    """Whether the provider was asked to make it: until then a crash leaves its questions
    free to send. None on a line written before this was recorded."""
    held: str | None = None
    """Why the provider will not give it (a 404, results off its host), once reported: its
    questions stay held until it gives it or ``answers --forget-batch`` gives them up."""

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
            asked=False,
        )
        line = {"key": batch.key, "state": batch.state.value, "provider": provider,
                "model": model, "questions": questions, "at": batch.at,
                "asked": False}  # fmt: skip
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

    def forget(self, name: str) -> Batch:
        """Give up the live batch ``name`` (its id or key): its questions are free to be
        sent again. A ``UserError`` naming the live ones when none is ``name``."""
        live = self.live()
        for batch in live:
            if name in (batch.batch_id, batch.key):
                self.update(batch, State.ABANDONED, forgotten=True)
                return batch
        known = ", ".join(batch.name for batch in live) or "none"
        raise UserError(f"{LEDGER} has no live batch `{name}` (live: {known})")

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
        asked=asked if isinstance(asked := record.get("asked"), bool) else None,
        held=held if isinstance(held := record.get("held"), str) else None,
        projected_usd=float(record.get("projected_usd") or 0.0),
    )
