"""A small in-process event bus: the stages and the training follower say what happens, and
whoever listens (the Prometheus endpoint, the TUI) hears it, in the publisher's thread.

Publishing with no listener costs a dict look-up; a listener that raises is dropped from
that event with a debug line, never breaking the work that published.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

Listener = Callable[["Event"], None]


@dataclass(frozen=True)
class Event:
    """``kind`` names what happened; ``fields`` hold its figures (never a prompt, an answer
    or a secret).

    Kinds: ``stage_start`` (stage), ``item_done`` (stage, model, input_tokens,
    output_tokens, cost or None), ``item_skipped`` (stage), ``item_failed`` (stage),
    ``item_retry`` (stage), ``item_rate_limited`` (stage: a 429 waited out), ``stage_end``
    (stage, excluded), ``train_event`` (run_id, event: one metrics.jsonl line),
    ``train_phase`` (run_id, phase), ``train_end`` (run_id).
    """

    kind: str
    fields: dict[str, Any] = field(default_factory=dict)


TOPIC: ContextVar[str | None] = ContextVar("overbrainer_topic", default=None)
"""The topic of the dataset item being worked on in this task (an asyncio task has a
context of its own), so a stage's counts can be told apart by topic without passing it to
every call that counts."""


def set_topic(name: str) -> None:
    """Say that this task now works on an item of topic ``name``."""
    TOPIC.set(name)


_listeners: list[Listener] = []
_lock = threading.Lock()


def subscribe(listener: Listener) -> Callable[[], None]:
    """Hear every event from now on; returns the function that stops it."""
    with _lock:
        _listeners.append(listener)

    def unsubscribe() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return unsubscribe


def listening() -> bool:
    """Whether anyone listens: a publisher with figures to work out for an event (a price
    to look up) skips them when no one does."""
    return bool(_listeners)


def publish(kind: str, **fields: Any) -> None:
    """Tell every listener that ``kind`` happened."""
    if not _listeners:
        return
    with _lock:
        listeners = list(_listeners)
    event = Event(kind, fields)
    for listener in listeners:
        try:
            listener(event)
        except Exception as error:  # noqa: BLE001 - a listener never breaks the publisher
            from loguru import logger

            logger.debug(f"an event listener failed on {kind}: {error!r}")
