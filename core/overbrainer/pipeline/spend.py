"""``.overbrainer/spend.jsonl``: every paid request, on disk before the next one is admitted.

The history's line of a stage is written when the stage ends, so a ``kill -9``, a full disk
or a closed laptop lost what the stage had paid. This journal is written as the money moves:

- ``{"open": ID, "exec", "stage", "provider", "model", "bound"}`` before a request is sent,
  ``bound`` what it can cost at most (its prompt's bytes and its ``max_tokens``);
- ``{"paid": ID, "input_tokens", "output_tokens", "cost"}`` when its reply is in (``ID``
  closed); a batch's result names its batch (``"batch": KEY``) instead of an open line;
- ``{"close": ID}`` for a request that was refused without a reply (not billed), or
  ``{"close": ID, "lost": true}`` for one whose reply never came (a timeout, a dropped
  connection): possibly billed, so counted at its bound.

A request still open when the file is read again was in flight when its process died: it
too counts at its bound. The project's spend is rebuilt from these lines, and from the
history's costs of the stage executions that came before the journal (see ``spent``).
"""

from __future__ import annotations

import json
import math
import secrets
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from overbrainer.pipeline.batch_ledger import Ledger
from overbrainer.pipeline.history import read_history
from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl

SPEND = Path(".overbrainer") / "spend.jsonl"


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def money(value: object) -> bool:
    """A cost or a price as a record may hold it: a finite number, never negative."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


def _is_line(record: dict[str, Any]) -> bool:
    if isinstance(record.get("open"), str):
        return (
            all(isinstance(record.get(key), str) for key in ("exec", "stage", "provider", "model"))
            and (record.get("bound") is None or money(record["bound"]))
        )
    if isinstance(record.get("paid"), str):
        return (
            _count(record.get("input_tokens"))
            and _count(record.get("output_tokens"))
            and (record.get("cost") is None or money(record["cost"]))
            and (record.get("batch") is None or isinstance(record["batch"], str))
        )
    if isinstance(record.get("close"), str):
        return True
    return isinstance(record.get("exec"), str) and isinstance(record.get("stage"), str)


@dataclass
class Execution:
    """What the journal says one stage execution paid."""

    stage: str
    started_at: str
    provider: str | None = None
    model: str | None = None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    unknown: bool = False
    """Tokens paid at no known price."""
    unsure: int = 0
    """Requests whose reply never came (lost, or in flight when the process died)."""
    unsure_usd: float = 0.0
    """Their bounds, counted in ``cost``."""


@dataclass
class Spending:
    """The journal read back: the spend of each execution, and by batch."""

    executions: dict[str, Execution] = field(default_factory=dict)
    """By execution id (``stage@started_at/nonce``), in the order they first appear."""
    by_batch: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    """What each batch's results cost (by the ledger's key)."""

    @property
    def total(self) -> float:
        return sum(e.cost for e in self.executions.values())

    def covers(self, stage: str, started_at: str) -> bool:
        """Whether the journal holds the requests of the history's line ``stage``/``started_at``."""
        return any(
            e.stage == stage and e.started_at == started_at for e in self.executions.values()
        )


def read_spending(project_dir: Path) -> Spending:
    """The journal of ``project_dir``, added up; an invalid line is an error naming it."""
    found = Spending()
    opened: dict[str, tuple[str, float | None]] = {}
    for line in read_jsonl(project_dir / SPEND, str(SPEND), _is_line):
        if "open" in line:
            execution = _execution(found, line["exec"], line["stage"])
            execution.provider, execution.model = line["provider"], line["model"]
            opened[line["open"]] = (line["exec"], line.get("bound"))
        elif "paid" in line:
            _paid(found, line, opened.pop(line["paid"], None))
        elif "close" in line:
            ticket = opened.pop(line["close"], None)
            if ticket is not None and line.get("lost") is True:
                _lost(found, *ticket)
        else:
            _execution(found, line["exec"], line["stage"])
    for ticket in opened.values():  # in flight when its process died: possibly billed
        _lost(found, *ticket)
    return found


def _execution(found: Spending, exec_id: str, stage: str) -> Execution:
    execution = found.executions.get(exec_id)
    if execution is None:
        started = exec_id.split("@", 1)[-1].split("/", 1)[0]
        execution = found.executions[exec_id] = Execution(stage, started)
    return execution


def _paid(found: Spending, line: dict[str, Any], ticket: tuple[str, float | None] | None) -> None:
    exec_id = ticket[0] if ticket is not None else line.get("exec")
    cost = line.get("cost")
    if isinstance(line.get("batch"), str) and cost is not None:
        found.by_batch[line["batch"]] += cost
    if not isinstance(exec_id, str):
        return
    execution = _execution(found, exec_id, str(line.get("stage") or exec_id.split("@", 1)[0]))
    execution.requests += 1
    execution.input_tokens += line["input_tokens"]
    execution.output_tokens += line["output_tokens"]
    if cost is None:
        execution.unknown = execution.unknown or bool(
            line["input_tokens"] or line["output_tokens"]
        )
    else:
        execution.cost += cost


def _lost(found: Spending, exec_id: str, bound: float | None) -> None:
    execution = found.executions.get(exec_id)
    if execution is None:  # pragma: no cover - an open line always makes its execution
        return
    execution.unsure += 1
    if bound is None:
        execution.unknown = True
        return
    execution.unsure_usd += bound
    execution.cost += bound


