"""What keeping the parent's logprobs adds to ``plan`` (``distill = "logits"``): the answer
tokens whose top-k the parent returns, what they add to ``data/logprobs.bin``, and what they
cost beyond the answers' own tokens.

No provider overbrainer knows bills logprobs apart (OpenAI's and OpenAI-compatible servers'
top logprobs come with the output tokens they describe; a served parent costs its hours):
``plan`` assumes them free unless ``[providers.NAME.prices]`` gives the model a ``logprobs``
price, USD per million answer tokens returned with their top-k.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from overbrainer.config.model import Settings

BYTES_PER_CANDIDATE = 2
"""What a candidate of a token's top-k adds to ``logprobs.bin`` once compressed: 41 bytes a
token at ``top_k = 20`` for Zipf-distributed ids (tests/pipeline/test_logits_store.py)."""
BYTES_PER_TOKEN = 1
"""What a token adds besides its candidates: its chosen id and count, compressed."""


@dataclass(frozen=True)
class LogprobsPlan:
    """The answers' logprobs still to come: tokens, top-k, bytes on disk, dollars."""

    provider: str
    tokens: int
    top_k: int
    size_bytes: int
    usd: float
    priced: bool
    """Whether the prices table gives a logprobs price (else they are assumed free)."""

    def as_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "top_k": self.top_k,
            "bytes": self.size_bytes,
            "usd": round(self.usd, 6),
            "priced": self.priced,
        }


def plan_logprobs(settings: Settings, answer_tokens: int) -> LogprobsPlan | None:
    """The logprobs of ``answer_tokens`` answer tokens to come; None when the project
    distils on the text."""
    training = settings.training
    if training is None or training.distill != "logits":
        return None
    parent = settings.roles.parent
    table = settings.providers.get(parent.provider)
    price = table.prices.get(parent.model) if table is not None else None
    per_million = price.logprobs if price is not None else None
    k = training.kd.top_k
    return LogprobsPlan(
        provider=parent.provider,
        tokens=answer_tokens,
        top_k=k,
        size_bytes=answer_tokens * (BYTES_PER_TOKEN + BYTES_PER_CANDIDATE * k),
        usd=answer_tokens * (per_million or 0.0) / 1_000_000,
        priced=per_million is not None,
    )


def logprobs_line(plan: LogprobsPlan) -> str:
    """``plan``'s row: ``12000 answer tokens x top 20: about 480 KB in data/logprobs.bin; …``"""
    size = _size(plan.size_bytes)
    head = f"{plan.tokens} answer tokens x top {plan.top_k}: about {size} in data/logprobs.bin"
    if plan.priced:
        return f"{head}; ${plan.usd:.4f} at the prices table's logprobs price"
    return (
        f"{head}; $0.0000, assumed not billed beyond the answers' output tokens (set "
        f"[providers.{plan.provider}.prices] logprobs, USD per million tokens, "
        "where a provider bills them)"
    )


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"
