"""The training commands, by the names the CLI and ``watch`` call them.

Each job lives in a module of its own: :mod:`~overbrainer.train.new_run` (what a new run
needs, resume checks), :mod:`~overbrainer.train.start` (``train``),
:mod:`~overbrainer.train.follow` (``attach``), :mod:`~overbrainer.train.stop` (``stop``,
``cancel``), :mod:`~overbrainer.train.report`, and :mod:`~overbrainer.train.executors`
(creating and releasing a target's executor). The CLI wraps them with the project lock,
and ``run`` calls :func:`train` after ``split`` while holding it already.
"""

from __future__ import annotations

from overbrainer.train.executors import Held, held_executor, holding
from overbrainer.train.follow import attach, follow_held, follow_to_end
from overbrainer.train.new_run import Plan, Prepared, plan_run, target_of, training_of
from overbrainer.train.report import Trained, report
from overbrainer.train.start import prepare, start, train
from overbrainer.train.stop import cancel, cancel_for_holder, stop, stop_for_holder

__all__ = [
    "Held",
    "Plan",
    "Prepared",
    "Trained",
    "attach",
    "cancel",
    "cancel_for_holder",
    "follow_held",
    "follow_to_end",
    "held_executor",
    "holding",
    "plan_run",
    "prepare",
    "report",
    "start",
    "stop",
    "stop_for_holder",
    "target_of",
    "train",
    "training_of",
]
