"""A run's curves, read from its ``metrics.jsonl``: train loss, eval loss, learning rate,
gradient norm and a KD run's two terms against step, plus the figures a chart marks
(snapshot, resume point)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import FOLLOWED_METRICS, METRICS_FILE
from overbrainer.job.metrics import read_events
from overbrainer.runs.figures import trained_on_logits

Point = tuple[int, float]

CURVES = (
    "loss", "eval_loss", "learning_rate", "grad_norm",
    "kd_loss", "ce_loss", "eval_kd_loss", "eval_ce_loss",
)
"""The numbers of a metrics ``log`` line a chart draws."""



def metrics_path(run_dir: Path) -> Path:
    """The run's ``metrics.jsonl`` when it is here, else the lines its follower saw."""
    path = run_dir / METRICS_FILE
    followed = run_dir / FOLLOWED_METRICS
    return followed if not path.exists() and followed.exists() else path


@dataclass
class Curves:
    """What a chart of one run shows. Steps are the trainer's global steps, so a resumed
    run's curves continue its parent's."""

    run_id: str
    loss: list[Point] = field(default_factory=list)
    eval_loss: list[Point] = field(default_factory=list)
    learning_rate: list[Point] = field(default_factory=list)
    grad_norm: list[Point] = field(default_factory=list)
    kd_loss: list[Point] = field(default_factory=list)
    ce_loss: list[Point] = field(default_factory=list)
    eval_kd_loss: list[Point] = field(default_factory=list)
    eval_ce_loss: list[Point] = field(default_factory=list)
    """The two terms of a KD run's loss and eval loss, where its trainer logged them."""
    max_steps: int | None = None
    step: int | None = None
    epoch: float | None = None
    started: float | None = None
    ended: float | None = None
    last_time: float | None = None
    snapshot_step: int | None = None
    resumed_from: str | None = None
    resume_step: int | None = None
    kd: bool = False
    """The losses are the KD trainer's (its KL to the parent's top-k plus cross-entropy)."""

    @property
    def has_loss(self) -> bool:
        return bool(self.loss or self.eval_loss)

    @property
    def has_kd_terms(self) -> bool:
        return bool(self.kd_loss or self.ce_loss or self.eval_kd_loss or self.eval_ce_loss)

    def last(self, name: str) -> float | None:
        """The last value of the curve ``name`` (``loss``, ``eval_loss``, …), or None."""
        points: list[Point] = getattr(self, name)
        return points[-1][1] if points else None

    def add(self, event: dict[str, Any]) -> None:
        """Take in one metrics event; anything malformed in it is ignored."""
        kind = event.get("event")
        when = _number(event.get("time"))
        if when is not None:
            self.last_time = when
            if kind == "begin" and self.started is None:
                self.started = when
            if kind == "end":
                self.ended = when
        total = _count(event.get("max_steps"))
        if total:
            self.max_steps = total
        step = _count(event.get("step"))
        if step is None or kind not in ("log", "end"):
            return
        self.step = step if self.step is None else max(self.step, step)
        epoch = _number(event.get("epoch"))
        if epoch is not None:
            self.epoch = epoch
        for name in CURVES:
            value = _number(event.get(name))
            if value is not None:
                getattr(self, name).append((step, value))


def read_curves(run_dir: Path, run_id: str) -> Curves | None:
    """The curves of the run in ``run_dir``; None when it has no ``metrics.jsonl`` yet."""
    path = metrics_path(run_dir)
    try:
        source = files.open_read(path, path.name)
    except UserError:  # a FIFO or a device: no curves, never a wait
        return None
    if source is None:
        return None
    curves = Curves(run_id, kd=trained_on_logits(run_dir))
    with source:
        for event in read_events(source, path.name):
            curves.add(event)
    return curves


def _count(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None
