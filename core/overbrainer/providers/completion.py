"""A chat reply as both protocols reduce it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "content_filter", "refusal", "other"]
ReasoningKind = Literal["raw", "summary", "redacted", "none"]


@dataclass(frozen=True)
class Completion:
    """The text of a reply, the reasoning that came with it, why it ended, what it cost.

    ``reasoning`` is the reasoning text when one was given (raw or a summary), else None;
    ``reasoning_kind`` says which.
    """

    content: str
    reasoning: str | None
    reasoning_kind: ReasoningKind
    finish_reason: FinishReason
    input_tokens: int
    output_tokens: int
    metered: bool = True
    """Whether the reply said what it used (both counts, whole numbers): one that did not
    is priced at what its request could cost at most."""
    cost: float | None = None
    """USD the reply said it cost (a gateway's ``x-litellm-response-cost``), which wins
    over its tokens at the listed price; None when it said nothing."""


def split_think_prefix(content: str) -> tuple[str, str | None]:
    """``content`` without a leading ``<think>…</think>`` block, and that block's text.

    An unclosed block (a reply cut short while thinking) is all reasoning.
    """
    stripped = content.lstrip()
    if not stripped.startswith("<think>"):
        return content, None
    body = stripped[len("<think>") :]
    reasoning, closed, rest = body.partition("</think>")
    if not closed:
        return "", reasoning.strip() or None
    return rest.lstrip(), reasoning.strip() or None


def counted(*values: object) -> bool:
    """Whether each usage figure is a whole number of tokens."""
    return all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)


def token_count(value: object) -> int:
    """A usage figure as an integer; anything else counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
