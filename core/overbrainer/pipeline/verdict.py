"""A judge's verdict between two answers, A or B or a tie, as its reply gives it: read the
same by ``compare`` (the child against the parent) and by ``[pipeline] select = "judge"``
(a question's answers against each other)."""

from __future__ import annotations

import json

VERDICTS = ("A", "B", "TIE")


def strip_reasoning(text: str) -> str:
    """``text`` without ``<think>…</think>``: an unclosed open drops the rest, a close with
    no open before it drops what precedes it (a child that learnt to think without the
    opening tag may write several: the last part that says anything is the answer);
    trimmed."""
    close = text.find("</think>")
    opening = text.find("<think>")
    if close != -1 and (opening == -1 or close < opening):
        text = text[close + len("</think>") :]
    while (opening := text.find("<think>")) != -1:
        end = text.find("</think>", opening)
        if end == -1:
            text = text[:opening]
            break
        text = text[:opening] + text[end + len("</think>") :]
    if "</think>" in text:  # what the last stray close leaves, or the last part saying anything
        text = next((part for part in reversed(text.split("</think>")) if part.strip()), "")
    return text.strip()


def parse_verdict(text: str) -> tuple[str, str] | None:
    """``(A|B|tie, reason)`` from the judge's reply (the JSON between its first ``{`` and its
    last ``}``), or None when it holds none. A reply of one word, A, B or tie, is read too:
    projects made before the JSON verdict have a ``judge.txt`` that asks for it."""
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        word = text.strip().rstrip(".").upper()
        return ("tie" if word == "TIE" else word, "") if word in VERDICTS else None
    try:
        data = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    verdict = str(data.get("verdict", "")).strip().upper()
    if verdict not in VERDICTS:
        return None
    reason = data.get("reason")
    return ("tie" if verdict == "TIE" else verdict), (
        reason.strip() if isinstance(reason, str) else ""
    )


STRICTER = (
    "\n\nYour previous reply could not be read. Reply with the JSON object alone, nothing "
    'before or after it: {"verdict": "A"}, {"verdict": "B"} or {"verdict": "tie"}, with a '
    '"reason" of one sentence.'
)
"""Added to the judge's prompt when its first reply held no verdict."""
