"""Working through items with a bounded number in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


async def for_each(
    items: Sequence[T], handle: Callable[[T], Awaitable[None]], concurrency: int
) -> None:
    """``handle`` every item, at most ``concurrency`` at once, each started as a slot frees.

    ``handle`` deals with its item's own failures. An exception it lets out (a fatal
    provider error) stops the rest from starting, but the items in flight go on to their
    end: their replies are paid for and they save them. Then the first exception is raised
    here. Cancellation (Ctrl-C) still stops everything at once.
    """
    pending = iter(items)
    errors: list[Exception] = []

    async def worker() -> None:
        for item in pending:  # shared: each worker takes the next item when it is free
            if errors:
                return
            try:
                await handle(item)
            except Exception as error:  # noqa: BLE001 - raised below, once the others end
                errors.append(error)
                return

    async with asyncio.TaskGroup() as group:
        for _ in range(min(concurrency, len(items))):
            group.create_task(worker())
    if errors:
        raise errors[0]
