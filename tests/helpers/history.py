"""A line of a project's history file as a stage appends it."""

from __future__ import annotations

from typing import Any


def entry(stage: str, status: str = "ok", cost: float = 0.5, **values: Any) -> dict[str, Any]:
    return {
        "stage": stage,
        "started_at": "2026-01-02T03:04:05Z",
        "ended_at": "2026-01-02T03:04:09Z",
        "status": status,
        "provider": "main",
        "model": "m",
        "done": 2,
        "skipped": 1,
        "failed": 0,
        "excluded": 1,
        "input_tokens": 10,
        "output_tokens": 20,
        "cost": cost,
        **values,
    }
