"""What a provider's protocol module offers the client: each of ``openai_chat`` and
``anthropic_messages`` is one, checked by mypy where ``PROTOCOLS`` names it."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from overbrainer.config.model import Role
from overbrainer.providers.completion import Completion


@runtime_checkable
class WireFormat(Protocol):
    """How one API is spoken: its paths, its headers, its request body and its replies."""

    CHAT_PATH: str
    """Where a chat is sent, under the provider's base URL."""
    MODELS_PATH: str
    """Where the models (and their prices, when listed) are asked for."""
    SAMPLES_IN_ONE: bool
    """Whether one request can ask for several samples (``n``)."""

    def headers(self, api_key: str | None) -> dict[str, str]: ...

    def chat_body(
        self, role: Role, messages: list[dict[str, str]], n: int = 1
    ) -> dict[str, Any]: ...

    def parse_chat(self, data: Any) -> Completion: ...

    def parse_chats(self, data: Any) -> list[Completion]: ...
