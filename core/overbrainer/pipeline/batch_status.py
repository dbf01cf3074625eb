"""``overbrainer batches``: the project's batches from the ledger, and where the provider
says each live one stands, asked read-only (one ``GET`` a batch, never a retry, never a
cancel): a look at a wait that another process may be doing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from overbrainer.config.model import Settings
from overbrainer.errors import UserError
from overbrainer.pipeline import batch_watch
from overbrainer.pipeline.batch_ledger import Batch, Ledger
from overbrainer.pipeline.spend import read_spending
from overbrainer.providers.batch_anthropic import AnthropicBatches
from overbrainer.providers.batch_api import BatchAPI, BatchStatus
from overbrainer.providers.batch_openai import OpenAIBatches
from overbrainer.providers.errors import FatalProviderError, ProviderError
from overbrainer.providers.prices import PriceBook
from overbrainer.providers.registry import ProviderSet


@dataclass(frozen=True)
class BatchView:
    """One batch as ``batches`` shows it."""

    batch: Batch
    age_s: float
    """Since it was recorded."""
    paid_usd: float
    """What its results collected so far cost (the spend journal)."""
    status: BatchStatus | None = None
    """What the provider said of it; None when it was not asked."""
    problem: str | None = None
    """Why the provider's word is missing: ``--offline``, no id yet, an error."""


async def look(
    settings: Settings, env: Mapping[str, str], project_dir: Path, *, offline: bool
) -> list[BatchView]:
    """Every batch of the ledger, oldest first; the live ones with their provider status
    unless ``offline``."""
    batches = Ledger(project_dir).batches()
    paid = read_spending(project_dir).by_batch
    now = time.time()
    providers = ProviderSet(settings, env, PriceBook())
    try:
        asked = [
            _ask(settings, providers, batch, offline) if batch.live else _past()
            for batch in batches
        ]
        found = await asyncio.gather(*asked)
    finally:
        await providers.aclose()
    return [
        BatchView(batch, max(now - batch.at, 0.0), paid.get(batch.key, 0.0), status, problem)
        for batch, (status, problem) in zip(batches, found, strict=True)
    ]


async def _past() -> tuple[BatchStatus | None, str | None]:
    return None, None  # its end is in the ledger: the provider is not asked again


async def _ask(
    settings: Settings, providers: ProviderSet, batch: Batch, offline: bool
) -> tuple[BatchStatus | None, str | None]:
    if offline:
        return None, "not asked (--offline)"
    if batch.batch_id is None:
        return None, "no id yet: `overbrainer answers` looks for it"
    if batch.provider not in settings.providers:
        return None, f"provider `{batch.provider}` is no longer in overbrainer.toml"
    try:
        return await _api(settings, providers, batch.provider).status(batch.batch_id), None
    except (ProviderError, FatalProviderError, UserError) as error:
        return None, f"not known: {error.message}"


def _api(settings: Settings, providers: ProviderSet, provider: str) -> BatchAPI:
    client = providers.client(provider)
    kind = OpenAIBatches if client.protocol == "openai" else AnthropicBatches
    return kind(client, settings.pipeline.request_timeout_secs, batch_watch.POLL_TIMEOUT_S)
