"""``compare.md``: the compare as a person reads it."""

from __future__ import annotations

import re
from typing import Any

from overbrainer.after.judge import strip_reasoning
from overbrainer.after.metrics import LC_MIN

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


def entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    """What the child was judged against, each with its summary (a compare made before
    there were others: the parent alone)."""
    found = data.get("against")
    if isinstance(found, list) and found and isinstance(found[0], dict):
        return found
    return [{"name": "parent", "label": "its parent", "summary": data["summary"]}]


def _counts(summary: dict[str, Any], label: str) -> str:
    skipped = summary.get("skipped") or 0
    losses = summary["losses"] + summary["errors"]
    return (
        f"{_many(summary['wins'], 'win', 'wins')}, {_many(summary['ties'], 'tie', 'ties')} "
        f"({summary.get('flipped', 0)} flipped with the order), "
        f"{_many(losses, 'loss', 'losses')}, {summary['unparsed']} unparsed"
        + (f", {skipped} not judged ({label} gave no answer)" if skipped else "")
    )


def _many(count: int, one: str, more: str) -> str:
    return f"{count} {one if count == 1 else more}"


def length_controlled_text(summary: dict[str, Any]) -> str:
    """The length-controlled win-or-tie rate, or why there is none."""
    found = summary.get("length_controlled")
    return percent(found.get("win_or_tie")) if isinstance(found, dict) else "-"


def helped(data: dict[str, Any]) -> str | None:
    """Whether distillation helped: the 95% interval of the win-or-tie rate against the
    base model above 50% (helped), below (made it worse), or holding it (not shown)."""
    base = next((e for e in entries(data) if e["name"] == "base"), None)
    if base is None:
        return None
    summary = base["summary"]
    bounds = (summary.get("intervals") or {}).get("win_or_tie")
    rate = percent(summary.get("win_or_tie"))
    if not (isinstance(bounds, list) and len(bounds) == 2):
        return "distillation: not shown, no question was judged against the base model"
    shown = f"wins or ties {rate} against its base model (95% interval {interval(bounds)}"
    if bounds[0] > HALF:
        return f"distillation helped: the child {shown}, above 50%)"
    if bounds[1] < HALF:
        return f"distillation did not help: the child {shown}, below 50%)"
    return (
        f"distillation did not clearly help: the child {shown}, which holds 50%; more "
        "questions narrow it)"
    )


HALF = 0.5


def terminal_summary(data: dict[str, Any]) -> list[str]:
    """What ``compare`` prints: each rate and its interval against each other (parent,
    base, run), the counts, whether distillation helped, latency, costs."""
    found = entries(data)
    summary = found[0]["summary"]
    lines = []
    for entry in found:
        figures = entry["summary"]
        intervals = figures.get("intervals") or {}
        lines.append(
            f"compare: against {entry['label']}: win-or-tie {percent(figures.get('win_or_tie'))} "
            f"(95% interval {interval(intervals.get('win_or_tie'))}; length-controlled "
            f"{length_controlled_text(figures)}) over {figures['questions']} questions: "
            + _counts(figures, entry["label"])
        )
    said = helped(data)
    if said is not None:
        lines.append(f"compare: {said}")
    if data.get("base_unavailable"):
        lines.append(f"compare: not against the base model: {data['base_unavailable']}")
    lines.append(
        f"compare: child latency p50 {_seconds(summary['latency_p50'])}, p95 "
        f"{_seconds(summary['latency_p95'])}"
    )
    if summary.get("parent_per_1k") is None and summary.get("child_per_1k") is None:
        lines.append(f"compare: cost per 1,000 requests not computed: {NOT_PRICED}")
    else:
        lines.append(
            f"compare: cost per 1,000 requests: parent {_money(summary.get('parent_per_1k'))}, "
            f"child {_money(summary.get('child_per_1k'))} (upper bound)"
        )
        lines += [f"compare: {line}" for line in price_lines({**data, "summary": summary})]
    if data.get("judge_is_parent"):
        lines.append(f"compare: the judge is the parent's model ({data['judge']})")
    return lines


def _entry(question: dict[str, Any], name: str, label: str) -> list[str]:
    lines = [f"### {question['id']} ({question.get('topic') or '-'})", "", question["question"], ""]
    lines += ["**Child:**", "", shown_answer(question.get("child")) or "(no answer)", ""]
    if name == "parent":
        other, reason = question.get("parent"), question.get("reason")
    else:
        found = (question.get("against") or {}).get(name) or {}
        other, reason = found.get("answer"), found.get("reason")
    whose = label.removeprefix("its ")
    lines += [f"**{whose[0].upper()}{whose[1:]}:**", "", shown_answer(other) or "(no answer)", ""]
    lines += [f"Judge: {reason or '-'}", ""]
    return lines


