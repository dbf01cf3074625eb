"""Model prices, read from the provider once per command: OpenRouter's ``GET models`` lists
a ``pricing``, LiteLLM's ``GET model/info`` a ``model_info``; a LiteLLM reply also says what
it cost (``x-litellm-response-cost``)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from overbrainer.config.model import Settings


@dataclass(frozen=True)
class Price:
    """USD per token."""

    prompt: float
    completion: float


def parse_prices(data: Any) -> dict[str, Price]:
    """The price of each model listed in ``data`` that has one.

    Strings are USD per token (OpenRouter); numbers count only with
    ``unit = "per_million_tokens"``. A negative or unreadable price is no price.
    """
    prices: dict[str, Price] = {}
    models = data.get("data") if isinstance(data, dict) else None
    for model in models if isinstance(models, list) else []:
        if not isinstance(model, dict) or not isinstance(model.get("id"), str):
            continue
        pricing = model.get("pricing")
        if not isinstance(pricing, dict):
            continue
        prompt = _per_token(pricing.get("prompt"), pricing)
        completion = _per_token(pricing.get("completion"), pricing)
        if prompt is not None and completion is not None:
            prices[model["id"]] = Price(prompt, completion)
    return prices


MOST_PER_TOKEN = 0.01
"""The dearest price believed, in USD a token ($10,000 a million): anything above is a
provider's typo or a unit mistaken, and no price at all is safer than that one."""
_DECIMAL = re.compile(r"\s*\d+(?:\.\d*)?(?:[eE][-+]?\d+)?\s*|\s*\.\d+(?:[eE][-+]?\d+)?\s*")
"""A price as a string: a plain decimal (``float`` also takes ``1_000``, ``inf``, ``nan``)."""


def _per_token(value: Any, pricing: Mapping[str, Any]) -> float | None:
    """A listed price in USD a token, or None: unreadable, not finite, negative, or above
    ``MOST_PER_TOKEN``."""
    if isinstance(value, str):
        if not _DECIMAL.fullmatch(value):
            return None
        number = float(value)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if pricing.get("unit") != "per_million_tokens":
            return None
        listed = _float(value)
        if listed is None:
            return None
        number = listed / 1_000_000
    else:
        return None
    return number if math.isfinite(number) and 0 <= number <= MOST_PER_TOKEN else None


def _float(value: int | float) -> float | None:
    """``value`` as a float; None for an integer past a float's range (JSON has them)."""
    try:
        return float(value)
    except OverflowError:
        return None


def _usd_a_token(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = _float(value)
    if number is None:
        return None
    return number if math.isfinite(number) and 0 <= number <= MOST_PER_TOKEN else None


STATED_COST = "x-litellm-response-cost"
"""The header where a gateway says what one reply cost, in USD (LiteLLM's)."""


def parse_model_info(data: Any) -> dict[str, Price]:
    """The price of each model LiteLLM's ``GET model/info`` lists with one: ``model_name``
    by its ``model_info``'s ``input_cost_per_token`` and ``output_cost_per_token`` (USD per
    token). A name served by several deployments takes the dearest of them: a budget
    reserves what a request can cost at most."""
    prices: dict[str, Price] = {}
    models = data.get("data") if isinstance(data, dict) else None
    for model in models if isinstance(models, list) else []:
        if not isinstance(model, dict) or not isinstance(model.get("model_name"), str):
            continue
        info = model.get("model_info")
        if not isinstance(info, dict):
            continue
        prompt = _usd_a_token(info.get("input_cost_per_token"))
        completion = _usd_a_token(info.get("output_cost_per_token"))
        if prompt is None or completion is None:
            continue
        known = prices.get(model["model_name"])
        if known is not None:
            prompt, completion = max(prompt, known.prompt), max(completion, known.completion)
        prices[model["model_name"]] = Price(prompt, completion)
    return prices


def stated_cost(headers: Mapping[str, str]) -> float | None:
    """What a reply says it cost, in USD (``x-litellm-response-cost``), when it says it as
    a finite, non-negative number; else None."""
    value = headers.get(STATED_COST)
    if value is None or not _DECIMAL.fullmatch(value):
        return None  # float() would take "1_000", "nan" and "inf" too
    number = float(value)
    return number if math.isfinite(number) else None


class PriceBook:
    """The prices each provider gave during one command (None: it gave none)."""

    def __init__(self) -> None:
        self._books: dict[tuple[str, str], dict[str, Price] | None] = {}

    def knows(self, provider: str, base_url: str) -> bool:
        return (provider, base_url) in self._books

    def store(self, provider: str, base_url: str, prices: dict[str, Price] | None) -> None:
        self._books[(provider, base_url)] = prices

    def price(self, provider: str, base_url: str, model: str) -> Price | None:
        return (self._books.get((provider, base_url)) or {}).get(model)


def table_price(settings: Settings, provider: str, model: str) -> Price | None:
    """``model``'s price from the ``[providers.NAME.prices]`` table (USD per million
    tokens there), per token; it comes before what the provider's ``/models`` says."""
    table = settings.providers.get(provider)
    price = table.prices.get(model) if table is not None else None
    if price is None:
        return None
    return Price(price.input / 1_000_000, price.output / 1_000_000)


def discounted(price: Price, discount: float) -> Price:
    """``price`` less ``discount`` (a share: 0.5 is half price), as a batch API charges."""
    return Price(price.prompt * (1 - discount), price.completion * (1 - discount))
