"""What every stage works with, and the asks the generating stages share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from overbrainer.config.model import Role, Settings, Topic
from overbrainer.pipeline.budget import Budget
from overbrainer.pipeline.exchanges import ExchangeLog, first_line
from overbrainer.pipeline.listreply import parse_list
from overbrainer.pipeline.records import DataFiles
from overbrainer.pipeline.report import Report
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError

if TYPE_CHECKING:
    from overbrainer.providers.registry import ProviderSet  # aiohttp: only where requests go

NOT_A_LIST = "the answer is not a JSON array of strings"
NO_LIST = "no JSON array of strings after all retries"


@dataclass
class StageContext:
    """One stage execution: the settings it started with, the selected topics, its report."""

    project_dir: Path
    settings: Settings
    topics: list[Topic]
    force: bool
    report: Report
    budget: Budget | None = None
    """``[budget] max_usd`` kept: every request is admitted by it first."""
    batch: bool | None = None
    """Whether ``answers`` goes through the batch API; None: as the parent role says."""
    wait: bool = True
    """Whether a batch stage waits for its batches to end (``--no-wait``: it does not)."""
    cancel: bool = False
    """``answers --cancel``: cancel the live batches, collect what they finished."""
    providers: ProviderSet = field(init=False)

    @property
    def data(self) -> DataFiles:
        return DataFiles(self.project_dir)

    @property
    def topic_names(self) -> set[str]:
        return {topic.name for topic in self.topics}

    @cached_property
    def exchanges(self) -> ExchangeLog:
        return ExchangeLog(self.project_dir)

    async def chat(
        self,
        role: Role,
        messages: list[dict[str, str]],
        item: str,
        verdict: Callable[[Completion], str | None] | None = None,
    ) -> Completion:
        """``role``'s reply, its tokens counted, the exchange kept for ``overbrainer log``
        (``verdict``: why the reply cannot be used, if so); refused (``BudgetExceeded``)
        when its projected cost would take the project past its budget."""
        client = self.providers.client(role.provider)
        reserved = 0.0
        if self.budget is not None:
            reserved = await self.budget.admit(self.providers, self.report, role, messages)
        try:
            completion = await client.chat(
                role, messages, self.report.retrying(item), self.report.limited
            )
        except ProviderError as error:
            self.exchanges.record(
                self.report.stage, item, role.model, messages, None, failure=error.message
            )
            raise
        finally:
            if self.budget is not None:
                self.budget.release(reserved)
        self.report.used(
            role.provider, role.model, completion.input_tokens, completion.output_tokens
        )
        self.exchanges.record(
            self.report.stage, item, role.model, messages, completion.content,
            completion.reasoning, verdict(completion) if verdict is not None else None,
        )
        return completion

    async def ask_list(self, role: Role, prompt: str, item: str) -> list[str]:
        """The strings ``role`` lists in reply to ``prompt``, asking again (up to
        ``max_retries`` times) while it lists none. Tokens of every attempt count."""
        attempts = self.settings.pipeline.max_retries + 1
        def unlisted(completion: Completion) -> str | None:
            return None if parse_list(completion.content) else NOT_A_LIST

        for attempt in range(1, attempts + 1):
            completion = await self.chat(
                role, [{"role": "user", "content": prompt}], item, unlisted
            )
            items = parse_list(completion.content)
            if items:
                return items
            began = first_line(completion.content)
            logger.debug(f"{self.report.stage}: {item}: the reply was:\n{completion.content}")
            if attempt < attempts:
                logger.warning(
                    f"{self.report.stage}: {item}: {NOT_A_LIST} (it began {began!r}); "
                    "asking again (`overbrainer log --failed` shows the replies)"
                )
        raise ProviderError(f"{NO_LIST} (the last began {began!r})")

    async def embed(self, texts: list[str], item: str) -> list[list[float]]:
        """Vectors for ``texts`` from the embedder role, its tokens counted."""
        role = self.settings.roles.embedder
        assert role is not None
        client = self.providers.client(role.provider)
        vectors, tokens = await client.embed(role.model, texts, self.report.retrying(item))
        self.report.used(role.provider, role.model, tokens, 0, requests=0)
        return vectors
