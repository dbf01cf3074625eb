"""Fake runs with known metrics, written as a job writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

START = 1_790_000_000.0


def write_run(project_dir: Path, run_id: str, state: str = "succeeded", **extra: Any) -> Path:
    directory = project_dir / "runs" / run_id
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "id": run_id,
        "target": "local",
        "created": "2026-09-22T14:30:05Z",
        "remote_dir": str(directory),
        "job": None,
        "state": state,
        "message": None,
        "snapshots": True,
        **extra,
    }
    (directory / "run.json").write_text(json.dumps(record, indent=2))
    return directory


def v_shaped_loss(step: int) -> float:
    """Falls from 5.0 at step 0 to 2.0 at step 50, then climbs to 3.5 at step 100."""
    return 5.0 - 0.06 * step if step <= 50 else 2.0 + 0.03 * (step - 50)


def write_metrics(
    directory: Path, steps: range, *, max_steps: int = 100, loss=v_shaped_loss, evals=()
) -> None:
    lines: list[dict[str, Any]] = [
        {"event": "stage", "name": "train", "time": START},
        {"event": "begin", "time": START + 10, "max_steps": max_steps},
    ]
    for step in steps:
        lines.append(
            {
                "event": "log",
                "time": START + 10 + step,
                "step": step,
                "epoch": step / max_steps,
                "max_steps": max_steps,
                "loss": loss(step),
                "learning_rate": 1e-3 * (1 - step / max_steps),
                "grad_norm": 1.0 + step % 3,
            }
        )
        if step in evals:
            lines.append(
                {
                    "event": "log",
                    "time": START + 10 + step,
                    "step": step,
                    "eval_loss": loss(step) + 0.1,
                }
            )
    last = steps[-1] if steps else 0
    lines.append({"event": "end", "time": START + 12 + last, "step": last})
    lines.append({"event": "stage", "name": "merge", "time": START + 20 + last})
    with (directory / "metrics.jsonl").open("w") as file:
        for line in lines:
            file.write(json.dumps(line) + "\n")
