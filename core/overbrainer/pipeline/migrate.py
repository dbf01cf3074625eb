"""``overbrainer migrate``: a project's files brought to the format this version writes.

Projects come from older versions of this tool and from the reference tool. Each change is
planned first, said (``would …`` with ``--dry-run``), then made; the format version is
written last, so an interrupted migration runs again, and a migrated project has nothing
left to migrate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.config.load import CONFIG_FILE
from overbrainer.errors import UserError
from overbrainer.pipeline.history import HISTORY
from overbrainer.pipeline.ids import subtopic_id
from overbrainer.pipeline.records import (
    REJECTED,
    REJECTED_REASONS,
    DataFiles,
    rejected_text,
)

FORMAT = 1
STATE_DIR = HISTORY.parent.name
VERSION_FILE = "version"
GITIGNORE = ".gitignore"
STATE_ENTRY = "/.overbrainer/"
_STATE_ENTRIES = {".overbrainer", ".overbrainer/", "/.overbrainer", STATE_ENTRY}
_REJECTED_QUESTION = ("id", "topic", "subtopic_id", "text")


@dataclass(frozen=True)
class Change:
    """One change: its description (``done``/``planned`` verbs) and how to make it."""

    done: str
    planned: str
    what: str
    make: Callable[[], None]

    def line(self, dry_run: bool) -> str:
        return f"{self.planned if dry_run else self.done} {self.what}"


def migrate(project_dir: Path, dry_run: bool) -> list[str]:
    """Migrate the project (or with ``dry_run`` only say how); the lines to print."""
    version = _version(project_dir)
    if version is not None and version > FORMAT:
        raise UserError(
            f"this project uses format {version}, newer than the format {FORMAT} this "
            "overbrainer knows: upgrade overbrainer"
        )
    changes = [
        change
        for change in (
            _hub_model_id(project_dir),
            _gitignore(project_dir),
            _rejected(project_dir),
            _history(project_dir),
            None if version == FORMAT else _write_version(project_dir),
        )
        if change is not None
    ]
    if not changes:
        return ["nothing to migrate"]
    lines = []
    for change in changes:
        if not dry_run:
            change.make()
        lines.append(change.line(dry_run))
    return lines


def _version(project_dir: Path) -> int | None:
    raw = files.read_regular(project_dir / STATE_DIR / VERSION_FILE, f"{STATE_DIR}/{VERSION_FILE}",
                             1 << 10)  # fmt: skip
    if raw is None:
        return None
    text = raw.decode("utf-8", "replace").strip()
    if not text.isdigit():
        raise UserError(f"{STATE_DIR}/{VERSION_FILE} does not hold a format number")
    return int(text)


def _write_version(project_dir: Path) -> Change:
    def make() -> None:
        state = project_dir / STATE_DIR
        state.mkdir(exist_ok=True)
        _write(state / VERSION_FILE, f"{FORMAT}\n".encode(), f"{STATE_DIR}/{VERSION_FILE}")

    return Change("wrote", "would write", f"{STATE_DIR}/{VERSION_FILE}: format {FORMAT}", make)


def _hub_model_id(project_dir: Path) -> Change | None:
    """The deprecated ``training.hub_model_id`` moved to ``[hub] repo`` (a repo already
    set there stays, and the old key is only dropped), comments kept."""
    import tomlkit

    path = project_dir / CONFIG_FILE
    try:
        raw = files.read_regular(path, CONFIG_FILE, files.RECORD_LIMIT)
        document = tomlkit.parse(raw.decode("utf-8")) if raw is not None else None
    except (UserError, ValueError):
        document = None
    if document is None:
        return None  # `config check` says what is wrong with it
    training = document.get("training")
    if not isinstance(training, dict) or "hub_model_id" not in training:
        return None
    value = str(training["hub_model_id"])
    hub = document.get("hub")
    kept = isinstance(hub, dict) and "repo" in hub

    def make() -> None:
        del training["hub_model_id"]
        if not kept:
            table = hub if isinstance(hub, dict) else tomlkit.table()
            table["repo"] = value
            table.setdefault("private", True)
            table.setdefault("after_training", True)
            if not isinstance(hub, dict):
                document["hub"] = table
        _write(path, tomlkit.dumps(document).encode("utf-8"), CONFIG_FILE)

    if kept:
        return Change("removed", "would remove", "training.hub_model_id ([hub] repo is set)", make)
    what = f'training.hub_model_id to [hub] repo = "{value}" (private, after_training)'
    return Change("moved", "would move", what, make)


def _gitignore(project_dir: Path) -> Change | None:
    path = project_dir / GITIGNORE
    raw = files.read_regular(path, GITIGNORE, files.RECORD_LIMIT) or b""
    lines = raw.decode("utf-8", "replace").split("\n")
    if any(line.strip() in _STATE_ENTRIES for line in lines):
        return None

    def make() -> None:
        prefix = b"" if not raw or raw.endswith(b"\n") else b"\n"
        _write(path, raw + prefix + STATE_ENTRY.encode() + b"\n", GITIGNORE)

    return Change("added", "would add", f"{STATE_ENTRY} to {GITIGNORE}", make)


def _rejected(project_dir: Path) -> Change | None:
    """``rejected.jsonl`` in the reference tool's shape, why each text was set aside moved
    to ``rejected.reasons.jsonl``."""
    data = DataFiles(project_dir)
    if not data.path(REJECTED).exists():
        return None
    records = data.read(REJECTED)
    reshaped = [_reference_shape(record) for record in records]
    if reshaped == records:
        return None
    reasons = [
        {"id": str(record.get("id", "")), "kind": record["kind"], "topic": record["topic"],
         "reason": record["reason"]}
        for record in records
        if isinstance(record.get("reason"), str)
    ]  # fmt: skip

    def make() -> None:
        if reasons:
            known = data.read(REJECTED_REASONS) if data.path(REJECTED_REASONS).exists() else []
            data.rewrite(REJECTED_REASONS, [*known, *reasons])
        data.rewrite(REJECTED, reshaped)

    changed = sum(1 for old, new in zip(records, reshaped, strict=True) if old != new)
    what = f"{changed} record(s) of data/{REJECTED} to the reference tool's shape"
    return Change("rewrote", "would rewrite", what, make)


def _reference_shape(record: dict[str, Any]) -> dict[str, Any]:
    text = rejected_text(record) or ""
    if record["kind"] == "subtopic":
        identifier = record.get("id") or subtopic_id(record["topic"], text)
        return {"kind": "subtopic", "id": identifier, "topic": record["topic"], "name": text}
    if record["kind"] == "question" and all(k in record for k in _REJECTED_QUESTION):
        return {"kind": "question", **{k: record[k] for k in _REJECTED_QUESTION}}
    return record  # a question without its ids cannot be made whole: left as it is


def _history(project_dir: Path) -> Change | None:
    """Split lines as the reference tool writes them: ``done`` 0 and ``cost`` null."""
    path = project_dir / HISTORY
    raw = files.read_regular(path, str(HISTORY))
    if raw is None:
        return None
    entries: list[Any] = []
    changed = 0
    # Lines end with \n only (a record may hold U+2028, which str.splitlines cuts at).
    for line in raw.removesuffix(b"\n").split(b"\n"):
        try:
            entry = json.loads(line)
        except ValueError:
            entries.append(line)  # kept byte for byte
            continue
        split = isinstance(entry, dict) and entry.get("stage") == "split"
        if split and (entry.get("done") != 0 or entry.get("cost") is not None):
            entry = {**entry, "done": 0, "cost": None}
            changed += 1
        entries.append(entry)
    if not changed:
        return None

    def make() -> None:
        text = b"".join(
            (e if isinstance(e, bytes) else json.dumps(e, ensure_ascii=False).encode()) + b"\n"
            for e in entries
        )
        _write(path, text, str(HISTORY))

    what = f"{changed} split line(s) of {HISTORY} (done 0, cost null)"
    return Change("rewrote", "would rewrite", what, make)


def _write(path: Path, data: bytes, shown: str) -> None:
    files.write_atomic(path, data, shown)  # a full disk or a directory there: said, not raised
