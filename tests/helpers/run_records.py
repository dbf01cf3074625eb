"""Run records and machine samples written the way a target leaves them, for the tests of
what reads them back (`runs ls`, `runs show`, the TUI, the figures)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def write_run(
    project_dir: Path,
    run_id: str,
    created: str,
    state: str = "succeeded",
    target: str = "gpu",
    **extra: Any,
) -> Path:
    """The ``run.json`` of a run as its target left it, with ``extra`` fields over the usual."""
    directory = project_dir / "runs" / run_id
    directory.mkdir(parents=True, exist_ok=True)
    record = {
        "id": run_id,
        "target": target,
        "created": created,
        "remote_dir": f"/remote/{run_id}",
        "job": None,
        "state": state,
        "message": None,
        "snapshots": True,
        **extra,
    }
    (directory / "run.json").write_text(json.dumps(record, indent=2))
    return directory


def backdate(project_dir: Path, seconds: float = 3600) -> None:
    """Every file and directory of the runs, as last changed ``seconds`` ago."""
    then = time.time() - seconds
    for path in sorted((project_dir / "runs").rglob("*"), reverse=True):
        os.utime(path, (then, then), follow_symlinks=False)


GIB = 1 << 30


# A machine sample (machine.jsonl) of a pod with two GPUs.
SAMPLE: dict[str, Any] = {
    "format": 1,
    "time": 1000.0,
    "cpu": {"usage": 0.42, "load1": 3.25, "cpus": 7.5, "container": True},
    "memory": {"used_bytes": 3 * GIB, "limit_bytes": 16 * GIB, "container": True},
    "disks": [
        {"mount": "/workspace", "shared": True, "used_bytes": GIB, "size_bytes": 900 * GIB},
        {"mount": "/", "shared": False, "used_bytes": 9 * GIB, "size_bytes": 20 * GIB},
    ],
    "gpus": [
        {
            "index": 0,
            "name": "NVIDIA A40",
            "utilization": 0.97,
            "memory_used_bytes": 40 * GIB,
            "memory_total_bytes": 48 * GIB,
            "temperature_celsius": 71,
            "power_watts": 290.5,
            "power_limit_watts": 300,
        },
        {
            "index": 1,
            "name": "NVIDIA A40",
            "utilization": None,
            "memory_used_bytes": 0,
            "memory_total_bytes": 48 * GIB,
            "temperature_celsius": 30,
            "power_watts": None,
            "power_limit_watts": None,
        },
    ],
}
