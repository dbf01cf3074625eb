"""``.overbrainer/history.jsonl``: one line per stage execution, and how ``history`` shows it."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl

HISTORY = Path(".overbrainer") / "history.jsonl"
STAGES = ("subtopics", "questions", "answers", "split")
"""The dataset stages, in the order ``run`` runs them."""
NOTHING_YET = "no stage has run yet"

_NUMBERS = ("done", "skipped", "failed", "excluded", "input_tokens", "output_tokens")


def timestamp(when: datetime | None = None) -> str:
    """``when`` (default now) as the history writes it: ``2026-09-22T14:30:05Z``."""
    return (when or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_entry(record: dict[str, Any]) -> bool:
    """A valid line: counts whole and never negative, a cost finite and never negative (a
    NaN or a negative cost would switch the budget off: an invalid record, not a discount)."""
    cost = record.get("cost")
    return (
        isinstance(record.get("stage"), str)
        and isinstance(record.get("status"), str)
        and all(_count(record.get(key, 0)) for key in _NUMBERS)
        and (
            cost is None
            or (isinstance(cost, int | float) and not isinstance(cost, bool)
                and math.isfinite(cost) and cost >= 0)
        )
    )


def append_history(project_dir: Path, entry: dict[str, Any]) -> None:
    """Add one stage execution:
    ``{stage, started_at, ended_at, status, provider, model, done, skipped, failed, excluded,
    input_tokens, output_tokens, cost, split?, batch?}`` (``cost`` None when unknown;
    ``batch``: ``{batches, waiting}`` when the stage ran in batch)."""
    with JsonlWriter(project_dir / HISTORY, _is_entry, str(HISTORY)) as writer:
        writer.append(entry)


def read_history(project_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(project_dir / HISTORY, str(HISTORY), _is_entry)


def _totals(entries: list[dict[str, Any]]) -> str:
    runs = len(entries)
    done = sum(e.get("done", 0) for e in entries)
    failed = sum(e.get("failed", 0) for e in entries)
    tokens_in = sum(e.get("input_tokens", 0) for e in entries)
    tokens_out = sum(e.get("output_tokens", 0) for e in entries)
    batched = sum(1 for e in entries if isinstance(e.get("batch"), dict))
    return (
        f"{runs} run(s), {done} done, {failed} failed; tokens {tokens_in} in, {tokens_out} out; "
        f"{_cost(entries)}" + (f"; {batched} in batch" if batched else "")
    )


def _cost(entries: Iterable[dict[str, Any]]) -> str:
    entries = list(entries)
    total = sum(e.get("cost") or 0.0 for e in entries)
    unknown = any(
        e.get("cost") is None and (e.get("input_tokens") or e.get("output_tokens")) for e in entries
    )
    if unknown and not total:
        return "cost unknown"
    return f"${total:.4f}" + (" + unknown" if unknown else "")


def _totals_json(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """What ``_totals`` says, as numbers; ``cost`` to the micro-dollar, None when no
    entry's is known, and ``cost_unknown`` when some tokens have no price."""
    known = [e["cost"] for e in entries if e.get("cost") is not None]
    return {
        "runs": len(entries),
        **{key: sum(e.get(key, 0) for e in entries) for key in _NUMBERS},
        "cost": round(sum(known), 6) if known else None,
        "cost_unknown": any(
            e.get("cost") is None and (e.get("input_tokens") or e.get("output_tokens"))
            for e in entries
        ),
    }


def summary_json(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``history --json``: ``{stages: {name: totals}, total: totals}``, stages in pipeline
    order, totals as ``_totals_json`` gives them."""
    names = [s for s in STAGES if any(e["stage"] == s for e in entries)]
    names += sorted({e["stage"] for e in entries} - set(STAGES))
    return {
        "stages": {n: _totals_json([e for e in entries if e["stage"] == n]) for n in names},
        "total": _totals_json(entries),
    }


def _selected(split: dict[str, Any]) -> str:
    """What ``[pipeline] select`` kept of a split's answers, when it left some out."""
    selected = split.get("selected")
    if not isinstance(selected, dict):
        return ""
    kept, of = selected.get("kept"), selected.get("of")
    if not (_count(kept) and _count(of)) or not of:
        return ""
    return f"; select kept {kept} of {of} answers ({kept / of:.0%})"


def summary_lines(entries: list[dict[str, Any]]) -> list[str]:
    """One line per stage, in pipeline order, then the total; the split's with the share
    of answers its last execution kept (``[pipeline] select``)."""
    if not entries:
        return [NOTHING_YET]
    names = [s for s in STAGES if any(e["stage"] == s for e in entries)]
    names += sorted({e["stage"] for e in entries} - set(STAGES))
    lines = [f"{name:<9}  {_totals([e for e in entries if e['stage'] == name])}" for name in names]
    splits = [e["split"] for e in entries if isinstance(e.get("split"), dict)]
    if splits and "split" in names:
        lines[names.index("split")] += _selected(splits[-1])
    lines.append(f"{'total':<9}  {_totals(entries)}")
    return lines


def execution_lines(entries: list[dict[str, Any]]) -> list[str]:
    """One line per stage execution, oldest first."""
    if not entries:
        return [NOTHING_YET]
    lines = []
    for e in entries:
        counts = ", ".join(f"{e.get(key, 0)} {key}" for key in _NUMBERS[:4])
        line = (
            f"{e.get('started_at', '?')}  {e['stage']:<9}  {e['status']:<11}  {counts}; "
            f"tokens {e.get('input_tokens', 0)} in, {e.get('output_tokens', 0)} out; {_cost([e])}"
        )
        if e.get("unsure"):
            line += (
                f"; {e['unsure']} request(s) without a reply, counted at their bound "
                "(the provider may have billed them)"
            )
        split = e.get("split")
        if isinstance(split, dict):
            line += (
                f"; {split.get('train', 0)} train, {split.get('eval', 0)} eval, "
                f"{split.get('orphaned', 0)} orphaned"
            )
            line += _selected(split)
        elif e.get("model"):
            line += f"; {e.get('provider')}/{e['model']}"
        batch = e.get("batch")
        if isinstance(batch, dict):
            count = batch.get("batches", 0)
            line += f"; in batch ({count} batch{'' if count == 1 else 'es'}"
            line += f", {batch['waiting']} waiting)" if batch.get("waiting") else ")"
        lines.append(line)
    return lines
