"""One cheap request per role, to see that each provider answers before anything is paid.

A chat role is asked to reply ``ok`` with few tokens (a reasoning model still gets room to
show whether its reasoning comes back raw); the embedder embeds one word. What comes back:
how long it took, whether the provider gives prices for the model, and what kind of
reasoning the reply carried.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace

from loguru import logger

from overbrainer.config.model import ROLE_NAMES as ROLES
from overbrainer.config.model import Role, Settings
from overbrainer.errors import UserError
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError
from overbrainer.providers.limiter import Refusal
from overbrainer.providers.prices import Price, PriceBook
from overbrainer.providers.registry import ProviderSet

PROBE = [{"role": "user", "content": "Reply with the single word: ok"}]
PROBE_TOKENS = 512


@dataclass(frozen=True)
class Probe:
    """What one role's request showed; ``error`` when it got no reply."""

    role: str
    provider: str
    model: str
    seconds: float
    error: str | None = None
    price: Price | None = None
    reasoning: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    completion: Completion | None = None
    """The reply itself (the parent's logprobs, when they were asked for)."""

    @property
    def cost(self) -> float | None:
        if self.price is None:
            return None
        return self.input_tokens * self.price.prompt + self.output_tokens * self.price.completion


def probe_role(role: Role) -> Role:
    """``role`` with a small token budget, room left for a thinking budget it has."""
    tokens = min(role.max_tokens, PROBE_TOKENS)
    if role.thinking_budget is not None:
        tokens = role.thinking_budget + 64
    return role.model_copy(update={"max_tokens": tokens})


async def probe_all(settings: Settings, env: Mapping[str, str]) -> list[Probe]:
    """Each configured role, one after the other (so that latencies mean something), each
    on clients of its own: a refused key of one provider does not stop the others' probes."""
    book = PriceBook()
    found: list[Probe] = []
    for name in ROLES:
        role = getattr(settings.roles, name)
        if role is None:
            continue
        providers = ProviderSet(settings, env, book)
        top_k = logprobs_asked(settings) if name == "parent" else None
        try:
            probe = await _probe(providers, name, role, top_k)
            await providers.settle_prices()
            price = providers.price(role.provider, role.model)
        finally:
            await providers.aclose()
        found.append(replace(probe, price=price))
    return found


def logprobs_asked(settings: Settings) -> int | None:
    """The top-k the parent is asked for: ``training.kd.top_k`` when distilling logits."""
    training = settings.training
    if training is None or training.distill != "logits":
        return None
    return training.kd.top_k


async def _probe(providers: ProviderSet, name: str, role: Role, top_k: int | None) -> Probe:
    started = time.monotonic()

    def failed(message: str) -> Probe:
        return Probe(name, role.provider, role.model, time.monotonic() - started, message)

    def no_retry(message: str, delay: float) -> None:
        raise ProviderError(message)

    def limited(refusal: Refusal) -> None:  # waited out, as every command does
        asked = "the provider asks for" if refusal.pause.asked else "no wait told; backing off"
        logger.info(
            f"providers check: {name}: {refusal.message}; {asked} {refusal.pause.seconds:.1f} s"
        )

    try:
        client = providers.client(role.provider)
        if name == "embedder":
            _, tokens = await client.embed(role.model, ["ok"], no_retry)
            return Probe(name, role.provider, role.model, time.monotonic() - started,
                         input_tokens=tokens)
        completion = await client.chat(
            probe_role(role), PROBE, no_retry, limited, top_logprobs=top_k
        )
    except ProviderError as error:
        if top_k is not None and "logprob" in error.message.lower():
            # The server refused the logprobs it was asked for: say which setting asked.
            return failed(
                f"{error.message} (asked for top_logprobs = {top_k}, training.kd.top_k: "
                "lower it to what the server allows, or raise the server's limit)"
            )
        return failed(error.message)
    except UserError as error:  # no URL, a refused key (fatal): shown, the others go on
        return failed(error.message)
    return Probe(
        name,
        role.provider,
        role.model,
        time.monotonic() - started,
        reasoning=completion.reasoning_kind,
        input_tokens=completion.input_tokens,
        output_tokens=completion.output_tokens,
        completion=completion,
    )

