"""``compare.md``: the compare as a person reads it."""

from __future__ import annotations

import re
from typing import Any

LIST_LIMIT = 5
FEW_QUESTIONS = 100


def _seconds(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, int | float) else "-"


def _money(value: Any) -> str:
    return f"${value:.6f}" if isinstance(value, int | float) else "-"


def _hardware(hardware: dict[str, Any]) -> str:
    build = hardware.get("build") or "cpu"
    gpus = [gpu for gpu in hardware.get("gpus") or [] if isinstance(gpu, str)]
    if gpus and build != "cpu":
        names = sorted(set(gpus))
        shown = ", ".join(f"{gpus.count(name)} x {name}" for name in names)
        return f"{shown} ({build})"
    return f"{hardware.get('cpu') or 'unknown CPU'}, CPU ({build})"


def shown_answer(text: str | None) -> str:
    """An answer as the report shows it: no reasoning, no stray ``<think>`` tag, runs of
    blank lines collapsed to one, trimmed."""
    from overbrainer.after.judge import strip_reasoning

    text = re.sub(r"</?think>", "", strip_reasoning(text or ""))
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


PARENT_UNPRICED = (
    "no price known for the parent: set [compare] parent_price_in and parent_price_out "
    "(USD per million tokens)"
)
CHILD_UNPRICED = "no price per hour for the child: set [compare] child_price_per_hour"
NOT_PRICED = f"{PARENT_UNPRICED}; {CHILD_UNPRICED}"


def price_lines(data: dict[str, Any]) -> list[str]:
    """Where the parent's price came from (``[compare]``, the providers' table, the
    provider's price list), or what to set for a price that is missing."""
    summary = data["summary"]
    price = data.get("parent_price") or {}
    lines = []
    if summary.get("parent_per_1k") is None:
        lines.append(PARENT_UNPRICED)
    elif price.get("source"):
        override = (
            "" if str(price["source"]).startswith("[compare]")
            else " ([compare] parent_price_in/parent_price_out override it)"
        )
        lines.append(
            f"the parent's price: ${price['in']:.2f} in, ${price['out']:.2f} out per million "
            f"tokens, from {price['source']}{override}"
        )
    if summary.get("child_per_1k") is None:
        lines.append(CHILD_UNPRICED)
    return lines


def percent(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) else "-"


def interval(bounds: Any) -> str:
    """``[lo, hi]`` as ``46.8%-91.1%``; ``-`` when unknown."""
    if isinstance(bounds, list) and len(bounds) == 2:
        return f"{percent(bounds[0])}-{percent(bounds[1])}"
    return "-"


def terminal_summary(data: dict[str, Any]) -> list[str]:
    """What ``compare`` prints: the rate and its interval, the counts, latency, costs."""
    summary = data["summary"]
    intervals = summary.get("intervals") or {}
    lines = [
        f"compare: win-or-tie {percent(summary.get('win_or_tie'))} (95% interval "
        f"{interval(intervals.get('win_or_tie'))}) over {summary['questions']} questions: "
        f"{summary['wins']} wins, {summary['ties']} ties ({summary.get('flipped', 0)} "
        f"flipped with the order), {summary['losses'] + summary['errors']} losses, "
        f"{summary['unparsed']} unparsed",
        f"compare: child latency p50 {_seconds(summary['latency_p50'])}, p95 "
        f"{_seconds(summary['latency_p95'])}",
    ]
    if summary.get("parent_per_1k") is None and summary.get("child_per_1k") is None:
        lines.append(f"compare: cost per 1,000 requests not computed: {NOT_PRICED}")
    else:
        lines.append(
            f"compare: cost per 1,000 requests: parent {_money(summary.get('parent_per_1k'))}, "
            f"child {_money(summary.get('child_per_1k'))} (upper bound)"
        )
        lines += [f"compare: {line}" for line in price_lines(data)]
    if data.get("judge_is_parent"):
        lines.append(f"compare: the judge is the parent's model ({data['judge']})")
    return lines


