"""What a followed run says while it trains: stderr lines, and a bar on a terminal.

Off a terminal a step line (loss, pace, time left) is printed at the first step, at each
tenth of the run's steps, and whenever ``HEARTBEAT_S`` passed since the last one; phases
(evaluating, finalizing, merging, retrieving) and job status changes always. On a terminal
a rich progress bar shows step, loss and phase instead of the step lines.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loguru import logger

from overbrainer.redact import redact

LOG_EVERY_S = 10.0
"""How often an evaluation in progress is said again."""
HEARTBEAT_S = 30.0
"""The longest a training goes without a step line, while its steps come."""
PACE_AFTER_S = 1.0
"""The shortest time a pace is measured over."""
SHARES = 10
"""A step line at each tenth of the run's steps."""


@dataclass
class Summary:
    """The latest training figures of a run."""

    step: int | None = None
    max_steps: int | None = None
    epoch: float | None = None
    loss: float | None = None
    eval_loss: float | None = None
    learning_rate: float | None = None
    grad_norm: float | None = None

    def update(self, event: dict[str, Any]) -> None:
        for key in ("step", "max_steps"):
            value = event.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(self, key, value)
        for key in ("epoch", "loss", "eval_loss", "learning_rate", "grad_norm"):
            value = event.get(key)
            if (
                isinstance(value, int | float)
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                setattr(self, key, float(value))

    def describe(self) -> str:
        """``step S/M, epoch E.EE, loss L.LLLL, eval_loss V.VVVV``, with what is known."""
        parts = []
        if self.step is not None:
            parts.append(
                f"step {self.step}/{self.max_steps}" if self.max_steps else f"step {self.step}"
            )
        if self.epoch is not None:
            parts.append(f"epoch {self.epoch:.2f}")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        if self.eval_loss is not None:
            parts.append(f"eval_loss {self.eval_loss:.4f}")
        return ", ".join(parts) if parts else "no training step logged"

    def step_line(self, pace: str | None = None) -> str:
        parts = []
        if self.step is not None and self.max_steps:
            percent = int(100 * self.step / self.max_steps)
            parts.append(f"step {self.step}/{self.max_steps} ({percent}%)")
        elif self.step is not None:
            parts.append(f"step {self.step}")
        if self.epoch is not None:
            parts.append(f"epoch {self.epoch:.2f}")
        if self.loss is not None:
            parts.append(f"loss {self.loss:.4f}")
        if self.learning_rate is not None:
            parts.append(f"lr {self.learning_rate:.2e}")
        if self.grad_norm is not None:
            parts.append(f"grad_norm {self.grad_norm:.3f}")
        if pace:
            parts.append(pace)
        return "train: " + ", ".join(parts)


class TrainingProgress:
    """Turns metric events into progress; ``close`` before printing the final report."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, bar: bool | None = None
    ) -> None:
        self.summary = Summary()
        self.clock = clock
        self._last_log: float | None = None
        self._last_step: int | None = None
        self._phase_said = 0.0
        self._share = -1
        self._phase = "training"
        self._bar = _Bar() if (sys.stderr.isatty() if bar is None else bar) else None

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        if kind in ("begin", "log", "end"):
            self.summary.update(event)
        if kind == "log":
            if self._phase != "training" and event.get("loss") is not None:
                self._phase = "training"
            self._log_step(event)
        elif kind == "eval":
            step, total = event.get("step"), event.get("total")
            self._set_phase("evaluating", f"train: evaluating {step}/{total}", _share(step, total))
        elif kind == "end":
            self._set_phase("finalizing", "train: finalizing (saving model)")
        elif kind == "stage" and event.get("name") == "merge":
            self._set_phase("merging", "train: merging adapter")
        if self._bar is not None:
            self._bar.show(self.summary, self._phase)

    @property
    def current_phase(self) -> str:
        """``training``, ``evaluating``, ``finalizing``, ``merging`` or ``retrieving``."""
        return self._phase

    def phase(self, name: str) -> None:
        """A phase the follower itself enters (``retrieving``)."""
        if name == "retrieving":
            self._set_phase("retrieving", "train: retrieving results")

    def status(self, text: str) -> None:
        self._say(f"train: job {text}")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def _log_step(self, event: dict[str, Any]) -> None:
        if event.get("loss") is None and event.get("eval_loss") is not None:
            self._say(f"train: step {self.summary.step}, eval_loss {self.summary.eval_loss:.4f}")
            return
        now, step = self.clock(), self.summary.step
        if not self._step_line_due(now, step):
            return
        pace = self._pace(now, step)
        self._last_log, self._last_step = now, step
        if self._bar is None:
            self._say(self.summary.step_line(pace))

    def _step_line_due(self, now: float, step: int | None) -> bool:
        if self._last_log is None or self._last_step is None or step is None:
            return True
        if step <= self._last_step:
            return False
        total = self.summary.max_steps
        if total and (step * SHARES) // total > (self._last_step * SHARES) // total:
            return True
        return now - self._last_log >= HEARTBEAT_S

    def _pace(self, now: float, step: int | None) -> str | None:
        """Steps a second (or seconds a step) since the last line, and the time left."""
        if self._last_log is None or self._last_step is None or step is None:
            return None
        steps, seconds = step - self._last_step, now - self._last_log
        if steps <= 0 or seconds < PACE_AFTER_S:  # steps logged in a burst (the last ones)
            return None
        rate = steps / seconds
        pace = f"{rate:.2f} steps/s" if rate >= 1 else f"{1 / rate:.1f} s/step"
        total = self.summary.max_steps
        if total and total > step:
            left = (total - step) / rate
            pace += f", about {_duration(left)} left"
        return pace

    def _set_phase(self, phase: str, line: str, share: int | None = None) -> None:
        """Say ``line`` when the phase changes; while evaluating, again at each other tenth
        ``share`` of the batches (the last batch is one; a next evaluation's first too) or
        ``LOG_EVERY_S`` after the last line (the bar shows the rest on a terminal)."""
        now = self.clock()
        if phase != self._phase:
            self._phase = phase
        elif phase != "evaluating" or self._bar is not None or not self._due(now, share):
            return
        self._phase_said, self._share = now, -1 if share is None else share
        self._say(line)

    def _due(self, now: float, share: int | None) -> bool:
        """Whether an evaluation's line is due again: another tenth, or time."""
        return (share is not None and share != self._share) or (
            now - self._phase_said >= LOG_EVERY_S
        )

    def _say(self, line: str) -> None:
        if self._bar is not None:
            self._bar.print(line)
        else:
            logger.info(line)


def _share(step: Any, total: Any) -> int | None:
    """Which tenth of an evaluation's ``total`` batches ``step`` is in (10: the last), or
    None when the event does not say."""
    if type(step) is not int or type(total) is not int or total <= 0 or step < 0:
        return None
    return min(step, total) * SHARES // total


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _Bar:
    """A rich progress bar on stderr."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=True)
        self.progress = RichProgress(
            TextColumn("train"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )
        self.task = self.progress.add_task("starting", total=None)
        self.progress.start()

    def show(self, summary: Summary, phase: str) -> None:
        loss = f"loss {summary.loss:.4f}" if summary.loss is not None else ""
        self.progress.update(
            self.task,
            completed=summary.step or 0,
            total=summary.max_steps,
            description=" ".join(part for part in (phase, loss) if part),
        )

    def print(self, line: str) -> None:
        self.console.print(redact(line), markup=False, highlight=False)

    def close(self) -> None:
        self.progress.stop()
