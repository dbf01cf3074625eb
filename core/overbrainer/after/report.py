"""``compare.md``: the compare as a person reads it."""

from __future__ import annotations

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


def _entry(question: dict[str, Any]) -> list[str]:
    lines = [f"### {question['id']} ({question.get('topic') or '-'})", "", question["question"], ""]
    lines += ["**Child:**", "", question.get("child") or "(no answer)", ""]
    lines += ["**Parent:**", "", question.get("parent") or "", ""]
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
    rate = summary.get("win_or_tie")
    lines.append(f"- Win-or-tie rate: {f'{rate:.1%}' if isinstance(rate, float) else '-'}")
    lines.append(
        f"- Wins / ties / losses: {summary['wins']} / {summary['ties']} / "
        f"{summary['losses'] + summary['errors']}"
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
        lines.append("- Cost per 1,000 requests: not computed: set [compare] prices")
    else:
        ratio = summary.get("ratio")
        lines.append(
            f"- Cost per 1,000 requests: parent {_money(summary.get('parent_per_1k'))}, child "
            f"{_money(summary.get('child_per_1k'))} (upper bound); ratio "
            f"{f'{ratio:.3f}' if isinstance(ratio, float) else '-'}"
        )
        if data.get("child_price_from_pod"):
            lines.append("- The child's price per hour is its Runpod pod's.")
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
