"""The Anthropic Messages protocol.

Claude shows only a summary of its thinking (or hides it, redacted): its answers never carry
raw reasoning.
"""

from __future__ import annotations

from typing import Any

from overbrainer.config.model import Role
from overbrainer.providers.completion import (
    Completion,
    FinishReason,
    ReasoningKind,
    counted,
    split_think_prefix,
    token_count,
)

CHAT_PATH = "messages"
SAMPLES_IN_ONE = False
"""The protocol has no ``n``: each reply is a request of its own."""
MODELS_PATH = "models?detailed=true"
VERSION = "2023-06-01"

_FINISH: dict[object, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "refusal": "refusal",
}


def headers(api_key: str | None) -> dict[str, str]:
    found = {"anthropic-version": VERSION}
    if api_key:
        found["x-api-key"] = api_key
    return found


def chat_body(role: Role, messages: list[dict[str, str]], n: int = 1) -> dict[str, Any]:
    """The request of ``messages`` (``n``: one reply, the protocol has no other)."""
    if n != 1:
        raise ValueError("the anthropic protocol has no n: ask each reply on its own")
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    body: dict[str, Any] = {
        "model": role.model,
        "max_tokens": role.max_tokens,
        "messages": [m for m in messages if m["role"] != "system"],
    }
    if system:
        body["system"] = system
    if role.temperature is not None:
        body["temperature"] = role.temperature
    if role.reasoning:
        if role.thinking_budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": role.thinking_budget}
        else:
            body["thinking"] = {"type": "adaptive"}
            if role.reasoning_effort not in (None, "none"):
                body["output_config"] = {"effort": role.reasoning_effort}
    return body


def parse_chats(data: Any) -> list[Completion]:
    """The one reply in ``data``, as a list (the protocol gives no other)."""
    return [parse_chat(data)]


def parse_chat(data: Any) -> Completion:
    """The reply in ``data``; raises KeyError or TypeError when it is not one."""
    blocks = data["content"]
    if not isinstance(blocks, list):
        raise TypeError("content")
    texts, thoughts, redacted, signed = [], [], False, False
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
            signed = signed or bool(block.get("signature"))
        elif kind == "redacted_thinking":
            redacted = True
    thinking = "\n\n".join(t.strip() for t in thoughts if t.strip())
    content, inline = split_think_prefix("".join(texts))
    # Anthropic signs its thinking (a summary, for its newer models); an open-weights server
    # speaking this protocol sends the model's own thinking, unsigned: raw.
    found: ReasoningKind = "raw" if thinking and not signed else "summary"
    if not thinking:
        thinking, found = inline or "", "raw" if inline else "none"
        if redacted and not inline:
            found = "redacted"
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        content=content,
        reasoning=thinking or None,
        reasoning_kind=found,
        finish_reason=_FINISH.get(data.get("stop_reason"), "other"),
        input_tokens=token_count(usage.get("input_tokens")),
        output_tokens=token_count(usage.get("output_tokens")),
        metered=counted(usage.get("input_tokens"), usage.get("output_tokens")),
    )