LC_METHOD = (
    "the length-controlled rate is the win-or-tie rate at equal length: a logistic regression "
    "of each question's win-or-tie on tanh(d / sd(d)), d the child's answer's length minus "
    "the other's (characters, reasoning left out), read at d = 0 (AlpacaEval's length control, "
    "with one feature)"
)


def _against(entry: dict[str, Any], questions: list[dict[str, Any]]) -> list[str]:
    summary = entry["summary"]
    intervals = summary.get("intervals") or {}
    lines = ["", f"## Against {entry['label']}", ""]
    lines.append(
        f"- Win-or-tie rate: {percent(summary.get('win_or_tie'))} (95% interval "
        f"{interval(intervals.get('win_or_tie'))})"
    )
    lines.append(
        f"- Length-controlled win-or-tie rate: {length_controlled_text(summary)}"
        + ("" if summary.get("length_controlled") else f" (needs {LC_MIN} judged questions)")
    )
    lines.append(
        f"- Wins / ties / losses: {summary['wins']} / {summary['ties']} / "
        f"{summary['losses'] + summary['errors']} (95% intervals "
        f"{interval(intervals.get('win'))} / {interval(intervals.get('tie'))} / "
        f"{interval(intervals.get('loss'))}); each question judged in both orders, "
        f"{summary.get('flipped', 0)} verdicts flipped with the order (ties)"
    )
    lines.append(f"- Unparsed verdicts: {summary['unparsed']}; errors: {summary['errors']}")
    if summary.get("skipped"):
        lines.append(f"- Not judged ({entry['label']} gave no answer): {summary['skipped']}")
    if entry.get("reference"):
        lines.append("- The judge was shown the parent's answer as a reference.")
    name = entry["name"]

    def verdict(question: dict[str, Any]) -> Any:
        if name == "parent":
            return question.get("verdict")
        return ((question.get("against") or {}).get(name) or {}).get("verdict")

    losses = [q for q in questions if verdict(q) == "error"]
    losses += [q for q in questions if verdict(q) == "loss"]
    wins = [q for q in questions if verdict(q) == "win"]
    for title, chosen in (("Losses", losses), ("Wins", wins)):
        lines += [
            "",
            f"### {title} against {entry['label']} (first {min(LIST_LIMIT, len(chosen))} of "
            f"{len(chosen)})",
            "",
        ]
        for question in chosen[:LIST_LIMIT]:
            lines += ["#" + line if line.startswith("### ") else line
                      for line in _entry(question, name, entry["label"])]  # fmt: skip
    return lines


def render(data: dict[str, Any]) -> str:
    """The report of ``compare.json``'s ``data``."""
    found = entries(data)
    summary = found[0]["summary"]
    hardware = data.get("hardware") or {}
    lines = [f"# Compare of run {data['run']}", ""]
    lines += [
        f"- Child: `{data.get('base_model')}` fine-tuned, GGUF {data.get('quantize')} "
        f"({data.get('llama_cpp')}, SHA-256 {str(data.get('gguf_sha256'))[:12]})",
        f"- Against: {', '.join(entry['label'] for entry in found)}",
        f"- Hardware: {_hardware(hardware)}",
        f"- Judge: {data['judge']}" + (" (the parent)" if data.get("judge_is_parent") else ""),
        f"- Questions: {summary['questions']}",
        f"- Date: {data.get('created')}",
        "",
        "## Summary",
        "",
    ]
    for entry in found:
        figures = entry["summary"]
        lines.append(
            f"- Against {entry['label']}: win-or-tie {percent(figures.get('win_or_tie'))} (95% "
            f"interval {interval((figures.get('intervals') or {}).get('win_or_tie'))}); "
            f"length-controlled {length_controlled_text(figures)}"
        )
    said = helped(data)
    if said is not None:
        lines.append(f"- {said[0].upper()}{said[1:]}")
    if data.get("base_unavailable"):
        lines.append(f"- Not against the base model: {data['base_unavailable']}")
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
        lines += [
            f"- {line[0].upper()}{line[1:]}" for line in price_lines({**data, "summary": summary})
        ]
    for entry in found:
        lines += _against(entry, data["questions"])
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
    lines.append(f"- Method: {LC_METHOD}.")
    return "\n".join(lines).rstrip() + "\n"
