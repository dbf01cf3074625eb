"""Anthropic's Message Batches: the requests sent in one body, then the JSONL at the
batch's ``results_url`` once it has ended."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import datetime
from typing import Any

from overbrainer.providers import anthropic_messages
from overbrainer.providers.batch_api import (
    CLOCK_SLACK,
    FIND_PAGES,
    BatchStatus,
    Finding,
    ItemResult,
    Limits,
    Request,
    Unreachable,
    call,
    checked_id,
    counts_of,
    lines,
    listed_past,
    member,
    opened,
    question_of,
    reason,
    resolved,
)
from overbrainer.providers.client import Client
from overbrainer.providers.errors import TransientProviderError

LIMITS = Limits(requests=100_000, bytes=250_000_000)
"""Under Anthropic's 100,000 requests or 256 MB a batch."""
PATH = "messages/batches"
FOREIGN_RESULTS = (
    "its results_url is not on the provider's host: not followed (the key would go along)"
)
LOOKED_AT = 5
"""Results lines read of a batch that may be ours, for one that names an item."""


class AnthropicBatches:
    """The batches of one provider speaking the anthropic protocol."""

    limits = LIMITS

    def __init__(self, client: Client, read_timeout: float, poll_timeout: float) -> None:
        self._client = client
        self._read_timeout = read_timeout
        self._poll_timeout = poll_timeout

    def _url(self, path: str = "") -> str:
        return f"{self._client.base_url}/{PATH}{path}"

    async def prepare(self, key: str, requests: list[Request]) -> dict[str, str]:
        return {}

    async def create(self, key: str, requests: list[Request], prepared: dict[str, str]) -> str:
        body = {"requests": [{"custom_id": r.custom_id, "params": r.body} for r in requests]}
        data = await call(
            self._client, "POST", self._url(), json_body=body, read_timeout=self._read_timeout
        )
        return checked_id(member(data, "id"), "batch")

    async def find(
        self, key: str, prepared: dict[str, str], count: int, since: float, known: set[str]
    ) -> Finding:
        # Message Batches carry no metadata, and a key's batches may be another project's:
        # of those made since the project recorded it, of as many requests, that no record
        # names, it is the one whose results name its items by ``key``. A batch still
        # running shows no item: it is undecided until it ends.
        candidates = []
        after = ""
        for _page in range(FIND_PAGES):  # newest first: down to the time it was recorded
            data = await call(self._client, "GET", self._url(f"?limit=100{after}"),
                              total_timeout=self._poll_timeout)
            found = member(data, "data")
            batches = [b for b in (found if isinstance(found, list) else []) if isinstance(b, dict)]
            times = []
            for batch in batches:
                created = _time(batch.get("created_at"))
                if created is not None:
                    times.append(created)
                if batch.get("id") in known:
                    continue
                counts = batch.get("request_counts")
                total = sum(
                    n for n in (counts.values() if isinstance(counts, dict) else [])
                    if isinstance(n, int)
                )
                if created is not None and created >= since - CLOCK_SLACK and total == count:
                    candidates.append((created, batch))
            if not batches or listed_past(times, since) or member(data, "has_more") is not True:
                break
            after = f"&after_id={checked_id(batches[-1].get('id'), 'batch')}"
        undecided = 0
        for _, batch in sorted(candidates, key=lambda found: found[0]):
            url = member(batch, "results_url")
            if batch.get("processing_status") != "ended":
                undecided += 1
            elif isinstance(url, str) and await self._carries(url, key):
                return Finding(checked_id(batch.get("id"), "batch"))
        return Finding(undecided=undecided)

    async def _carries(self, url: str, key: str) -> bool:
        """Whether the results at ``url`` name their items by ``key``."""
        where = resolved(url, self._client.base_url)
        if where is None:
            return False
        read = 0
        try:
            # Closed as soon as one line tells: the rest of the results is never downloaded.
            async with aclosing(lines(self._client, where, self._read_timeout)) as results:
                async for line in results:
                    found = opened(line)
                    if not isinstance(found, ItemResult):
                        return question_of(key, found[1]) is not None
                    read += 1
                    if read == LOOKED_AT:
                        break
        except Unreachable:
            return False  # results gone: nothing shows it is ours, so it is not taken
        return False

    async def status(self, batch_id: str) -> BatchStatus:
        data = await call(self._client, "GET", self._url(f"/{batch_id}"), batch=True,
                          total_timeout=self._poll_timeout)
        status = member(data, "processing_status")
        if not isinstance(status, str):
            raise TransientProviderError("the provider's reply is not a message batch")
        url = member(data, "results_url")
        ended = status == "ended"
        output = None
        if ended and url:
            output = resolved(url, self._client.base_url) if isinstance(url, str) else None
            if output is None:
                raise Unreachable(FOREIGN_RESULTS)
        why = "cancelled" if ended and member(data, "cancel_initiated_at") else None
        # ``request_counts``: ``processing``, then ``succeeded``, ``errored``, ``canceled``
        # and ``expired`` (the last three: finished without a message).
        counts = counts_of(
            data, ("succeeded", "errored", "canceled", "expired"),
            ("errored", "canceled", "expired"), ("processing",),
        )
        return BatchStatus(ended=ended, status=status, reason=why, output=output, counts=counts)

    async def results(self, status: BatchStatus) -> AsyncIterator[ItemResult]:
        if status.output is None:
            return
        async for line in lines(self._client, status.output, self._read_timeout):
            yield item(line)

    async def cancel(self, batch_id: str) -> None:
        await call(self._client, "POST", self._url(f"/{batch_id}/cancel"), batch=True,
                          total_timeout=self._poll_timeout)


def item(line: bytes) -> ItemResult:
    """One line of a batch's results."""
    found = opened(line)
    if isinstance(found, ItemResult):
        return found
    record, custom_id = found
    result = record.get("result")
    kind = member(result, "type")
    if kind != "succeeded":
        return ItemResult(custom_id, error=_failure(result, kind))
    try:
        return ItemResult(custom_id, anthropic_messages.parse_chat(member(result, "message")))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return ItemResult(custom_id, error="the result is not a message")


def _failure(result: Any, kind: Any) -> str:
    """Why a result is not a message: errored (with the provider's error), canceled,
    expired, or no result at all."""
    if not isinstance(kind, str):
        return "no result"
    if kind == "errored":
        problem = member(result, "error")
        inner = member(problem, "error")
        detail = inner if isinstance(inner, dict) else problem if isinstance(problem, dict) else {}
        return reason(f"{detail.get('type', 'error')}: {detail.get('message', '')}")
    return reason(kind)


def _time(value: Any) -> float | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
