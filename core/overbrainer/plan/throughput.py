"""What a run this project made shows of its training's speed: the epochs its metrics
reached and the time they took. ``plan`` turns it into tokens per second (its train set's
tokens times those epochs over that time), which it prefers to the throughput table's
figure: a guess for a machine it cannot see (a local or ssh target)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from overbrainer import files
from overbrainer.job.layout import FOLLOWED_METRICS, METRICS_FILE, TRAIN_FILE
from overbrainer.lines import read_lines
from overbrainer.runs.store import RunStore


@dataclass(frozen=True)
class RunSpan:
    """How far a run's training went (``epochs``) in ``seconds``; its train set at
    ``train_file``: its tokens times ``epochs`` over ``seconds`` is its throughput."""

    run_id: str
    train_file: Path
    epochs: float
    seconds: float


def last_span(project_dir: Path, target: str) -> RunSpan | None:
    """The newest run on ``target`` whose metrics show part of an epoch done (a resumed run
    is left out: its clock started at the resume); None without one."""
    store = RunStore(project_dir)
    for record in reversed(store.list()):
        if record.target != target or record.resumed_from is not None:
            continue
        run_dir = store.run_dir(record.id)
        span = _epochs_and_seconds(run_dir)
        if span is not None:
            return RunSpan(record.id, run_dir / TRAIN_FILE, *span)
    return None


def _epochs_and_seconds(run_dir: Path) -> tuple[float, float] | None:
    """The last epoch a ``log`` line reached and the seconds since ``begin``."""
    for name in (METRICS_FILE, FOLLOWED_METRICS):
        file = files.open_read(run_dir / name, name)
        if file is None:
            continue
        begin = epoch = last = None
        with file:
            for line in read_lines(file, name):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(event, dict) or not _number(event.get("time")):
                    continue
                if event.get("event") == "begin" and begin is None:
                    begin = float(event["time"])
                elif event.get("event") == "log" and _number(event.get("epoch")):
                    epoch, last = float(event["epoch"]), float(event["time"])
        if begin is not None and epoch and last is not None and last > begin:
            return epoch, last - begin
    return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
        value
    )
