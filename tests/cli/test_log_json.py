"""``log --json`` is strict JSON, whatever the exchange log holds."""

from __future__ import annotations

import json


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_log_json_prints_no_nan_or_infinity(run_cli, project_dir):
    """A hand-edited or foreign line may hold NaN (Python's json reads it): printed as null."""
    log = project_dir / ".overbrainer" / "exchanges.jsonl"
    log.parent.mkdir()
    log.write_text('{"stage": "answers", "item": "q1", "cost": NaN, "usage": [Infinity]}\n')
    result = run_cli("log", "--json")
    assert result.exit_code == 0, result.stderr
    assert _strict(result.stdout) == {"stage": "answers", "item": "q1", "cost": None,
                                      "usage": [None]}  # fmt: skip
