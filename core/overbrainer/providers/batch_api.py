"""A provider's batch API as both protocols reduce it, and the requests it is spoken with.

The requests go through the stage's client session (its headers carry the key, nowhere
else does); failures map to the errors of online requests (``http_error``), so a 401 stops
the stage and a 500 is worth trying again.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

from overbrainer.lines import MAX_LINE, LineSplitter, LineTooLong
from overbrainer.providers.client import CONNECT_TIMEOUT, Client, http_error
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import ProviderError, TransientProviderError
from overbrainer.providers.tls import aiohttp
from overbrainer.redact import redact

REASON_LIMIT = 300
NOT_JSON = "the provider's reply is not valid JSON"


@dataclass(frozen=True)
class Request:
    """One chat request of a batch: ``custom_id`` is the question's id, behind the batch's
    key once it is sent (``item_id``)."""

    custom_id: str
    body: dict[str, Any]


def item_id(key: str, question: str) -> str:
    """An item's ``custom_id``: the batch's key (the project's random name for it), then
    the question's id. The key is how a batch is told to be this project's where the
    provider keeps nothing else of it (Anthropic's Message Batches)."""
    return f"{key}-{question}"


def question_of(key: str, custom_id: str) -> str | None:
    """The question an item of batch ``key`` answers, or None when the item is not one
    of its own (``custom_id`` carries another key)."""
    mark = f"{key}-"
    return custom_id[len(mark):] if custom_id.startswith(mark) else None


@dataclass(frozen=True)
class Limits:
    """The most requests, and bytes of requests, one batch may hold."""

    requests: int
    bytes: int


@dataclass(frozen=True)
class Counts:
    """A batch's items as the provider counts them while it runs (``request_counts``):
    ``done`` those it finished, ``failed`` the part of them without an answer."""

    done: int
    failed: int
    total: int


def counts_of(data: Any, done: tuple[str, ...], failed: tuple[str, ...],
              waiting: tuple[str, ...]) -> Counts | None:
    """The ``request_counts`` of a reply, summed by the provider's words for finished,
    failed and still waiting items; None when it gives none readable."""
    found = member(data, "request_counts")
    if not isinstance(found, dict):
        return None
    numbers = {
        key: value for key, value in found.items()
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0
    }
    if not numbers:
        return None
    finished = sum(numbers.get(key, 0) for key in done)
    return Counts(
        done=finished,
        failed=sum(numbers.get(key, 0) for key in failed),
        total=finished + sum(numbers.get(key, 0) for key in waiting),
    )


@dataclass(frozen=True)
class BatchStatus:
    """Where a batch stands: ``ended`` once the provider will do no more of it; ``status``
    in the provider's word; ``reason``: why it did not complete, when it did not."""

    ended: bool
    status: str
    reason: str | None = None
    output: str | None = None
    """Where its results are: a file id (openai) or the results URL (anthropic)."""
    errors: str | None = None
    """The file id of its failed items (openai)."""
    counts: Counts | None = None
    """How far it is, when the provider says."""


@dataclass(frozen=True)
class ItemResult:
    """One line of a batch's results: a completion, or why there is none. ``custom_id``
    is None for a line that names no item (a malformed line)."""

    custom_id: str | None
    completion: Completion | None = None
    error: str | None = None


@dataclass(frozen=True)
class Finding:
    """What looking for a batch whose id never came back found: its id, or None and how
    many of the provider's batches may yet prove to be it (``undecided``: still running,
    their items' ids show only in their results)."""

    batch_id: str | None = None
    undecided: int = 0


class Unreachable(ProviderError):
    """A batch the provider will not give: it answers 404 for it (purged, or made with
    another account's key), or its results are where the key must not go. The batch is
    held, not failed: its items may be paid for."""


class BatchAPI(Protocol):
    """The batch API of one provider, for one stage."""

    limits: Limits

    async def prepare(self, key: str, requests: list[Request]) -> dict[str, str]:
        """What ``create`` needs that costs nothing (the uploaded file): recorded first."""
        ...

    async def create(self, key: str, requests: list[Request], prepared: dict[str, str]) -> str:
        """Start the batch (from here on it is paid for); its id."""
        ...

    async def find(self, key: str, prepared: dict[str, str], count: int, since: float,
                   known: set[str]) -> Finding:
        """The batch that a ``create`` cut short (by a crash, a lost reply) may have
        started, when it carries ``key`` (another project's batch is never taken);
        ``known``: ids already recorded."""
        ...

    async def status(self, batch_id: str) -> BatchStatus:
        """Where the batch stands; ``Unreachable`` when the provider has no such batch."""
        ...

    def results(self, status: BatchStatus) -> AsyncIterator[ItemResult]:
        """The results of an ended batch, line by line as they download; ``Unreachable``
        when they are gone."""
        ...

    async def cancel(self, batch_id: str) -> None:
        """Ask the provider to stop the batch; ``Unreachable`` when it has no such batch."""
        ...


def reason(text: object) -> str:
    """A provider's words, safe to show."""
    return redact(" ".join(str(text).split()))[:REASON_LIMIT]


def same_origin(url: str, base_url: str) -> bool:
    """Whether ``url`` is on the provider's own scheme, host and port: the key is sent
    with every request, so a URL taken from a reply is followed only there."""
    a, b = urlsplit(url), urlsplit(base_url)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def resolved(url: str, base_url: str) -> str | None:
    """``url`` from a reply, a relative reference resolved against the provider's base URL
    (``/anthropic/v1/...`` is legal); None when it leads off the provider's origin."""
    absolute = urljoin(base_url.rstrip("/") + "/", url)
    return absolute if same_origin(absolute, base_url) else None


async def call(
    client: Client,
    method: str,
    url: str,
    *,
    json_body: Any = None,
    data: aiohttp.FormData | None = None,
    read_timeout: float | None = None,
    total_timeout: float | None = None,
    batch: bool = False,
) -> Any:
    """One request's JSON reply; transport failures are ``TransientProviderError``.
    ``read_timeout``: no total limit, only between reads (an upload of 200 MB);
    ``total_timeout``: the whole reply within it (a poll: one that hangs is asked again
    soon, not after the stage's ``request_timeout_secs``).
    ``batch``: the URL names one batch, so a 404 is ``Unreachable`` (that batch is gone),
    not a wrong ``base_url``."""
    timeout = None
    if read_timeout is not None:
        timeout = aiohttp.ClientTimeout(total=None, sock_read=read_timeout)
    elif total_timeout is not None:
        timeout = aiohttp.ClientTimeout(total=total_timeout, connect=CONNECT_TIMEOUT)
    raw = await _send(
        client, method, url, json_body=json_body, data=data, timeout=timeout, batch=batch
    )
    try:
        return json.loads(raw)
    except ValueError:
        raise TransientProviderError(NOT_JSON) from None


async def _send(
    client: Client,
    method: str,
    url: str,
    *,
    json_body: Any,
    data: aiohttp.FormData | None,
    timeout: aiohttp.ClientTimeout | None,
    batch: bool,
) -> bytes:
    extra: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    request = client.session.request(
        method, url, json=json_body, data=data, allow_redirects=False, **extra
    )
    try:
        async with request as response:
            raw = await response.read()
            if not 200 <= response.status < 300:
                raise _failure(client, response, raw, batch)
            return raw
    except TimeoutError:
        within = f"within {timeout.total:g} s" if timeout and timeout.total else "in time"
        raise TransientProviderError(f"no reply {within}") from None
    except aiohttp.ClientConnectorError:
        raise TransientProviderError(f"cannot connect to provider `{client.name}`") from None
    except (aiohttp.ClientError, OSError) as error:
        raise TransientProviderError(f"transport error ({type(error).__name__})") from None


async def lines(client: Client, url: str, read_timeout: float) -> AsyncGenerator[bytes]:
    """The lines of a results file as they download, however long each is."""
    timeout = aiohttp.ClientTimeout(total=None, sock_read=read_timeout)
    try:
        # No redirect is followed: the key would go along to wherever it points.
        async with client.session.get(url, timeout=timeout, allow_redirects=False) as response:
            if response.status != 200:
                raw = await response.read()
                raise _failure(client, response, raw, True)
            splitter = LineSplitter("the results", MAX_LINE)
            async for chunk in response.content.iter_chunked(1 << 16):
                for line in splitter.feed(chunk):
                    if line.strip():
                        yield line
            last = splitter.end()
            if last is not None and last.strip():
                yield last
    except LineTooLong:
        raise ProviderError(
            f"a line of the results is longer than {MAX_LINE >> 20} MiB "
            "(not a results file, or one with no line ends): not read"
        ) from None
    except TimeoutError:
        raise TransientProviderError("no reply in time") from None
    except (aiohttp.ClientError, OSError) as error:
        raise TransientProviderError(f"transport error ({type(error).__name__})") from None


GONE = "the provider has no such batch (HTTP 404: purged, or made with another account's key)"


def _failure(client: Client, response: aiohttp.ClientResponse, raw: bytes, batch: bool
             ) -> Exception:
    """The error of a failure status; a 404 for a URL naming one batch is that batch gone."""
    if batch and response.status == 404:
        return Unreachable(GONE)
    return http_error(
        response.status, raw, response.headers, provider=client.name, url=str(response.url)
    )


def parsed(line: bytes) -> dict[str, Any]:
    """A results line as an object; ``ProviderError`` when it is not one."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ProviderError("not JSON") from None
    if not isinstance(record, dict):
        raise ProviderError("not a JSON object")
    return record


FIND_PAGES = 20
"""Pages of 100 batches looked through for one lost on its way (a key's recent ones)."""
CLOCK_SLACK = 300.0
"""Seconds a batch's ``created_at`` may lie before the project recorded it (clock skew)."""


def listed_past(times: list[float], since: float) -> bool:
    """Whether a page of the provider's list (its batches' creation times, in its order)
    reaches batches older than ``since``, so that no later page can hold one made since.
    Only a newest-first page tells: an oldest-first list is looked through to the end."""
    return bool(times) and times == sorted(times, reverse=True) and (
        times[-1] < since - CLOCK_SLACK
    )


def opened(line: bytes) -> tuple[dict[str, Any], str] | ItemResult:
    """A results line and its ``custom_id``, or the failed item it is when it has none
    (not JSON, not an object, no id): the opening both protocols' lines share."""
    try:
        record = parsed(line)
    except ProviderError as error:
        return ItemResult(None, error=str(error))
    custom_id = record.get("custom_id")
    if not isinstance(custom_id, str):
        return ItemResult(None, error="no custom_id")
    return record, custom_id


_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


def checked_id(value: object, what: str) -> str:
    """An id from a reply, safe to put in a URL's path; ``ProviderError`` when it is not."""
    if not isinstance(value, str) or not _ID.match(value):
        raise ProviderError(f"the provider's reply names no {what}")
    return value


def member(data: Any, key: str) -> Any:
    """``data[key]`` when ``data`` is an object, else None: replies are read defensively."""
    return data.get(key) if isinstance(data, dict) else None