class SpendJournal:
    """The journal's writer for one stage execution (``stage`` started at ``started_at``).

    Each line is written (one ``write``, no buffer of ours) before the call returns: a
    request is opened before it is sent, and paid before its answer is saved."""

    def __init__(self, project_dir: Path, stage: str, started_at: str) -> None:
        self.exec_id = f"{stage}@{started_at}/{secrets.token_hex(4)}"
        self.stage = stage
        self._writer = JsonlWriter(project_dir / SPEND, _is_line, str(SPEND))
        self._next = 0

    def begin(self) -> None:
        """Record the execution's start: its history line, if it writes one, pairs with it."""
        self._writer.append({"exec": self.exec_id, "stage": self.stage})

    def open(self, provider: str, model: str, bound: float | None) -> str:
        """Record a request about to be sent; its id, to ``paid`` or ``close`` it."""
        self._next += 1
        ticket = f"{self.exec_id}#{self._next}"
        self._writer.append({
            "open": ticket, "exec": self.exec_id, "stage": self.stage,
            "provider": provider, "model": model,
            "bound": None if bound is None else round(bound, 9),
        })  # fmt: skip
        return ticket

    def paid(
        self,
        ticket: str | None,
        input_tokens: int,
        output_tokens: int,
        cost: float | None,
        *,
        batch: str | None = None,
    ) -> None:
        """Record what a reply cost: of the open request ``ticket``, or of one never
        opened (a batch's result, an embedding)."""
        line: dict[str, Any] = {
            "paid": ticket or f"{self.exec_id}#{self._bump()}",
            "input_tokens": input_tokens, "output_tokens": output_tokens,
            "cost": None if cost is None else round(cost, 9),
        }  # fmt: skip
        if ticket is None:  # no open line names its execution
            line["exec"] = self.exec_id
            line["stage"] = self.stage
        if batch is not None:
            line["batch"] = batch
        self._writer.append(line)

    def close(self, ticket: str, *, lost: bool) -> None:
        """Record a request that ended without a reply: ``lost`` when it may be billed."""
        self._writer.append({"close": ticket, "lost": True} if lost else {"close": ticket})

    def finish(self) -> None:
        self._writer.close()

    def _bump(self) -> int:
        self._next += 1
        return self._next


def project_history(
    project_dir: Path, spending: Spending | None = None
) -> list[dict[str, Any]]:
    """The history's lines as the money says: each line's cost at least what the journal
    holds of its execution, and a line ``unfinished`` for an execution that paid and
    wrote no line (killed, or its disk full), oldest first."""
    spending = read_spending(project_dir) if spending is None else spending
    journal: dict[tuple[str, str], list[Execution]] = defaultdict(list)
    for execution in spending.executions.values():
        journal[(execution.stage, execution.started_at)].append(execution)
    entries = []
    for line in read_history(project_dir):
        # Executions started in the same second pair with their lines in order.
        same = journal.get((line["stage"], str(line.get("started_at"))))
        paid = same.pop(0).cost if same else 0.0
        raised = line.get("cost") is not None and paid > line["cost"]
        entries.append({**line, "cost": paid} if raised else line)
    for left in journal.values():
        entries.extend(_unfinished(execution) for execution in left)
    entries.sort(key=lambda e: str(e.get("started_at") or ""))
    return entries


def _unfinished(execution: Execution) -> dict[str, Any]:
    return {
        "stage": execution.stage,
        "started_at": execution.started_at,
        "ended_at": None,
        "status": "unfinished",
        "provider": execution.provider,
        "model": execution.model,
        "done": 0, "skipped": 0, "failed": 0, "excluded": 0,
        "input_tokens": execution.input_tokens,
        "output_tokens": execution.output_tokens,
        "cost": None if execution.unknown and not execution.cost else execution.cost,
        "unsure": execution.unsure,
    }  # fmt: skip


def spent(project_dir: Path) -> float:
    """USD the project has spent or may have been billed, as its files say: the history
    and the spend journal (unknown costs: 0), and what its live batches can still cost
    (the budget reserved it when they were sent: paid whatever the budget says now)."""
    paid, held = spent_and_held(project_dir)
    return paid + held


def spent_and_held(project_dir: Path) -> tuple[float, float]:
    """``spent``'s two parts: what the history and the journal say was paid, and what the
    live batches can still cost (held for them, not paid yet: ``plan`` says it apart)."""
    spending = read_spending(project_dir)  # read once: the history's pairing and the batches
    paid = sum(
        float(entry.get("cost") or 0.0) for entry in project_history(project_dir, spending)
    )
    paid += serving_so_far(project_dir)
    by_batch = spending.by_batch
    held = 0.0
    for batch in Ledger(project_dir).live():  # its results paid so far are counted above
        held += max(batch.projected_usd - by_batch.get(batch.key, 0.0), 0.0)
    return paid, held


SERVES = Path(".overbrainer") / "serve"
"""The records of the serves up (``serve/records.py`` writes them: this layer only reads
their start and price)."""


def serving_so_far(project_dir: Path, now: float | None = None) -> float:
    """USD the serves up have cost so far: their hours since they started times their
    target's price an hour (the history gets their line when they end). A record that
    cannot be read counts 0 (the command that reads it as a serve says why)."""
    now = time.time() if now is None else now
    total = 0.0
    directory = project_dir / SERVES
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            started, price = float(data["started"]), float(data.get("price_per_hour", 0.0))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if money(price) and math.isfinite(started):
            total += max(0.0, now - started) / 3600 * price
    return total
