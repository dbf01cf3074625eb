"""A small in-process event bus: the stages and the training follower say what happens, and
whoever listens (the Prometheus endpoint, the TUI) hears it, in the publisher's thread.

Each kind of event is a frozen dataclass of its own, so a publisher and a listener agree on
its fields through the type checker, not through a dict's keys; its ``kind`` names it in a
log line. Publishing with no listener costs making the event (under a microsecond) and a
list check; a listener that raises is dropped from that event with a debug line, never
breaking the work that published. Events carry figures, never a prompt, an answer or a
secret.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias

from loguru import logger

if TYPE_CHECKING:
    from overbrainer.runs.machine import MachineSample


@dataclass(frozen=True)
class StageStart:
    """A stage began."""

    kind: ClassVar[str] = "stage_start"
    stage: str


@dataclass(frozen=True)
class StageEnd:
    """A stage ended, however it ended."""

    kind: ClassVar[str] = "stage_end"
    stage: str


@dataclass(frozen=True)
class ItemCounted:
    """``count`` dataset items of ``stage`` reached a result; ``topic``: theirs, where the
    publisher knows it. The base of the four item results, never published itself."""

    kind: ClassVar[str]
    result: ClassVar[Literal["done", "skipped", "failed", "excluded"]]
    stage: str
    count: int = 1
    topic: str | None = None


@dataclass(frozen=True)
class ItemDone(ItemCounted):
    """Items completed."""

    kind: ClassVar[str] = "item_done"
    result: ClassVar[Literal["done"]] = "done"


@dataclass(frozen=True)
class ItemSkipped(ItemCounted):
    """Items already done before, left as they were."""

    kind: ClassVar[str] = "item_skipped"
    result: ClassVar[Literal["skipped"]] = "skipped"


@dataclass(frozen=True)
class ItemFailed(ItemCounted):
    """Items that failed (the next run retries them)."""

    kind: ClassVar[str] = "item_failed"
    result: ClassVar[Literal["failed"]] = "failed"


@dataclass(frozen=True)
class ItemExcluded(ItemCounted):
    """Items or records set aside (near-duplicates, excluded answers)."""

    kind: ClassVar[str] = "item_excluded"
    result: ClassVar[Literal["excluded"]] = "excluded"


@dataclass(frozen=True)
class ItemRetry:
    """A request of ``stage`` is tried again."""

    kind: ClassVar[str] = "item_retry"
    stage: str
    topic: str | None = None


@dataclass(frozen=True)
class ItemRateLimited:
    """A 429 of ``stage``, waited out (or the one the stage gave up at)."""

    kind: ClassVar[str] = "item_rate_limited"
    stage: str
    topic: str | None = None


@dataclass(frozen=True)
class Tokens:
    """The tokens of answered requests of ``model``; ``cost``: in USD, None where the price
    is unknown."""

    kind: ClassVar[str] = "tokens"
    stage: str
    model: str
    input_tokens: int
    output_tokens: int
    cost: float | None
    topic: str | None = None


@dataclass(frozen=True)
class TrainEvent:
    """One metrics.jsonl line of the followed run, and its phase after it."""

    kind: ClassVar[str] = "train_event"
    run_id: str
    event: dict[str, Any]
    phase: str


@dataclass(frozen=True)
class TrainPhase:
    """The followed run is in ``phase`` now."""

    kind: ClassVar[str] = "train_phase"
    run_id: str
    phase: str


@dataclass(frozen=True)
class TrainMachine:
    """A new sample of the followed run's machine."""

    kind: ClassVar[str] = "train_machine"
    run_id: str
    sample: MachineSample


@dataclass(frozen=True)
class TrainEnd:
    """Nothing follows the run any more."""

    kind: ClassVar[str] = "train_end"
    run_id: str


Event: TypeAlias = (
    StageStart
    | StageEnd
    | ItemDone
    | ItemSkipped
    | ItemFailed
    | ItemExcluded
    | ItemRetry
    | ItemRateLimited
    | Tokens
    | TrainEvent
    | TrainPhase
    | TrainMachine
    | TrainEnd
)
"""Every kind of event the bus carries."""

Listener = Callable[[Event], None]


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


def publish(event: Event) -> None:
    """Tell every listener that ``event`` happened."""
    if not _listeners:
        return
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception as error:  # noqa: BLE001 - a listener never breaks the publisher
            logger.debug(f"an event listener failed on {event.kind}: {error!r}")
