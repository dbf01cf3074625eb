"""The OpenAI chat-completions protocol (OpenAI, OpenRouter, vLLM, llama.cpp, …).

Reasoning comes from ``message.reasoning`` / ``reasoning_content`` (raw), from
``reasoning_details`` (text: raw, summary: summary, encrypted: redacted), or from a
``<think>…</think>`` prefix of the content.
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
from overbrainer.providers.logprobs import Position, parse_positions

CHAT_PATH = "chat/completions"
SAMPLES_IN_ONE = True
"""A request may ask for several replies (``n``): one prompt, paid once."""
EMBEDDINGS_PATH = "embeddings"
MODELS_PATH = "models?detailed=true"

_FINISH: dict[object, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
}


def headers(api_key: str | None) -> dict[str, str]:
    """Bearer authentication when a key is set; a local server may need none."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def chat_body(role: Role, messages: list[dict[str, str]], n: int = 1) -> dict[str, Any]:
    """The request of ``messages``; ``n`` replies to them (sent only when more than one)."""
    body: dict[str, Any] = {
        "model": role.model,
        "messages": messages,
        "max_tokens": role.max_tokens,
    }
    if n > 1:
        body["n"] = n
    if role.temperature is not None:
        body["temperature"] = role.temperature
    if role.reasoning_effort == "none":
        body["reasoning_effort"] = "none"
    elif role.reasoning:
        effort = role.reasoning_effort
        body["reasoning"] = {"effort": effort} if effort else {"enabled": True}
    return body


def parse_chat(data: Any) -> Completion:
    """The reply in ``data``; raises KeyError, IndexError or TypeError when it is not one."""
    return parse_chats(data)[0]


def parse_chats(data: Any) -> list[Completion]:
    """Each reply in ``data`` (``n`` of them), by its index. The usage is the request's:
    the first reply carries the prompt's tokens, and the replies share the output's
    (the protocol does not say each one's), so that their sums are what was billed."""
    choices = sorted(data["choices"], key=lambda choice: choice.get("index", 0))
    if not choices:
        raise IndexError("choices")
    usage = data.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    metered = counted(usage.get("prompt_tokens"), usage.get("completion_tokens"))
    tokens_in = token_count(usage.get("prompt_tokens"))
    share, rest = divmod(token_count(usage.get("completion_tokens")), len(choices))
    return [
        _choice(choice, tokens_in if i == 0 else 0, share + (rest if i == 0 else 0), metered)
        for i, choice in enumerate(choices)
    ]


def _choice(choice: Any, tokens_in: int, tokens_out: int, metered: bool) -> Completion:
    message = choice["message"]
    if not isinstance(message, dict):
        raise TypeError("message")
    content, inline = split_think_prefix(_text(message.get("content")))
    reasoning, kind = _reasoning(message)
    if kind == "none" and inline is not None:
        reasoning, kind = inline, "raw"
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        finish: FinishReason = "refusal"
    else:
        finish = _FINISH.get(choice.get("finish_reason"), "other")
    return Completion(
        content=content,
        reasoning=reasoning,
        reasoning_kind=kind,
        finish_reason=finish,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        metered=metered,
        logprobs=_positions(choice.get("logprobs")),
    )


def _positions(logprobs: Any) -> tuple[Position, ...] | None:
    """The reply's logprobs; one whose shape is not the protocol's is none (its text is
    still an answer: distillation refuses it, naming why)."""
    try:
        return parse_positions(logprobs)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(
            part["text"] for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    raise TypeError("content")


def _reasoning(message: dict[str, Any]) -> tuple[str | None, ReasoningKind]:
    details = message.get("reasoning_details")
    if isinstance(details, list):
        found: dict[str, list[str]] = {"text": [], "summary": [], "encrypted": []}
        for detail in details:
            if not isinstance(detail, dict):
                continue
            kind = str(detail.get("type", "")).removeprefix("reasoning.")
            field = {"text": "text", "summary": "summary", "encrypted": "data"}.get(kind)
            value = detail.get(field) if field else None
            if isinstance(value, str) and value.strip():
                found[kind].append(value.strip())
        if found["text"]:
            return "\n\n".join(found["text"]), "raw"
        if found["summary"]:
            return "\n\n".join(found["summary"]), "summary"
        if found["encrypted"]:
            return None, "redacted"
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip(), "raw"
    return None, "none"


def embeddings_body(model: str, texts: list[str]) -> dict[str, Any]:
    return {"model": model, "input": texts}


def parse_embeddings(data: Any, count: int) -> tuple[list[list[float]], int]:
    """The vectors in input order and the tokens they cost; raises ValueError when the
    reply holds another number of vectors than ``count``."""
    items = sorted(data["data"], key=lambda item: item["index"])
    if len(items) != count:
        raise ValueError(f"the provider returned {len(items)} embeddings for {count} inputs")
    vectors = []
    for item in items:
        vector = item["embedding"]
        if not isinstance(vector, list) or not all(isinstance(x, int | float) for x in vector):
            raise TypeError("embedding")
        vectors.append([float(x) for x in vector])
    usage = data.get("usage") or {}
    return vectors, token_count(usage.get("prompt_tokens"))
