"""The parent's top-k next-token log-probabilities, as an OpenAI-protocol reply gives them.

``choices[0].logprobs.content`` holds one entry per answer token, each with its
``top_logprobs``. The protocol names tokens by their text (and, from OpenAI and vLLM, their
UTF-8 ``bytes``), not by id; llama.cpp's server adds the ``id``, and vLLM run with
``--return-tokens-as-token-ids`` writes the text as ``token_id:N``. Ids are found from these
by :mod:`overbrainer.pipeline.vocab`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

TOKEN_ID_PREFIX = "token_id:"  # noqa: S105 - a protocol word, not a secret


@dataclass(frozen=True)
class Candidate:
    """One of the parent's likely next tokens: its text, its bytes and its id where the
    server said them, and its log-probability."""

    text: str
    raw: bytes | None
    id: int | None
    logprob: float


@dataclass(frozen=True)
class Position:
    """One token of the answer: the one the parent wrote, and its top-k candidates for
    that place, most likely first."""

    chosen: Candidate
    top: tuple[Candidate, ...]


def request_fields(top_k: int) -> dict[str, Any]:
    """What a chat request adds to be answered with ``top_k`` logprobs per token."""
    return {"logprobs": True, "top_logprobs": top_k}


def parse_positions(logprobs: Any) -> tuple[Position, ...] | None:
    """The positions of ``choices[0].logprobs``, or None when the reply holds none; raises
    TypeError or KeyError when it holds something else."""
    if logprobs is None:
        return None
    content = logprobs["content"]
    if content is None:
        return None
    if not isinstance(content, list):
        raise TypeError("logprobs.content")
    return tuple(_position(entry) for entry in content)


def _position(entry: Any) -> Position:
    top = entry.get("top_logprobs") if isinstance(entry, dict) else None
    if not isinstance(top, list):
        raise TypeError("top_logprobs")
    found = [_candidate(item) for item in top]
    found.sort(key=lambda candidate: -candidate.logprob)
    return Position(_candidate(entry), tuple(found))


def _candidate(item: Any) -> Candidate:
    if not isinstance(item, dict):
        raise TypeError("top_logprobs item")
    text, logprob = item["token"], item["logprob"]
    if not isinstance(text, str) or isinstance(logprob, bool) or not isinstance(
        logprob, int | float
    ):
        raise TypeError("token")
    # A server's -inf (a token masked out): as unlikely as a float says.
    value = float(logprob) if math.isfinite(logprob) else -math.inf
    raw = item.get("bytes")
    raw_bytes = bytes(raw) if isinstance(raw, list) and all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b < 256
        for b in raw
    ) else None
    token_id = item.get("id")
    if not (isinstance(token_id, int) and not isinstance(token_id, bool) and token_id >= 0):
        token_id = None
    if token_id is None and text.startswith(TOKEN_ID_PREFIX):
        digits = text.removeprefix(TOKEN_ID_PREFIX)
        token_id = int(digits) if digits.isdigit() else None
    return Candidate(text, raw_bytes, token_id, value)
