"""What every stage works with, and the asks the generating stages share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from loguru import logger

from overbrainer.config.model import Role, Settings, Topic
from overbrainer.pipeline.budget import Budget, cost_of, prompt_bound
from overbrainer.pipeline.exchanges import ExchangeLog, first_line
from overbrainer.pipeline.listreply import parse_list
from overbrainer.pipeline.records import DataFiles
from overbrainer.pipeline.report import Report
from overbrainer.pipeline.spend import SpendJournal
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import FatalProviderError, ProviderError
from overbrainer.providers.prices import Price

if TYPE_CHECKING:
    from overbrainer.providers.client import Client
    from overbrainer.providers.registry import ProviderSet  # aiohttp: only where requests go

INTERRUPTING = "interrupted: no request is sent after a Ctrl-C"
NOT_A_LIST = "the answer is not a JSON array of strings"
NO_LIST = "no JSON array of strings after all retries"


def reply_cost(completion: Completion, price: Price | None) -> float | None:
    """What a reply cost: what it said (a gateway's), else its tokens at ``price``."""
    if completion.cost is not None or price is None:
        return completion.cost
    return cost_of(price, completion.input_tokens, completion.output_tokens)


def together(completions: list[Completion]) -> Completion:
    """The replies of one request as one: the first, with the tokens of them all (the
    cost it stated, if any, is the request's)."""
    return replace(
        completions[0],
        input_tokens=sum(c.input_tokens for c in completions),
        output_tokens=sum(c.output_tokens for c in completions),
    )


class Interrupting(FatalProviderError):
    """A request not sent: the stage was interrupted, and lets those in flight land."""


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
    limit: int | None = None
    """Answer this many questions at most, spread over those left (``plan --pilot``)."""
    stale: bool = False
    """``--stale``: make again the stage's stale records as well (``pipeline.staleness``)."""
    journal: SpendJournal = field(init=False)
    """Where every request's cost goes before the next is admitted."""
    providers: ProviderSet = field(init=False)
    _unmetered: set[str] = field(init=False, default_factory=set)
    _in_flight: int = field(init=False, default=0)
    _draining: bool = field(init=False, default=False)

    def drain(self) -> bool:
        """At a first Ctrl-C: send nothing more, and let the replies on their way land
        (they are paid for). False, to cancel at once, when none is on its way."""
        if not self._in_flight:
            return False
        self._draining = True
        self.providers.stop_sending(Interrupting(INTERRUPTING))
        logger.warning(
            f"{self.report.stage}: interrupted: nothing more is sent; waiting for the "
            f"replies on their way (up to {self._in_flight}), which are paid for; Ctrl-C "
            "again to leave now (those replies are then lost, and may be billed)"
        )
        return True

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
        keep: Callable[[Completion], None] | None = None,
    ) -> Completion:
        """``role``'s reply, its tokens counted and its cost in the spend journal, then
        ``keep`` called with it (the answer saved), then the exchange kept for
        ``overbrainer log`` (``verdict``: why the reply cannot be used, if so); refused
        (``BudgetExceeded``) when it could take the project past its budget. A try that
        got no reply counts at its bound (it may be billed)."""

        def kept(completions: list[Completion]) -> None:
            if keep is not None:
                keep(completions[0])

        [completion] = await self.chats(role, messages, item, 1, verdict, kept)
        return completion

    async def chats(  # noqa: PLR0917 - chat's arguments, and how many replies
        self,
        role: Role,
        messages: list[dict[str, str]],
        item: str,
        n: int,
        verdict: Callable[[Completion], str | None] | None,
        keep: Callable[[list[Completion]], None],
        *,
        top_logprobs: int | None = None,
    ) -> list[Completion]:
        """As :meth:`chat`, for the replies of one request asking for ``n`` (``n`` where
        the protocol has it): reserved and counted as one request, its replies as as many
        answers (a server ignoring ``n`` gives fewer). ``top_logprobs``: each reply
        carries that many candidates per token (``distill = "logits"``)."""
        if self._draining:
            raise Interrupting(INTERRUPTING)
        client = self.providers.client(role.provider)
        self._in_flight += 1
        try:
            return await self._chat(
                client, role, messages, item, n, verdict, keep, top_logprobs
            )
        finally:
            self._in_flight -= 1

    async def _chat(  # noqa: PLR0917 - chats's arguments, and its client
        self,
        client: Client,
        role: Role,
        messages: list[dict[str, str]],
        item: str,
        n: int,
        verdict: Callable[[Completion], str | None] | None,
        keep: Callable[[list[Completion]], None],
        top_logprobs: int | None = None,
    ) -> list[Completion]:
        # Waited for (the provider's price list, asked for once): a cost on disk needs it.
        price = await self.providers.ask_price(role.provider, role.model)
        sent = role
        reserved = 0.0
        if self.budget is not None:
            cap, reserved = await self.budget.admit(
                self.providers, self.report, role, messages, n
            )
            if cap != role.max_tokens:
                sent = role.model_copy(update={"max_tokens": cap})
        tokens_in = prompt_bound(messages)
        bound = None if price is None else cost_of(price, tokens_in, n * sent.max_tokens)
        completions: list[Completion] | None = None
        ticket: str | None = None
        try:
            ticket = self.journal.open(role.provider, role.model, bound)

            def lost() -> None:
                nonlocal ticket
                assert ticket is not None
                self.journal.close(ticket, lost=True)
                ticket = None
                self.report.possibly_billed(bound)
                if self.budget is not None:
                    self.budget.again(self.report)
                ticket = self.journal.open(role.provider, role.model, bound)

            try:
                completions = await client.chats(
                    sent, messages, n, self.report.retrying(item), self.report.limited, lost,
                    top_logprobs=top_logprobs,
                )
            except (ProviderError, FatalProviderError) as error:
                # An error reply, or a request never sent (the stage halted): not billed.
                if ticket is not None:
                    self.journal.close(ticket, lost=False)
                    ticket = None
                if isinstance(error, ProviderError):
                    self.exchanges.record(
                        self.report.stage, item, role.model, messages, None,
                        failure=error.message,
                    )
                raise
            completions = [
                c if c.metered else self._at_bound(c, role.provider, tokens_in * (i == 0), sent)
                for i, c in enumerate(completions)
            ]
            whole = together(completions)
            self.journal.paid(
                ticket, whole.input_tokens, whole.output_tokens, reply_cost(whole, price)
            )
            ticket = None
        except BaseException:
            if ticket is not None:  # sent, and no reply: left open, counted at its bound
                self.report.possibly_billed(bound)
            raise
        finally:
            if self.budget is not None:
                out = max((c.output_tokens for c in completions), default=0) if completions else 0
                self.budget.release(reserved, role.model, out)
        self.report.used(
            role.provider, role.model, whole.input_tokens, whole.output_tokens,
            len(completions), stated=whole.cost,
        )
        keep(completions)  # what was paid for goes to disk before its log
        for completion in completions:
            self.exchanges.record(
                self.report.stage, item, role.model, messages, completion.content,
                completion.reasoning, verdict(completion) if verdict is not None else None,
            )
        return completions

    def _at_bound(
        self, completion: Completion, provider: str, tokens_in: int, sent: Role
    ) -> Completion:
        """``completion`` of a reply that gave no usage, counted at its request's bound."""
        if provider not in self._unmetered:
            self._unmetered.add(provider)
            logger.warning(
                f"providers.{provider}: a reply gave no usage (or more tokens than any reply "
                "holds): each such reply is counted at "
                f"what its request could cost at most ({tokens_in} tokens in, "
                f"{sent.max_tokens} out)"
            )
        return replace(completion, input_tokens=tokens_in, output_tokens=sent.max_tokens)

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
        price = self.providers.price(role.provider, role.model)
        self.journal.paid(None, tokens, 0, None if price is None else cost_of(price, tokens, 0))
        self.report.used(role.provider, role.model, tokens, 0, requests=0)
        return vectors
