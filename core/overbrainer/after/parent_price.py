"""The parent's price for ``compare``'s cost per 1,000 requests: ``[compare]`` when set,
else the price the pipeline already knows (``[providers.NAME.prices]``, then the
provider's own price list, as ``providers check`` shows it), with where it came from."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

from loguru import logger

from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.providers.prices import Price, PriceBook, table_price
from overbrainer.providers.registry import ProviderSet

PER_MILLION = 1_000_000
COMPARE_TABLE = "[compare] parent_price_in/parent_price_out"


@dataclass(frozen=True)
class ParentPrice:
    """USD per million tokens in and out (None: unknown), and where they came from."""

    price_in: float | None
    price_out: float | None
    source: str | None

    def json(self) -> dict[str, float | str | None]:
        return {"in": self.price_in, "out": self.price_out, "source": self.source}


def parent_price(settings: Settings, env: Mapping[str, str]) -> ParentPrice:
    """``[compare]``'s prices when both are set (the user's word wins); else the parent's
    known price, the ``[compare]`` one set filling its side."""
    compare = settings.compare
    price_in, price_out = compare.parent_price_in, compare.parent_price_out
    if price_in is not None and price_out is not None:
        return ParentPrice(price_in, price_out, COMPARE_TABLE)
    role = settings.roles.parent
    known, source = table_price(settings, role.provider, role.model), (
        f"[providers.{role.provider}.prices]"
    )
    if known is None:
        known = asyncio.run(_asked(settings, env, role.provider, role.model))
        source = f"the price list of provider `{role.provider}`"
    one_set = price_in is not None or price_out is not None
    if known is None:
        return ParentPrice(price_in, price_out, COMPARE_TABLE if one_set else None)
    if one_set:
        source = f"{source}, with {COMPARE_TABLE} where set"
    return ParentPrice(
        price_in if price_in is not None else known.prompt * PER_MILLION,
        price_out if price_out is not None else known.completion * PER_MILLION,
        source,
    )


async def _asked(settings: Settings, env: Mapping[str, str], provider: str, model: str
                 ) -> Price | None:
    """What ``provider`` lists as ``model``'s price; None when it lists none or cannot be
    asked (the cost is then not computed, and the summary says how to set it)."""
    providers = ProviderSet(settings, env, PriceBook())
    try:
        return await providers.ask_price(provider, model)
    except UserError as error:
        logger.debug(f"compare: the parent's price not asked: {error.message}")
        return None
    finally:
        await providers.aclose()
