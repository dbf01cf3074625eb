"""What makes a configuration spend money for nothing, found before the first request.

``config check`` lists these problems; ``run`` and ``answers`` refuse to start on the one
that would pay for answers only to exclude them all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from overbrainer.config.env import provider_variable
from overbrainer.config.listen import is_loopback_url
from overbrainer.config.model import ROLE_NAMES, Settings
from overbrainer.pipeline.kd_preflight import logits_problems

ROLES = ROLE_NAMES

_HIDING_NAMES = re.compile(r"^(?:gpt-|claude|gemini|o\d)")


def hides_reasoning(protocol: str, model: str) -> bool:
    """Whether the parent shows only a summary of its reasoning, whatever it returns:
    OpenAI, Anthropic, Google and o-series models, but not gpt-oss. Behind the anthropic
    protocol, Claude; any other model there is an open-weights one served in that dialect
    (vLLM, LiteLLM, llama.cpp), whose thinking is raw."""
    name = model.lower()
    base = name.rsplit("/", 1)[-1]
    if protocol == "anthropic":
        return base.startswith("claude") or name.startswith("anthropic/")
    if base.startswith("gpt-oss"):
        return False
    return name.startswith(("openai/", "anthropic/")) or bool(_HIDING_NAMES.match(base))



def reasoning_problem(settings: Settings) -> str | None:
    """Why every answer of the parent would be excluded as ``no_raw_reasoning``, if so."""
    role = settings.roles.parent
    provider = settings.providers.get(role.provider)
    if not role.reasoning or provider is None:
        return None
    if not hides_reasoning(provider.protocol, role.model):
        return None
    if provider.protocol == "anthropic":
        cause = (
            f"providers.{role.provider} speaks the anthropic protocol to `{role.model}`, "
            "which never returns raw reasoning (only a summary, or none)"
        )
    else:
        cause = f"`{role.model}` returns only a summary of its reasoning, never the raw text"
    return (
        f"roles.parent: reasoning = true, but {cause}: every answer would be excluded "
        "(no_raw_reasoning) after being paid for. Either set roles.parent.reasoning = false "
        "to train on the answers alone, or make the parent a model that returns its raw "
        "reasoning (an openai-protocol server of an open-weights reasoning model such as "
        "gpt-oss, DeepSeek-R1 or Qwen3)"
    )


def provider_problems(settings: Settings) -> Iterator[str]:
    """A provider that a role uses and that no request could reach: no URL, or no key
    where one is needed (anything but a server on this machine). A served provider has
    neither: overbrainer starts it and reaches it on the target's loopback."""
    seen: set[str] = set()
    for name in ROLES:
        role = getattr(settings.roles, name)
        if role is None or role.provider in seen or role.provider not in settings.providers:
            continue
        seen.add(role.provider)
        provider = settings.providers[role.provider]
        if provider.serve is not None:
            continue
        if not provider.base_url:
            yield (
                f"providers.{role.provider} (used by roles.{name}) has no URL: set "
                f"{provider_variable(role.provider, 'base_url')}"
            )
        elif provider.api_key is None and not is_loopback_url(provider.base_url):
            yield (
                f"providers.{role.provider} (used by roles.{name}) has no API key: set "
                f"{provider_variable(role.provider, 'api_key')}"
            )


def problems(settings: Settings) -> list[str]:
    """Everything above, in the order ``config check`` prints it."""
    found = list(provider_problems(settings))
    reasoning = reasoning_problem(settings)
    if reasoning is not None:
        found.append(reasoning)
    found += logits_problems(settings)
    return found
