"""The figures of a compare: how often the child wins or ties, how fast it answers, what a
thousand requests cost on each side."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def nearest_rank(values: Sequence[float], percent: float) -> float | None:
    """The ``percent`` percentile by nearest rank: ``sorted[max(1, ceil(p*n/100)) - 1]``."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(percent * len(ordered) / 100)) - 1]


Z_95 = 1.959963984540054
"""The normal quantile of a two-sided 95% interval."""


def wilson(successes: int, trials: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes`` in ``trials`` (95% by default): unlike
    the normal one it stays inside [0, 1] and is honest for the few questions of a compare."""
    if trials <= 0:
        return None
    rate = successes / trials
    scale = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / scale
    half = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval(successes: int, trials: int) -> list[float] | None:
    found = wilson(successes, trials)
    return [round(found[0], 6), round(found[1], 6)] if found else None


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(  # noqa: PLR0917 - one call site, every argument named there
    questions: list[dict[str, Any]],
    verdicts: dict[str, dict[str, Any]],
    answers: dict[str, dict[str, Any]],
    price_in: float | None,
    price_out: float | None,
    child_per_hour: float | None,
) -> dict[str, Any]:
    """The summary of ``compare.json``: verdict counts, the win-or-tie rate, latencies of the
    answers that did not fail, tokens per second and the costs per 1,000 requests."""
    ids = [question["id"] for question in questions]
    counts = dict.fromkeys(("win", "tie", "loss", "unparsed", "error", "skipped"), 0)
    for qid in ids:
        verdict = verdicts.get(qid, {}).get("verdict")
        if verdict in counts:
            counts[verdict] += 1
    judged = len(ids) - counts["unparsed"] - counts["skipped"]
    good = [answers[qid] for qid in ids if qid in answers and "error" not in answers[qid]]
    seconds = [float(a["seconds"]) for a in good if isinstance(a.get("seconds"), int | float)]
    first = [
        float(a["first_token_seconds"])
        for a in good
        if isinstance(a.get("first_token_seconds"), int | float)
    ]
    speeds = [
        float(a["tokens_per_second"])
        for a in good
        if isinstance(a.get("tokens_per_second"), int | float)
    ]
    parent_per_1k = None
    if price_in is not None and price_out is not None and questions:
        mean_in = sum(q.get("parent_input_tokens", 0) for q in questions) / len(questions)
        mean_out = sum(q.get("parent_output_tokens", 0) for q in questions) / len(questions)
        parent_per_1k = round((mean_in * price_in + mean_out * price_out) / 1000, 6)
    mean_seconds = _mean(seconds)
    child_per_1k = None
    if child_per_hour is not None and mean_seconds is not None:
        child_per_1k = round(child_per_hour * mean_seconds / 3.6, 6)
    ratio = (
        child_per_1k / parent_per_1k
        if child_per_1k is not None and parent_per_1k is not None and parent_per_1k > 0
        else None
    )
    lost = counts["loss"] + counts["error"]
    return {
        "questions": len(ids),
        "wins": counts["win"],
        "ties": counts["tie"],
        "losses": counts["loss"],
        "unparsed": counts["unparsed"],
        "errors": counts["error"],
        "skipped": counts["skipped"],
        "flipped": sum(1 for qid in ids if verdicts.get(qid, {}).get("flipped")),
        "win_or_tie": (counts["win"] + counts["tie"]) / judged if judged > 0 else None,
        "intervals": {  # 95% Wilson, over the judged questions (errors are losses)
            "win": _interval(counts["win"], judged),
            "tie": _interval(counts["tie"], judged),
            "loss": _interval(lost, judged),
            "win_or_tie": _interval(counts["win"] + counts["tie"], judged),
        },
        "latency_p50": nearest_rank(seconds, 50),
        "latency_p95": nearest_rank(seconds, 95),
        "first_token_p50": nearest_rank(first, 50),
        "tokens_per_second": _mean(speeds),
        "mean_seconds": mean_seconds,
        "truncated": sum(1 for a in good if a.get("finish") == "length"),
        "parent_per_1k": parent_per_1k,
        "child_per_1k": child_per_1k,
        "ratio": ratio,
    }


LC_MIN = 10
"""Fewer judged questions than this give no length-controlled rate."""
LC_RIDGE = 1.0
"""The L2 penalty on the length coefficient: keeps it finite when length alone separates
the verdicts (as it can on a few questions)."""


def length_controlled(outcomes: Sequence[tuple[bool, float]]) -> dict[str, Any] | None:
    """The win-or-tie rate at equal length: a logistic regression of each question's
    win-or-tie (``outcomes``' bool) on ``tanh(d / sd(d))`` of its length difference ``d``
    (child minus other, in characters), read at ``d = 0`` (AlpacaEval's length control, one
    feature). None for fewer than :data:`LC_MIN` questions; the raw rate when every verdict
    or every length difference is the same (nothing to regress)."""
    if len(outcomes) < LC_MIN:
        return None
    ys = [1.0 if won else 0.0 for won, _ in outcomes]
    diffs = [d for _, d in outcomes]
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / len(diffs))
    raw = sum(ys) / len(ys)
    if sd == 0 or raw in (0.0, 1.0):
        return {"win_or_tie": raw, "slope": 0.0, "questions": len(ys)}
    xs = [math.tanh(d / sd) for d in diffs]
    a = math.log(raw / (1 - raw))
    b = 0.0
    for _ in range(100):  # Newton's method on the penalised log-likelihood (concave)
        ga, gb, haa, hab, hbb = 0.0, -LC_RIDGE * b, 0.0, 0.0, LC_RIDGE
        for x, y in zip(xs, ys, strict=True):
            p = 1 / (1 + math.exp(-(a + b * x)))
            w = p * (1 - p)
            ga += y - p
            gb += (y - p) * x
            haa += w
            hab += w * x
            hbb += w * x * x
        det = haa * hbb - hab * hab
        if det <= 0:
            break
        step_a = (hbb * ga - hab * gb) / det
        step_b = (haa * gb - hab * ga) / det
        a, b = a + step_a, b + step_b
        if abs(step_a) + abs(step_b) < 1e-10:
            break
    return {"win_or_tie": 1 / (1 + math.exp(-a)), "slope": b, "questions": len(ys)}
