"""The provider clients of one stage, each made on first use."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from loguru import logger

from overbrainer.config.env import directed_by_project, provider_variable
from overbrainer.config.model import ROLE_NAMES, Settings
from overbrainer.config.secrets import resolve_secret
from overbrainer.errors import UserError
from overbrainer.providers.client import Client, Halt
from overbrainer.providers.errors import FatalProviderError
from overbrainer.providers.prices import Price, PriceBook, table_price
from overbrainer.providers.ratelimit import Pace
from overbrainer.providers.retry import RetryPolicy
from overbrainer.providers.served import MAX_IN_FLIGHT, served_url

SERVED = Price(0.0, 0.0)
"""A served provider's tokens: its cost is its target's hours (docs/serving.md)."""


class ProviderSet:
    """Clients by provider name. A client's key is resolved, and its prices asked for (once
    per command: ``prices`` outlives the stage), only when a stage first needs it; never
    when ``[providers.NAME.prices]`` prices every model its roles use."""

    def __init__(self, settings: Settings, env: Mapping[str, str], prices: PriceBook) -> None:
        self._settings = settings
        self._env = env
        self._prices = prices
        self._clients: dict[str, Client] = {}
        self._halt = Halt()  # one fatal error stops the requests to every provider
        self._pending: list[tuple[str, asyncio.Task[None]]] = []
        """The price look-ups under way, by provider name."""

    def client(self, name: str) -> Client:
        client = self._clients.get(name)
        if client is not None:
            return client
        provider = self._settings.providers[name]
        base_url = served_url(name) if provider.serve is not None else provider.base_url
        if not base_url:
            raise UserError(
                f"providers.{name}.base_url is not set: set "
                f"{provider_variable(name, 'base_url')}"
            )
        key = None
        if provider.api_key is not None and provider.serve is None:
            refused = directed_by_project(
                provider_variable(name, "api_key"), provider_variable(name, "base_url"),
                str(provider.base_url),
            )
            if refused is not None:
                raise UserError(f"providers.{name}: {refused}")
            key = resolve_secret(provider.api_key, f"providers.{name}.api_key", self._env)
        pipeline = self._settings.pipeline
        client = Client(
            name,
            provider.protocol,
            base_url,
            key.get_secret_value() if key is not None else None,
            concurrency=pipeline.concurrency,
            timeout_secs=pipeline.request_timeout_secs,
            retry=RetryPolicy(pipeline.max_retries),
            halt=self._halt,
            max_wait_s=pipeline.max_wait_s,
            connections=MAX_IN_FLIGHT + 1 if provider.serve is not None else None,
        )
        self._clients[name] = client
        if provider.serve is None and not self._table_covers(name):
            self._look_up(client)
        return client

    def _table_covers(self, name: str) -> bool:
        """Whether ``[providers.NAME.prices]`` prices every model a role asks of ``name``:
        then the provider is asked for no price at all (a request slot saved)."""
        roles = [getattr(self._settings.roles, role) for role in ROLE_NAMES]
        models = {role.model for role in roles if role is not None and role.provider == name}
        return bool(models) and all(
            table_price(self._settings, name, model) is not None for model in models
        )

    def _look_up(self, client: Client) -> None:
        """Ask ``client``'s provider for its prices, unless this command did already."""
        if not self._prices.knows(client.name, client.base_url) and not any(
            asking == client.name for asking, _ in self._pending
        ):
            self._pending.append((client.name, asyncio.create_task(self._ask_prices(client))))

    async def _ask_prices(self, client: Client) -> None:
        prices = await client.fetch_prices()
        if prices is None:
            logger.debug(f"providers.{client.name}: no prices: costs are unknown")
        self._prices.store(client.name, client.base_url, prices)

    def price(self, provider: str, model: str) -> Price | None:
        """The price of ``model``: the ``[providers.NAME.prices]`` table's, else the one
        ``provider`` has told already."""
        table = table_price(self._settings, provider, model)
        if table is not None:
            return table
        if self._settings.providers[provider].serve is not None:
            return SERVED  # paid by the hour of its target, not by the token
        client = self._clients.get(provider)
        if client is None:
            return None
        return self._prices.price(provider, client.base_url, model)

    def pace(self, provider: str, model: str) -> Pace | None:
        """The rate limit of ``model`` at ``provider``, as the provider set it, while it sets
        the pace; else None."""
        client = self._clients.get(provider)
        return client.limiter(model).pace() if client is not None else None

    def stop_sending(self, error: FatalProviderError) -> None:
        """Send no request from now on (each not yet sent fails with ``error``); those on
        their way go on to their replies."""
        self._halt.stop(error)

    async def ask_price(self, provider: str, model: str) -> Price | None:
        """The price of ``model``, waiting for ``provider``'s answer when it was asked for
        (the budget needs it before a stage's first request)."""
        served = self._settings.providers[provider].serve is not None
        if table_price(self._settings, provider, model) is None and not served:
            self._look_up(self.client(provider))
            await self.settle_prices()
        return self.price(provider, model)

    async def settle_prices(self) -> None:
        """Wait for the prices asked for (each ask gives up after 10 s)."""
        await asyncio.gather(*(task for _, task in self._pending))
        self._pending.clear()

    async def aclose(self) -> None:
        for _, task in self._pending:
            task.cancel()
        await asyncio.gather(*(task for _, task in self._pending), return_exceptions=True)
        self._pending.clear()
        for client in self._clients.values():
            await client.close()
