"""The OpenAI batch API (OpenAI, Together, Groq): a JSONL file of requests uploaded with
``purpose=batch``, a batch made of it, then its output and error files."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from overbrainer.providers import openai_chat
from overbrainer.providers.batch_api import (
    FIND_PAGES,
    BatchStatus,
    Counts,
    Finding,
    ItemResult,
    Limits,
    Request,
    call,
    checked_id,
    counts_of,
    lines,
    listed_past,
    member,
    opened,
    reason,
)
from overbrainer.providers.client import Client
from overbrainer.providers.errors import TransientProviderError
from overbrainer.providers.tls import aiohttp

LIMITS = Limits(requests=50_000, bytes=190_000_000)
"""Under OpenAI's 50,000 requests or 200 MB a file (the margin: the multipart wrapping)."""
ENDPOINT = "/v1/chat/completions"
WINDOW = "24h"
ENDED = frozenset({"completed", "expired", "cancelled", "failed"})
KEY_FIELD = "overbrainer_batch"
"""The batch's metadata field holding the project's key for it: how a batch whose
creation was cut short is found again (the uploaded file, named after the key, is the
other way; both are this project's alone)."""


def request_line(request: Request) -> bytes:
    """One line of the uploaded file."""
    line = {"custom_id": request.custom_id, "method": "POST", "url": ENDPOINT,
            "body": request.body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class OpenAIBatches:
    """The batches of one provider speaking the openai protocol."""

    limits = LIMITS

    def __init__(self, client: Client, read_timeout: float, poll_timeout: float) -> None:
        self._client = client
        self._read_timeout = read_timeout
        self._poll_timeout = poll_timeout

    def _url(self, path: str) -> str:
        return f"{self._client.base_url}/{path}"

    async def prepare(self, key: str, requests: list[Request]) -> dict[str, str]:
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field(
            "file",
            b"".join(request_line(request) for request in requests),
            filename=f"{key}.jsonl",
            content_type="application/jsonl",
        )
        data = await call(
            self._client, "POST", self._url("files"), data=form, read_timeout=self._read_timeout
        )
        return {"file_id": checked_id(member(data, "id"), "uploaded file")}

    async def create(self, key: str, requests: list[Request], prepared: dict[str, str]) -> str:
        body = {"input_file_id": prepared["file_id"], "endpoint": ENDPOINT,
                "completion_window": WINDOW, "metadata": {KEY_FIELD: key}}
        data = await call(self._client, "POST", self._url("batches"), json_body=body)
        return checked_id(member(data, "id"), "batch")

    async def find(
        self, key: str, prepared: dict[str, str], count: int, since: float, known: set[str]
    ) -> Finding:
        file_id = prepared.get("file_id")
        after = ""
        for _page in range(FIND_PAGES):  # newest first: down to the time it was recorded
            data = await call(self._client, "GET", self._url(f"batches?limit=100{after}"),
                              total_timeout=self._poll_timeout)
            found = member(data, "data")
            batches = [b for b in (found if isinstance(found, list) else []) if isinstance(b, dict)]
            for batch in batches:
                metadata = batch.get("metadata")
                mine = isinstance(metadata, dict) and metadata.get(KEY_FIELD) == key
                if mine or (file_id is not None and batch.get("input_file_id") == file_id):
                    return Finding(checked_id(batch.get("id"), "batch"))
            created = [b.get("created_at") for b in batches]
            times = [float(t) for t in created if isinstance(t, int | float)]
            if not batches or listed_past(times, since) or member(data, "has_more") is not True:
                break
            after = f"&after={checked_id(batches[-1].get('id'), 'batch')}"
        return Finding()

    async def status(self, batch_id: str) -> BatchStatus:
        data = await call(self._client, "GET", self._url(f"batches/{batch_id}"), batch=True,
                          total_timeout=self._poll_timeout)
        status = member(data, "status")
        if not isinstance(status, str):
            raise TransientProviderError("the provider's reply is not a batch")
        why = None
        if status == "failed":
            errors = member(data, "errors")
            found = errors.get("data") if isinstance(errors, dict) else None
            messages = [
                str(error.get("message") or error.get("code"))
                for error in (found if isinstance(found, list) else [])
                if isinstance(error, dict)
            ]
            why = reason("; ".join(messages) or "no reason given")
        elif status == "expired":
            why = f"its {WINDOW} completion window passed"
        elif status == "cancelled":
            why = "cancelled"
        output, errors_file = member(data, "output_file_id"), member(data, "error_file_id")
        return BatchStatus(
            ended=status in ENDED,
            status=status,
            reason=why,
            output=checked_id(output, "output file") if output else None,
            errors=checked_id(errors_file, "error file") if errors_file else None,
            counts=_counts(data),
        )

    async def results(self, status: BatchStatus) -> AsyncIterator[ItemResult]:
        for file_id in (status.output, status.errors):
            if file_id is None:
                continue
            url = self._url(f"files/{file_id}/content")
            async for line in lines(self._client, url, self._read_timeout):
                yield item(line)

    async def cancel(self, batch_id: str) -> None:
        await call(self._client, "POST", self._url(f"batches/{batch_id}/cancel"), batch=True,
                          total_timeout=self._poll_timeout)


def _counts(data: Any) -> Counts | None:
    """``request_counts``: ``total``, ``completed`` (answered) and ``failed``."""
    counts = counts_of(data, ("completed", "failed"), ("failed",), ())
    total = member(member(data, "request_counts"), "total")
    if counts is None or not isinstance(total, int) or total < counts.done:
        return counts
    return Counts(counts.done, counts.failed, total)


def item(line: bytes) -> ItemResult:
    """One line of an output or error file."""
    found = opened(line)
    if isinstance(found, ItemResult):
        return found
    record, custom_id = found
    failure = _failure(record)
    if failure is not None:
        return ItemResult(custom_id, error=failure)
    try:
        return ItemResult(custom_id, openai_chat.parse_chat(record["response"]["body"]))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return ItemResult(custom_id, error="the result is not a chat completion")


def _failure(record: dict[str, Any]) -> str | None:
    """Why a line holds no completion (its error, a status other than 200), or None."""
    problem = record.get("error")
    if problem:
        if isinstance(problem, dict):
            code, message = problem.get("code"), problem.get("message")
            return reason(f"{code or 'error'}: {message or ''}")
        return reason(problem)
    response = record.get("response")
    if not isinstance(response, dict):
        return "no response"
    if response.get("status_code") != 200:
        body = response.get("body")
        detail = member(member(body, "error"), "message")
        return reason(f"HTTP {response.get('status_code')}: {detail or ''}")
    return None
