"""A stage against a served parent keeps its engine's batch full: its concurrency is what
the engine holds at once (``serve.concurrency``, else the engine's capacity: vLLM's
``--max-num-seqs``, SGLang's ``--max-running-requests``, llama.cpp's one), not
``[pipeline] concurrency``, which is sized for a paid API's rate limits."""

from __future__ import annotations

from loguru import logger

from overbrainer.config.model import Settings
from overbrainer.pipeline.projection import ROLES, stage_role
from overbrainer.providers.served import served_capacity


def served_concurrency(settings: Settings, stage: str) -> Settings:
    """``settings`` with ``stage``'s concurrency its served provider's capacity (the same
    settings when the stage's role is not on a served provider, or nothing serves)."""
    if stage not in ROLES:
        return settings
    role = stage_role(settings, stage)
    provider = settings.providers.get(role.provider)
    if provider is None or provider.serve is None:
        return settings
    capacity = served_capacity(role.provider)
    if capacity is None or capacity == settings.pipeline.concurrency:
        return settings
    logger.info(
        f"{stage}: {capacity} request(s) at once to the served providers.{role.provider} "
        f"(what {provider.serve.engine} holds; serve.concurrency sets it), not "
        f"[pipeline] concurrency {settings.pipeline.concurrency}"
    )
    pipeline = settings.pipeline.model_copy(update={"concurrency": capacity})
    return settings.model_copy(update={"pipeline": pipeline})
