"""A chat reply as both protocols reduce it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from overbrainer.providers.logprobs import Position

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
    logprobs: tuple[Position, ...] | None = None
    """The parent's top-k candidates for each token of ``content`` (and of the reasoning
    before it, when the server streams both as one text), when they were asked for."""


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


TOKENS_MAX = 10**9
"""The most tokens a usage figure may say: no model reads or writes a billion tokens in one
request, so a larger figure is a broken or hostile server's (priced as given it would pass
any budget at once, and past a float's range it cannot be priced at all)."""


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= TOKENS_MAX


def counted(*values: object) -> bool:
    """Whether each usage figure is a whole number of tokens a reply can hold: a reply
    without that is counted at its request's bound instead."""
    return all(_whole(v) for v in values)


def token_count(value: object) -> int:
    """A usage figure as an integer; anything else (more than ``TOKENS_MAX`` too) counts
    as 0."""
    return value if isinstance(value, int) and _whole(value) else 0