def _entry(question: dict[str, Any]) -> list[str]:
    lines = [f"### {question['id']} ({question.get('topic') or '-'})", "", question["question"], ""]
    lines += ["**Child:**", "", shown_answer(question.get("child")) or "(no answer)", ""]
    lines += ["**Parent:**", "", shown_answer(question.get("parent")), ""]
    lines += [f"Judge: {question.get('reason') or '-'}", ""]
    return lines


def render(data: dict[str, Any]) -> str:
    """The report of ``compare.json``'s ``data``."""
    summary = data["summary"]
    hardware = data.get("hardware") or {}
    lines = [f"# Compare of run {data['run']}", ""]
    lines += [
        f"- Child: `{data.get('base_model')}` fine-tuned, GGUF {data.get('quantize')} "
        f"({data.get('llama_cpp')}, SHA-256 {str(data.get('gguf_sha256'))[:12]})",
        f"- Hardware: {_hardware(hardware)}",
        f"- Judge: {data['judge']}" + (" (the parent)" if data.get("judge_is_parent") else ""),
        f"- Questions: {summary['questions']}",
        f"- Date: {data.get('created')}",
        "",
        "## Summary",
        "",
    ]
    intervals = summary.get("intervals") or {}
    lines.append(
        f"- Win-or-tie rate: {percent(summary.get('win_or_tie'))} (95% interval "
        f"{interval(intervals.get('win_or_tie'))})"
    )
    lines.append(
        f"- Wins / ties / losses: {summary['wins']} / {summary['ties']} / "
        f"{summary['losses'] + summary['errors']} (95% intervals "
        f"{interval(intervals.get('win'))} / {interval(intervals.get('tie'))} / "
        f"{interval(intervals.get('loss'))}); each question judged in both orders, "
        f"{summary.get('flipped', 0)} verdicts flipped with the order (ties)"
    )
    lines.append(f"- Unparsed verdicts: {summary['unparsed']}; errors: {summary['errors']}")
    lines.append(f"- Cut answers (max_tokens): {summary['truncated']}")
    lines.append(
        f"- Latency p50 / p95: {_seconds(summary['latency_p50'])} / "
        f"{_seconds(summary['latency_p95'])}; first token p50: "
        f"{_seconds(summary['first_token_p50'])}"
    )
    speed = summary.get("tokens_per_second")
    lines.append(f"- Tokens per second: {f'{speed:.1f}' if isinstance(speed, float) else '-'}")
    if summary.get("parent_per_1k") is None and summary.get("child_per_1k") is None:
        lines.append(f"- Cost per 1,000 requests: not computed: {NOT_PRICED}")
    else:
        ratio = summary.get("ratio")
        lines.append(
            f"- Cost per 1,000 requests: parent {_money(summary.get('parent_per_1k'))}, child "
            f"{_money(summary.get('child_per_1k'))} (upper bound); ratio "
            f"{f'{ratio:.3f}' if isinstance(ratio, float) else '-'}"
        )
        if data.get("child_price_from_pod"):
            lines.append("- The child's price per hour is its Runpod pod's.")
        lines += [f"- {line[0].upper()}{line[1:]}" for line in price_lines(data)]
    questions = data["questions"]
    losses = [q for q in questions if q.get("verdict") == "error"]
    losses += [q for q in questions if q.get("verdict") == "loss"]
    wins = [q for q in questions if q.get("verdict") == "win"]
    for title, chosen in (("Losses", losses), ("Wins", wins)):
        lines += ["", f"## {title} (first {min(LIST_LIMIT, len(chosen))} of {len(chosen)})", ""]
        for question in chosen[:LIST_LIMIT]:
            lines += _entry(question)
    lines += ["", "## Limits", ""]
    if data.get("judge_is_parent"):
        lines.append("- The judge is the parent itself, which may favour its own answers.")
    if summary["questions"] < FEW_QUESTIONS:
        lines.append(f"- {summary['questions']} questions: fewer than 100, so the rate is rough.")
    lines.append("- One request at a time: latencies are those of an idle server.")
    if summary["truncated"]:
        lines.append(f"- {summary['truncated']} child answers were cut at max_tokens.")
    if (hardware.get("build") or "cpu") == "cpu":
        lines.append("- The child ran on a CPU.")
    return "\n".join(lines).rstrip() + "\n"
