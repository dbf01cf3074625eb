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

    ``handle`` deals with its item's own failures; an exception it lets out stops the rest
    (those in flight are cancelled) and is raised here.
    """
    pending = iter(items)

    async def worker() -> None:
        for item in pending:  # shared: each worker takes the next item when it is free
            await handle(item)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(items))):
                group.create_task(worker())
    except BaseExceptionGroup as errors:
        raise errors.exceptions[0] from None
