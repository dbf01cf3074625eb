"""What ``runs ls`` adds to the reference tool's line: how long the run took, its last
loss and eval loss, and whether it was exported or compared.

Read cheaply, since ``runs ls`` lists a thousand runs in about the time of ``--help``: one
read of the run's directory, the tail of ``metrics.jsonl`` (only the lines that hold
a figure are parsed), and a look into ``exports/`` and ``compares/`` where they exist.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.duration import duration
from overbrainer.errors import UserError
from overbrainer.files import RECORD_LIMIT
from overbrainer.job.layout import CONFIG_FILE, FOLLOWED_METRICS, METRICS_FILE

TAIL_BYTES = 32 << 10
"""How much of the end of ``metrics.jsonl`` is read: the last figures are there."""
EXPORT_RECORD = "export.json"
COMPARE_RECORD = "compare.json"


@dataclass(frozen=True, slots=True)
class Figures:
    """A run's duration (seconds), last train and eval loss, how many exports and compares
    it has, and whether its losses are the KD trainer's; None where its files do not say."""

    seconds: float | None = None
    loss: float | None = None
    eval_loss: float | None = None
    exports: int = 0
    compares: int = 0
    kd: bool = False

    def text(self) -> str:
        """The fields ``runs ls`` appends, each labelled, "" for none."""
        parts = []
        if self.seconds is not None:
            parts.append(f"took {duration(self.seconds)}")
        kd = " (KD)" if self.kd else ""  # the KD trainer's sum, as the table marks it
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}{kd}")
        if self.eval_loss is not None:
            parts.append(f"eval_loss {self.eval_loss:.4f}{kd}")
        if self.exports:
            parts.append("exported")
        if self.compares:
            parts.append("compared")
        return "".join(f"  {part}" for part in parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "duration_s": None if self.seconds is None else round(self.seconds, 1),
            "loss": self.loss,
            "eval_loss": self.eval_loss,
            "exports": self.exports,
            "compares": self.compares,
            "loss_kind": "kd" if self.kd else "ce",
        }


def figures_of(directory: str, created: str) -> Figures:
    """The figures of the run in ``directory``, created at ``created``: its duration runs
    to its last metrics line (so far, for a running run; none before its first line)."""
    try:
        names = set(os.listdir(directory))  # one read of the directory: no stat a file
    except OSError:
        return Figures()
    last = loss = eval_loss = None
    for metrics in (METRICS_FILE, FOLLOWED_METRICS):
        if metrics in names:
            last, loss, eval_loss = _metrics(os.path.join(directory, metrics))
            break
    start = _timestamp(created)
    seconds = last - start if start is not None and last is not None and last >= start else None
    exports = int(EXPORT_RECORD in names)
    if "exports" in names:
        exports += len(records_of(directory, "exports", EXPORT_RECORD))
    compares = len(records_of(directory, "compares", COMPARE_RECORD)) if "compares" in names else 0
    kd = CONFIG_FILE in names and trained_on_logits(directory)
    return Figures(seconds, loss, eval_loss, exports, compares, kd)


def trained_on_logits(directory: str | os.PathLike[str]) -> bool:
    """Whether the run in ``directory`` trains with Axolotl's KD trainer (its losses are
    KD's), from its ``axolotl.yaml``: parsed only when it names ``kd_trainer``, so a
    listing of a thousand SFT runs imports no YAML parser."""
    try:
        text = files.read_regular(Path(directory) / CONFIG_FILE, CONFIG_FILE, RECORD_LIMIT)
    except UserError:  # a FIFO, a device, too large: not a config this reads
        return False
    if text is None or b"kd_trainer" not in text:
        return False
    import yaml

    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(config, dict) and bool(config.get("kd_trainer"))


def made_of(directory: str) -> dict[str, list[str]]:
    """What was made of the run after training: ``exports`` and ``compares``, by id (an
    ``export.json`` of the run's own directory is the export ``.``)."""
    exports = ["."] if os.path.isfile(os.path.join(directory, EXPORT_RECORD)) else []
    return {
        "exports": exports + records_of(directory, "exports", EXPORT_RECORD),
        "compares": records_of(directory, "compares", COMPARE_RECORD),
    }


def records_of(directory: str, kind: str, record: str) -> list[str]:
    """The ids of the run's ``<kind>/<id>/<record>`` (exports, compares), oldest first."""
    try:
        entries = sorted(os.scandir(os.path.join(directory, kind)), key=lambda e: e.name)
    except OSError:
        return []
    return [
        entry.name
        for entry in entries
        if entry.is_dir(follow_symlinks=False) and os.path.isfile(os.path.join(entry.path, record))
    ]


def _timestamp(created: str) -> float | None:
    try:
        return datetime.fromisoformat(created).timestamp()
    except ValueError:
        return None


def _metrics(path: str) -> tuple[float | None, float | None, float | None]:
    """The last line's time and the last loss and eval loss, from the tail of the metrics
    file at ``path`` (missing, a link or unreadable: nothing).

    The lines are found by searching the bytes backwards, so a listing parses three lines
    a run, not the tail's hundreds."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None, None, None
    try:
        offset = max(os.fstat(fd).st_size - TAIL_BYTES, 0)
        tail = os.pread(fd, TAIL_BYTES, offset)
    except OSError:
        return None, None, None
    finally:
        os.close(fd)
    if offset:
        tail = tail[tail.find(b"\n") + 1 :]  # the first line was cut by the read
    body = tail.rstrip(b"\r\n")
    last = _number(_event(body[body.rfind(b"\n") + 1 :]), "time")
    return last, _last(body, "loss"), _last(body, "eval_loss")


def _last(body: bytes, key: str) -> float | None:
    """The value of ``key`` in the last line of ``body`` that holds it."""
    at = body.rfind(b'"' + key.encode() + b'"')
    if at < 0:
        return None
    end = body.find(b"\n", at)
    line = body[body.rfind(b"\n", 0, at) + 1 : end if end >= 0 else None]
    return _number(_event(line), key)


def _event(line: bytes) -> dict[str, Any]:
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def _number(event: dict[str, Any], key: str) -> float | None:
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
