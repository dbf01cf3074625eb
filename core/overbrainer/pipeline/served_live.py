"""A stage against a served vLLM or SGLang keeps the engine's batch full as it runs: it
reads the engine's ``/metrics`` every few seconds and moves the number of requests in
flight. It raises it while nothing waits at the engine and every slot is taken (the engine
could run more), and lowers it to what the engine runs when requests queue there (its
memory holds fewer than its flags say). A read that fails keeps the number as it is."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from loguru import logger

from overbrainer.errors import TransientError
from overbrainer.pipeline.pool import Width
from overbrainer.pipeline.stage import StageContext
from overbrainer.providers.client import Client
from overbrainer.providers.gauges import read_gauges
from overbrainer.providers.served import MAX_IN_FLIGHT, LoadGauges, served_gauges

POLL_S = 5.0
"""How often the engine's gauges are read."""


def next_width(width: int, in_flight: int, running: float, waiting: float) -> int:
    """The number to keep in flight after a read of the engine: ``running`` requests run
    there and ``waiting`` queue, while ``in_flight`` of ours are out of ``width``."""
    if waiting > 0:
        return max(1, min(width, int(running)))  # it holds no more: hold, or lower to it
    if in_flight >= width:
        return min(MAX_IN_FLIGHT, width + max(1, width // 4))  # room, and we use it all
    return width


@dataclass
class _Follow:
    """One stage's following of one served provider's gauges."""

    stage: str
    provider: str
    client: Client
    gauges: LoadGauges
    width: Width
    failed: bool = False
    lowest: int = 0
    highest: int = 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            await self.step()

    async def step(self) -> None:
        names = (self.gauges.running, self.gauges.waiting)
        try:
            read = await read_gauges(self.client, self.gauges.path, names)
        except TransientError as error:
            if not self.failed:
                logger.warning(
                    f"{self.stage}: the served providers.{self.provider}'s "
                    f"{self.gauges.path} cannot be read ({error}): keeping "
                    f"{self.width.value} request(s) at once"
                )
            self.failed = True
            return
        running, waiting = read[self.gauges.running], read[self.gauges.waiting]
        now = self.width.value
        new = next_width(now, self.width.in_flight, running, waiting)
        if new != now:
            logger.debug(
                f"{self.stage}: {new} request(s) at once to providers.{self.provider} "
                f"(it runs {running:g}, {waiting:g} waiting)"
            )
            self.client.resize(new)
            self.width.set(new)
            self.lowest, self.highest = min(self.lowest, new), max(self.highest, new)


@contextlib.asynccontextmanager
async def live_concurrency(
    ctx: StageContext, stage: str, provider: str
) -> AsyncIterator[int | Width]:
    """The stage's concurrency for requests to ``provider``: a :class:`Width` that follows
    the engine's gauges while the block runs, when ``provider`` is served by an engine that
    reports them; else ``[pipeline] concurrency`` as it is."""
    concurrency = ctx.settings.pipeline.concurrency
    served = ctx.settings.providers.get(provider)
    gauges = served_gauges(provider) if served is not None and served.serve else None
    if gauges is None:
        yield concurrency
        return
    width = Width(concurrency)
    follow = _Follow(stage, provider, ctx.providers.client(provider), gauges, width,
                     lowest=concurrency, highest=concurrency)  # fmt: skip
    task = asyncio.create_task(follow.run())
    try:
        yield width
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    if (follow.lowest, follow.highest) != (concurrency, concurrency):
        logger.info(
            f"{stage}: the requests at once to the served providers.{provider} followed its "
            f"{gauges.path} ({gauges.running}, {gauges.waiting}): from {concurrency}, "
            f"between {follow.lowest} and {follow.highest}, {width.value} at the end"
        )
