"""The records of served providers: one file a provider, written before the engine can be
lost, so a later command finds it (an orphan of a killed command, a ``serve up``)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.serving import ServeHandle

DIR = "serve"


@dataclass(frozen=True)
class ServeRecord:
    """A serve: whose provider, where, what, since when, and who ends it."""

    provider: str
    target: str
    engine: str
    model: str
    started: float
    """When it was started (seconds since the epoch)."""
    owner: int
    """The pid of the command that started it: it ends it when it ends."""
    kept: bool
    """Kept up across commands (``serve up``): only ``serve down`` or its idle limit end it."""
    handle: ServeHandle
    price_per_hour: float = 0.0
    """What its target costs an hour (USD) as it started: its hours' price in the history."""
    for_run: str | None = ""
    """The run it is lent to (its online teacher, before the job starts; kept once the
    command detached): not an orphan while that run may ask it, and that run's end ends it.
    "" when it is its command's or the user's (``serve up``); None in a record written before
    runs were named here, which a handed run's end still ends."""

    def to_json(self) -> bytes:
        data: dict[str, Any] = {
            "provider": self.provider, "target": self.target, "engine": self.engine,
            "model": self.model, "started": self.started, "owner": self.owner,
            "kept": self.kept, "handle": self.handle.to_dict(),
            "price_per_hour": self.price_per_hour, "for_run": self.for_run,
        }  # fmt: skip
        return json.dumps(data, indent=2).encode("utf-8") + b"\n"

    def orphaned(self) -> bool:
        """Not kept, and the command that started it is gone (``kill -9``)."""
        return not self.kept and not _alive(self.owner)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ServeRecords:
    """The serve records of a project, under its state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = state_dir / DIR

    def path(self, provider: str) -> Path:
        return self.dir / f"{provider}.json"

    def save(self, record: ServeRecord) -> None:
        files.write_atomic(
            self.path(record.provider), record.to_json(), f"serve record of `{record.provider}`"
        )

    def load(self, provider: str) -> ServeRecord | None:
        shown = f".overbrainer/{DIR}/{provider}.json"
        text = files.read_text(self.path(provider), shown)
        if text is None:
            return None
        try:
            data = json.loads(text)
            record = ServeRecord(
                provider=str(data["provider"]), target=str(data["target"]),
                engine=str(data["engine"]), model=str(data["model"]),
                started=float(data["started"]), owner=int(data["owner"]),
                kept=bool(data["kept"]), handle=ServeHandle.from_dict(data["handle"]),
                price_per_hour=float(data.get("price_per_hour", 0.0)),
                for_run=None if data.get("for_run") is None else str(data["for_run"]),
            )  # fmt: skip
            if not (math.isfinite(record.price_per_hour) and record.price_per_hour >= 0):
                raise ValueError("price_per_hour is not a price")
        except (ValueError, KeyError, TypeError) as error:
            raise UserError(f"{shown} is not a valid serve record ({error}): remove it") from None
        return record

    def remove(self, provider: str) -> None:
        self.path(provider).unlink(missing_ok=True)

    def providers(self) -> list[str]:
        """The providers with a record, sorted."""
        if not self.dir.is_dir():
            return []
        return sorted(path.stem for path in self.dir.glob("*.json"))
