"""Working through items with a bounded number in flight."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class Width:
    """How many items :func:`for_each` keeps in flight, changed while it runs: a served
    engine's live figure (``pipeline.served_live``) moves it."""

    def __init__(self, value: int) -> None:
        self._value = max(1, value)
        self.in_flight = 0
        """The items in flight now, across the ``for_each`` using it."""
        self._grown: list[Callable[[], None]] = []

    @property
    def value(self) -> int:
        return self._value

    def on_growth(self, start: Callable[[], None], *, remove: bool = False) -> None:
        """Call ``start`` each time the width grows (``remove``: no longer)."""
        if remove:
            self._grown.remove(start)
        else:
            self._grown.append(start)

    def set(self, value: int) -> None:
        """Keep ``value`` in flight (at least one): more start at once, fewer as they end."""
        grew = value > self._value
        self._value = max(1, value)
        if grew:
            for start in list(self._grown):
                start()


async def for_each(
    items: Sequence[T], handle: Callable[[T], Awaitable[None]], concurrency: int | Width
) -> None:
    """``handle`` every item, at most ``concurrency`` at once, each started as a slot frees.

    ``handle`` deals with its item's own failures. An exception it lets out (a fatal
    provider error) stops the rest from starting, but the items in flight go on to their
    end: their replies are paid for and they save them. Then the first exception is raised
    here. Cancellation (Ctrl-C) still stops everything at once.
    """
    width = concurrency if isinstance(concurrency, Width) else Width(concurrency)
    pending = deque(items)
    errors: list[Exception] = []

    group = asyncio.TaskGroup()

    def start() -> None:
        while pending and not errors and width.in_flight < width.value:
            work = one(pending[0])
            try:
                group.create_task(work)
            except RuntimeError:  # the width grew as the group is cancelled: none starts
                work.close()
                return
            pending.popleft()
            width.in_flight += 1

    async def one(item: T) -> None:
        try:
            await handle(item)
        except Exception as error:  # noqa: BLE001 - raised below, once the others end
            errors.append(error)
        finally:
            width.in_flight -= 1
        start()  # not on cancellation: the group is being torn down

    width.on_growth(start)
    try:
        async with group:
            start()
    finally:
        width.on_growth(start, remove=True)
    if errors:
        raise errors[0]
