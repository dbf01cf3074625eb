"""What the dataset left out, and why: ``data/rejected.jsonl`` (the item: a question the
generator repeated, an example decontamination dropped, an answer ``select`` did not keep)
beside ``data/rejected.reasons.jsonl`` (why), read together for ``dataset rejected``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from overbrainer.pipeline.records import REJECTED, REJECTED_REASONS, DataFiles


@dataclass
class Rejection:
    """One rejected item: its kind (``question`` or ``answer``), id, topic, text, and the
    reasons recorded for it, oldest first (none for a record the reference tool wrote)."""

    kind: str
    id: str
    topic: str
    text: str
    reasons: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind, "id": self.id, "topic": self.topic, "text": self.text,
            "reasons": self.reasons,
        }  # fmt: skip


def rejections(project_dir: Path, reason: str | None = None) -> list[Rejection]:
    """The rejected items in the order they were recorded, each with its reasons; with
    ``reason``, those with a reason starting with it (``contaminated``, ``not selected``)."""
    data = DataFiles(project_dir)
    found: dict[tuple[str, str], Rejection] = {}
    if data.path(REJECTED).is_file():
        for record in data.read(REJECTED):
            key = (record["kind"], record["id"])
            text = record.get("text")
            found.setdefault(
                key,
                Rejection(key[0], key[1], str(record.get("topic", "")), str(text or "")),
            )
    if data.path(REJECTED_REASONS).is_file():
        for record in data.read(REJECTED_REASONS):
            key = (record["kind"], record["id"])
            item = found.setdefault(key, Rejection(key[0], key[1], str(record["topic"]), ""))
            if record["reason"] not in item.reasons:
                item.reasons.append(record["reason"])
    items = list(found.values())
    if reason is not None:
        items = [item for item in items if any(r.startswith(reason) for r in item.reasons)]
    return items
