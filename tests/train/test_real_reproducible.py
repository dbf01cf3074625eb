"""The real Axolotl on the CPU: the same inputs train the same model (issue 23).

Run with ``OVERBRAINER_AXOLOTL_VENV=<venv holding bin/axolotl> uv run pytest -m real``.
"""

from __future__ import annotations

import json

import pytest
from tests.helpers.real import WORKERS

pytestmark = pytest.mark.real


def _logged(real, run_id: str) -> list[tuple[int, str, float]]:
    return [
        (event["step"], key, event[key])
        for event in real.metrics(run_id) if event["event"] == "log"
        for key in ("loss", "eval_loss", "grad_norm") if key in event
    ]


def test_two_runs_from_the_same_inputs_log_the_same_losses_at_every_step(real, run_cli):
    # A LoRA adapter (its initial weights, its dropout), DataLoader workers, the datasets'
    # shuffles: each follows the seed.
    real.configure_real(extra=WORKERS)
    for _ in range(2):
        result = run_cli("train")
        assert result.exit_code == 0, result.stderr
    first, second = real.runs()
    assert first["state"] == second["state"] == "succeeded"
    inputs = [
        json.loads((real.dir / "runs" / run["id"] / "inputs.json").read_text())
        for run in (first, second)
    ]
    assert inputs[0]["fingerprint"] == inputs[1]["fingerprint"]
    assert inputs[0]["config"]["seed"] == 42
    logged = _logged(real, first["id"])
    assert len([row for row in logged if row[1] == "loss"]) == 16
    assert _logged(real, second["id"]) == logged
