"""What the machines a target made for a run cost: ``target.spend.json`` beside ``target.note``.

A target that pays for machines per run (a pod for training, another for the commands
after it) keeps ``layout.TARGET_SPEND`` in the run directory at home, rewritten with
:func:`write_spend` whenever a machine's price, start or end changes; the Prometheus
endpoint reads it with :func:`run_spend` (``overbrainer_runpod_spend_usd``).

A file, not an ``Executor`` method: the reader is a scrape, every few seconds, for every
run, often in another process than the one holding the executor (``watch`` serving
metrics while ``train`` follows a run), and after the executor and its machine are gone.
Read as a file it loads no plugin, opens no connection and stays true once the machine is
deleted, as ``target.note`` does for ``runs ls``. It holds each machine's rate and start
rather than a figure, so that a running machine's spend grows between two writes::

    {"version": 1, "machines": [
      {"name": "training", "usd_per_hour": 0.44, "started": 1758551405.0, "spent_usd": 1.25},
      {"name": "after-training", "usd_per_hour": 3.6, "started": 1758555005.0}]}
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from overbrainer import files
from overbrainer.errors import UserError
from overbrainer.job.layout import TARGET_SPEND

VERSION = 1
LIMIT = 1 << 20
"""A spend record is a few hundred bytes: a larger file is not one, and is not read."""


@dataclass(frozen=True)
class MachineSpend:
    """One machine a run paid for: ``spent_usd`` once it is gone (the final figure); while
    it runs, ``usd_per_hour`` since ``started`` (Unix seconds). A field not known is None."""

    name: str
    usd_per_hour: float | None = None
    started: float | None = None
    spent_usd: float | None = None

    def __post_init__(self) -> None:
        for key in ("usd_per_hour", "spent_usd", "started"):
            value = getattr(self, key)
            if value is not None and (not _number(value) or value < 0):
                raise ValueError(f"MachineSpend.{key} must be a finite number >= 0 or None")

    def at(self, now: float) -> float | None:
        """USD spent by ``now``: the final figure, else the rate since the start, else None."""
        if self.spent_usd is not None:
            return self.spent_usd
        if self.usd_per_hour is not None and self.started is not None:
            return self.usd_per_hour * max(now - self.started, 0.0) / 3600
        return None


def write_spend(run_dir: Path, machines: Iterable[MachineSpend]) -> None:
    """Replace the run's spend record (atomically, never through a link) with ``machines``."""
    record = {
        "version": VERSION,
        "machines": [
            {key: value for key, value in vars(machine).items() if value is not None}
            for machine in machines
        ],
    }
    text = json.dumps(record, indent=2) + "\n"
    files.write_atomic(run_dir / TARGET_SPEND, text.encode(), f"{run_dir.name}/{TARGET_SPEND}")


def read_spend(run_dir: Path) -> list[MachineSpend] | None:
    """The machines of the run's spend record; None when it has none, or none that can be
    read (a FIFO, a link, not JSON): a scrape never blocks or fails on one run's file.
    An entry that is not valid is left out."""
    try:
        data = files.read_regular(run_dir / TARGET_SPEND, TARGET_SPEND, LIMIT, follow=False)
        record = json.loads(data) if data is not None else None
    except (UserError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("machines"), list):
        return None
    return [m for m in map(_machine, record["machines"]) if m is not None]


def run_spend(run_dir: Path, now: float) -> float | None:
    """USD the run's machines spent by ``now``, all of them; None when none says."""
    figures = [m.at(now) for m in read_spend(run_dir) or ()]
    known = [figure for figure in figures if figure is not None]
    return sum(known) if known else None


def _machine(entry: Any) -> MachineSpend | None:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        return None
    try:
        return MachineSpend(
            entry["name"], entry.get("usd_per_hour"), entry.get("started"), entry.get("spent_usd")
        )
    except ValueError:
        return None


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
