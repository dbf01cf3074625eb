"""``.overbrainer/requests.jsonl``: the chat requests each stage execution had answered, by
model, with their tokens: the divisor of ``plan``'s and the budget's measured averages.

Kept apart from ``history.jsonl``, whose lines the reference tool reads and wants with no
field it does not know.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from overbrainer.pipeline.jsonl import JsonlWriter, read_jsonl
from overbrainer.pipeline.report import Report

REQUESTS = Path(".overbrainer") / "requests.jsonl"

Tally = tuple[int, int, int]
"""Requests, tokens in, tokens out."""


def _is_line(record: dict[str, Any]) -> bool:
    numbers = [record.get(key) for key in ("requests", "input_tokens", "output_tokens")]
    return (
        isinstance(record.get("stage"), str)
        and isinstance(record.get("model"), str)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers)
    )


def record_requests(project_dir: Path, stage: str, report: Report) -> None:
    """Add the stage execution's lines: ``{stage, model, requests, input_tokens,
    output_tokens}`` for each model it asked, as ``stage`` (the requests it counted for
    another, ``answers``' judge for ``select``, as that one); nothing when it asked nothing."""
    if not report.requests:
        return
    with JsonlWriter(project_dir / REQUESTS, _is_line, str(REQUESTS)) as writer:
        for (name, model), (requests, tokens_in, tokens_out) in report.measured.items():
            writer.append({"stage": stage if name == report.stage else name, "model": model,
                           "requests": requests, "input_tokens": tokens_in,
                           "output_tokens": tokens_out})  # fmt: skip


def requests_tally(project_dir: Path, stage: str, model: str) -> Tally:
    """What ``stage`` asked of ``model`` in all, as the file says."""
    requests = tokens_in = tokens_out = 0
    path = project_dir / REQUESTS
    if not path.is_file():
        return 0, 0, 0
    for line in read_jsonl(path, str(REQUESTS), _is_line):
        if line["stage"] == stage and line["model"] == model:
            requests += line["requests"]
            tokens_in += line["input_tokens"]
            tokens_out += line["output_tokens"]
    return requests, tokens_in, tokens_out
