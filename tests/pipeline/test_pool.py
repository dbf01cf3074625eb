"""``for_each`` keeps as many items in flight as its width says, while that width moves
(a served engine's live figure), and a width that grows as the work is cancelled starts
nothing."""

from __future__ import annotations

import asyncio

import pytest

from overbrainer.pipeline.pool import Width, for_each


def test_the_number_in_flight_follows_the_width_as_it_moves():
    seen: list[int] = []

    async def scenario() -> None:
        width = Width(2)
        release = asyncio.Event()

        async def handle(item: int) -> None:
            seen.append(width.in_flight)
            await release.wait()

        work = asyncio.create_task(for_each(range(12), handle, width))
        await asyncio.sleep(0.01)
        assert width.in_flight == 2
        width.set(5)  # more start at once
        await asyncio.sleep(0.01)
        assert width.in_flight == 5
        width.set(1)  # fewer as they end
        release.set()
        await work

    asyncio.run(scenario())
    assert max(seen) == 5
    assert seen[-1] == 1, "the last items went one at a time"


def test_a_width_grown_while_the_work_is_cancelled_starts_nothing():
    started: list[int] = []

    async def scenario() -> None:
        width = Width(1)

        async def handle(item: int) -> None:
            started.append(item)
            await asyncio.sleep(10)

        work = asyncio.create_task(for_each(range(5), handle, width))
        await asyncio.sleep(0.01)
        work.cancel()
        await asyncio.sleep(0)  # the group is being torn down now
        width.set(4)
        with pytest.raises(asyncio.CancelledError):
            await work

    asyncio.run(scenario())
    assert started == [0]


def test_an_error_stops_the_rest_once_those_in_flight_end():
    done: list[int] = []

    async def handle(item: int) -> None:
        await asyncio.sleep(0.01 * item)
        if item == 1:
            raise ValueError("fatal")
        done.append(item)

    with pytest.raises(ValueError, match="fatal"):
        asyncio.run(for_each(range(10), handle, 3))
    assert done == [0, 2, 3], "those in flight as it failed ended; none started after"
