"""One provider over aiohttp: one session, its connector sized to the stage's concurrency.

Requests are retried on 408, >= 500 and transport errors (``max_retries`` times); 401 to
404 stop the stage; any other failure, and a reply that cannot be read, fails only its item.
A 429 is the provider's queue: every request of the (provider, model) waits as its limiter
says, and it is tried again until ``max_wait_s`` of such waits have passed (a wait the
provider asks for that would pass it stops the stage at once: it is never cut short). After a fatal
error no client of the stage sends another request (nor a retry): the requests already on
the wire finish, since their replies are paid for.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from http import HTTPStatus
from typing import Any

import orjson
from loguru import logger

from overbrainer.config.env import provider_variable
from overbrainer.config.model import Role
from overbrainer.providers import anthropic_messages, openai_chat
from overbrainer.providers.completion import Completion
from overbrainer.providers.errors import (
    FatalProviderError,
    ProviderError,
    RateLimitedError,
    TransientProviderError,
)
from overbrainer.providers.limiter import Cost, Limiter, Pause, Refusal, limiter_for
from overbrainer.providers.logprobs import request_fields
from overbrainer.providers.prices import Price, parse_model_info, parse_prices, stated_cost
from overbrainer.providers.ratelimit import RateInfo, parse_rate_headers
from overbrainer.providers.retry import (
    FATAL_STATUSES,
    RETRIED_STATUSES,
    RetryPolicy,
    parse_retry_after,
)
from overbrainer.providers.tls import aiohttp
from overbrainer.providers.wire import WireFormat
from overbrainer.redact import mask_url, redact

PROTOCOLS: dict[str, WireFormat] = {"openai": openai_chat, "anthropic": anthropic_messages}
CONNECT_TIMEOUT = 30
PRICES_TIMEOUT = 10
MODEL_INFO_PATH = "model/info"
"""Where LiteLLM lists its models' prices (under the same ``/v1`` as its chat)."""
MESSAGE_LIMIT = 300
EMBEDDING_CHUNK = 256

OnRetry = Callable[[str, float], None]
"""Told the error and the wait, in seconds, before each new attempt."""
OnLost = Callable[[], None]
"""Called when a try was sent and got no reply: it may be billed."""
OnLimited = Callable[[Refusal], None]
"""Told of each 429 and the pause it brought (the request waits, then goes again: it is no
error), and of the last one when the stage gives up waiting."""

AUTHENTICATION_FAILED = "providers.{name}: the key was refused (401): check {variable}"
PERMISSION_DENIED = (
    "providers.{name}: permission denied (403): check that {variable} may use this model"
)
NOT_FOUND_HINT = " (does base_url end where the API starts, such as /v1?)"
NO_SUCH_MODEL = re.compile(
    r"\bmodel\b.{0,200}?\b(?:not found|does ?n[o']t exist|not exist|unknown|not available"
    r"|not supported|no such)\b|\b(?:no such|unknown|invalid|unsupported) model\b"
    r"|\binvalid model name\b|\bmodel_not_found\b",
    re.IGNORECASE,
)
"""How servers say a model is not theirs: OpenAI, Anthropic, LiteLLM, vLLM, Ollama."""
CHARS_PER_TOKEN = 4
"""How providers estimate a prompt's tokens before reading it (OpenAI's rule), to charge a
request against a token limit before it is sent."""
JSON_BODY = {"Content-Type": "application/json"}
_DIGITS = bytes(48 if 48 <= byte <= 57 else 46 for byte in range(256))
"""Digits to "0", the rest to ".": a run of 19 digits is a run of 19 zeros."""
_WIDE = b"0" * 19


def encode_body(body: dict[str, Any]) -> bytes:
    """``body`` as JSON, by orjson (a tenth of the standard library's CPU, and of a
    request's); what orjson refuses (a lone surrogate, an integer past 64 bits) as aiohttp's
    ``json=`` writes it. A non-finite float is ``null`` here where the standard library
    writes ``NaN`` (not JSON, which a provider would refuse); settings never hold one."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def decode_reply(raw: bytes) -> Any:
    """``json.loads(raw)``, by orjson when it reads it alike: not with integers of 19 digits
    or more (orjson makes floats of the widest), nor with what it refuses (NaN, a lone
    surrogate, another encoding than UTF-8), read by the standard library."""
    if _WIDE not in raw.translate(_DIGITS):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw)


class Halt:
    """The first fatal error of a stage, shared by its clients: once set, every request
    not yet sent fails with it instead of being sent."""

    def __init__(self) -> None:
        self.error: FatalProviderError | None = None
        self._set = asyncio.Event()

    def stop(self, error: FatalProviderError) -> None:
        if self.error is None:
            self.error = error
            self._set.set()

    def check(self) -> None:
        """Raise the stage's fatal error, if there was one."""
        if self.error is not None:
            raise FatalProviderError(self.error.message)

    async def wait(self, delay: float) -> None:
        """Sleep ``delay`` seconds, cut short (and raising) by a fatal error."""
        try:
            await asyncio.wait_for(self._set.wait(), delay)
        except TimeoutError:
            return
        self.check()

    async def slot(self, limiter: Limiter, cost: Cost) -> int:
        """A slot of ``limiter`` for a request of ``cost``, the wait cut short (and raising)
        by a fatal error."""
        self.check()
        number = limiter.try_acquire(cost)
        if number is not None:
            return number
        taking = asyncio.ensure_future(limiter.acquire(cost))
        halted = asyncio.ensure_future(self._set.wait())
        try:
            await asyncio.wait({taking, halted}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # cancelled: a slot granted meanwhile goes back
            halted.cancel()
            if not taking.done():
                taking.cancel()  # acquire gives back a slot granted as it is cancelled
            elif not taking.cancelled() and taking.exception() is None:
                limiter.release(taking.result(), None)
            raise
        halted.cancel()
        if not taking.done():
            taking.cancel()
            await asyncio.gather(taking, return_exceptions=True)
        if self.error is not None:
            if not taking.cancelled() and taking.exception() is None:
                limiter.release(taking.result(), None)
            self.check()
        return taking.result()


class Client:
    """Requests to the provider ``name`` at ``base_url``; the key goes only into headers."""

    def __init__(
        self,
        name: str,
        protocol: str,
        base_url: str,
        api_key: str | None,
        *,
        concurrency: int,
        timeout_secs: int,
        retry: RetryPolicy,
        halt: Halt | None = None,
        max_wait_s: float = 600.0,
        connections: int | None = None,
    ) -> None:
        self.name = name
        self.protocol = protocol
        self.base_url = base_url.rstrip("/")
        self._wire = PROTOCOLS[protocol]
        self._headers = self._wire.headers(api_key)
        self._concurrency = concurrency
        self._connections = connections
        self._timeout_secs = timeout_secs
        self.retry = retry
        self.max_wait_s = max_wait_s
        self.halt = halt or Halt()
        self._session: aiohttp.ClientSession | None = None
        self._ignored: set[str] = set()

    @property
    def session(self) -> aiohttp.ClientSession:
        # Made on first use, inside the running event loop it belongs to. One connection
        # more than the requests in flight: the price list would otherwise wait for the
        # end of the stage, the pool handing each freed connection to the next request.
        # ``connections``: room for a number in flight that follows a served engine.
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._connections or self._concurrency + 1,
                    resolver=aiohttp.ThreadedResolver(),  # the system's, as curl's
                ),
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self._timeout_secs, connect=CONNECT_TIMEOUT),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def resize(self, concurrency: int) -> None:
        """Keep ``concurrency`` requests in flight from now on (a served engine's live
        figure): each model's limiter follows at its next request. Within ``connections``."""
        self._concurrency = concurrency

    def limiter(self, model: str) -> Limiter:
        """The pace of ``model`` here, shared by every request of this process."""
        return limiter_for(
            self.name, self.base_url, model, self._concurrency, self.max_wait_s
        )

    @property
    def samples_in_one(self) -> bool:
        """Whether one request may ask for several replies (``n``): the protocol's say."""
        return bool(self._wire.SAMPLES_IN_ONE)

    async def chat(
        self,
        role: Role,
        messages: list[dict[str, str]],
        on_retry: OnRetry,
        on_limited: OnLimited | None = None,
        on_lost: OnLost | None = None,
        *,
        top_logprobs: int | None = None,
    ) -> Completion:
        """The reply of ``role``'s model to ``messages``; ``on_lost`` is called for each
        try that was sent and got no reply (it may be billed), before the next or the end.
        ``top_logprobs``: ask for that many candidates per token (the openai protocol)."""
        [completion] = await self.chats(
            role, messages, 1, on_retry, on_limited, on_lost, top_logprobs=top_logprobs
        )
        return completion

    async def chats(  # noqa: PLR0917 - chat's arguments, and how many replies
        self,
        role: Role,
        messages: list[dict[str, str]],
        n: int,
        on_retry: OnRetry,
        on_limited: OnLimited | None = None,
        on_lost: OnLost | None = None,
        *,
        top_logprobs: int | None = None,
    ) -> list[Completion]:
        """The replies to ``messages`` of one request asking for ``n`` (more than one only
        where :attr:`samples_in_one`): a server that ignores ``n`` gives fewer. The first
        carries the cost the reply stated, if any: it is the request's. ``top_logprobs``:
        each reply carries that many candidates per token (the openai protocol)."""
        body = self._wire.chat_body(role, messages, n)
        if top_logprobs is not None:
            if self.protocol != "openai":
                raise FatalProviderError(
                    f"providers.{self.name}: the {self.protocol} protocol returns no logprobs"
                )
            body.update(request_fields(top_logprobs))
        data, stated = await self._post(
            self._wire.CHAT_PATH, body, on_retry, model=role.model, on_limited=on_limited,
            on_lost=on_lost,
        )
        try:
            completions: list[Completion] = self._wire.parse_chats(data)
        except (KeyError, IndexError, TypeError, AttributeError, ValueError):
            raise ProviderError("the provider's reply is not a chat completion") from None
        if stated is not None:
            completions[0] = replace(completions[0], cost=stated)
        return completions

    async def embed(
        self, model: str, texts: list[str], on_retry: OnRetry
    ) -> tuple[list[list[float]], int]:
        """One vector per text, in order, and the tokens they cost."""
        if self.protocol != "openai":
            raise FatalProviderError(
                f"providers.{self.name}: embeddings need the openai protocol"
            )
        vectors: list[list[float]] = []
        tokens = 0
        for start in range(0, len(texts), EMBEDDING_CHUNK):
            chunk = texts[start : start + EMBEDDING_CHUNK]
            data, _ = await self._post(
                openai_chat.EMBEDDINGS_PATH,
                openai_chat.embeddings_body(model, chunk),
                on_retry,
                model=model,
            )
            try:
                found, used = openai_chat.parse_embeddings(data, len(chunk))
            except ValueError as error:
                raise ProviderError(str(error)) from None
            except (KeyError, IndexError, TypeError, AttributeError):
                raise ProviderError("the provider's reply is not a list of embeddings") from None
            vectors += found
            tokens += used
        return vectors, tokens

    async def fetch_prices(self) -> dict[str, Price] | None:
        """The provider's model prices: the ``pricing`` its ``/models`` lists (OpenRouter),
        else the ``model_info`` of its ``/model/info`` (LiteLLM); None when neither says.
        Each ask gives up after 10 s; a 429 is waited out as a request's is."""
        listed = await self._price_list(self._wire.MODELS_PATH)
        if listed is None:
            return None
        prices = parse_prices(listed)
        if not prices:  # a list without prices: a gateway's, which may keep them apart
            info = await self._price_list(MODEL_INFO_PATH)
            prices = parse_model_info(info) if info is not None else {}
        return prices or None

    async def _price_list(self, path: str) -> Any:
        """The JSON at ``path``, or None. A 429 is waited out (the wait the provider asks
        for, in any dialect the requests read, else a backoff), up to ``max_wait_s`` in
        all: the budget needs the prices."""
        waited = 0.0
        refusals = 0
        while True:
            try:
                async with self.session.get(
                    f"{self.base_url}/{path}",
                    timeout=aiohttp.ClientTimeout(total=PRICES_TIMEOUT),
                    allow_redirects=False,
                ) as response:
                    if response.status == 429:
                        asked = parse_rate_headers(response.headers).retry_after
                    elif response.status != 200:
                        return None
                    else:
                        return json.loads(await response.read())
            except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
                return None
            refusals += 1
            delay = self.retry.delay(refusals, asked)
            if waited + delay > self.max_wait_s:
                logger.warning(
                    f"providers.{self.name}: the prices ({path}) are still refused by the "
                    f"rate limit after {waited:.1f} s (pipeline.max_wait_s = "
                    f"{self.max_wait_s:g}): costs are unknown"
                )
                return None
            logger.debug(f"providers.{self.name}: {path}: 429; waiting {delay:.1f} s")
            try:
                await self.halt.wait(delay)
            except FatalProviderError:
                return None  # the stage stopped: its error says why
            waited += delay

    async def _post(
        self,
        path: str,
        body: dict[str, Any],
        on_retry: OnRetry,
        *,
        model: str,
        on_limited: OnLimited | None = None,
        on_lost: OnLost | None = None,
    ) -> tuple[Any, float | None]:
        """The reply's JSON and the cost it stated (a gateway's), after every wait and
        retry this request is owed."""
        limiter = self.limiter(model)
        cost = request_cost(body)
        failures = 0
        limited_since: float | None = None
        while True:
            number = await self.halt.slot(limiter, cost)
            given_back = False
            try:
                data, info, stated = await self._post_once(path, body)
            except RateLimitedError as error:
                self._warn_ignored(error.info)
                pause = limiter.refuse(number, error.info)
                given_back = True
                now = time.monotonic()
                limited_since = now if limited_since is None else limited_since
                fatal = self._given_up(error, limiter, cost, pause, now - limited_since)
                if on_limited is not None:
                    on_limited(Refusal(error.message, pause, gave_up=fatal is not None))
                if fatal is not None:
                    # Every other request of this model would wait as long: the stage stops.
                    self.halt.stop(fatal)
                    raise fatal from None
                continue
            except FatalProviderError as error:
                self.halt.stop(error)
                raise
            except TransientProviderError as error:
                failures += 1
                if error.billable and on_lost is not None:
                    limiter.release(number, None)
                    given_back = True
                    on_lost()  # may refuse the retry (the budget): raised from here
                if failures > self.retry.max_retries:
                    raise ProviderError(error.message) from None
                if not given_back:
                    limiter.release(number, None)
                    given_back = True
                delay = self.retry.delay(failures, error.retry_after)
                on_retry(error.message, delay)
                await self.halt.wait(delay)
                continue
            else:
                self._warn_ignored(info)
                limiter.release(number, info)
                given_back = True
                return data, stated
            finally:
                if not given_back:
                    limiter.release(number, None)

    async def not_found(self, path: str, raw: bytes) -> FatalProviderError:
        """What a 404 for ``path`` means: a ``base_url`` that does not end where the API
        starts (its models list is not found either), or a server that answers there but
        has no such endpoint (it does not offer that API)."""
        url = mask_url(f"{self.base_url}/{path}")
        text = _provider_message(404, raw)
        found = redact(f"HTTP 404 for {url}: {text}")[:MESSAGE_LIMIT]
        try:
            async with self.session.get(
                f"{self.base_url}/{self._wire.MODELS_PATH}",
                timeout=aiohttp.ClientTimeout(total=PRICES_TIMEOUT),
                allow_redirects=False,
            ) as response:
                listed = response.status != 404
        except (aiohttp.ClientError, TimeoutError, OSError, ValueError):
            listed = False
        if not listed:
            return FatalProviderError(found + NOT_FOUND_HINT)
        endpoint = path.split("?", 1)[0]
        return FatalProviderError(
            f"{found} (providers.{self.name} answers at its base_url, but has no "
            f"`{endpoint}`: the server does not offer that API)"
        )


    def _given_up(
        self, error: RateLimitedError, limiter: Limiter, cost: Cost, pause: Pause, waited: float
    ) -> FatalProviderError | None:
        """The error that stops the stage after this 429, or None to wait it out: a token
        limit below the request's ``max_tokens`` (no wait helps), or a wait that would pass
        ``max_wait_s`` (the provider's is never cut short: that would send before it
        allows)."""
        head = f"providers.{self.name}: {error.message}"
        setting = f"pipeline.max_wait_s = {self.max_wait_s:g}"
        beyond = limiter.too_large(error.info, cost)
        if beyond is not None:
            name, bucket = beyond
            return FatalProviderError(
                f"{head}: a request may use {cost.output_tokens:.0f} tokens (max_tokens) and "
                f"the provider's limit is {bucket.limit:g} {name.replace('-', ' ')}: no wait "
                "lets it through; lower the role's max_tokens or raise the limit"
            )
        if waited + pause.seconds <= self.max_wait_s:
            logger.debug(f"{head}; waiting {pause.seconds:.2f} s")
            return None
        head += f": still rate-limited after {_seconds(waited)} of waiting"
        if pause.asked:
            return FatalProviderError(
                f"{head}, and the provider asks for {_seconds(pause.seconds)} more, past "
                f"{setting}; run again later"
            )
        return FatalProviderError(
            f"{head} ({setting}), the provider saying nothing of when to come back; run again "
            "later"
        )

    def _warn_ignored(self, info: RateInfo) -> None:
        """Say once a stage each header of this provider ignored as implausible."""
        for shown in info.ignored:
            name = shown.partition(" = ")[0]
            if name not in self._ignored:
                self._ignored.add(name)
                logger.warning(
                    redact(
                        f"providers.{self.name}: the header {shown} is not a finite, plausible "
                        "number: ignored (said once)"
                    )
                )

    async def _post_once(
        self, path: str, body: dict[str, Any]
    ) -> tuple[Any, RateInfo, float | None]:
        try:
            async with self.session.post(
                f"{self.base_url}/{path}", data=encode_body(body), headers=JSON_BODY
            ) as response:
                status = response.status
                raw = await response.read()
                headers = response.headers
        except TimeoutError:
            raise TransientProviderError(
                f"no reply within {self._timeout_secs} s", billable=True
            ) from None
        except aiohttp.ServerDisconnectedError:
            raise TransientProviderError(
                "the provider closed the connection", billable=True
            ) from None
        except aiohttp.ClientConnectorError:
            raise TransientProviderError(f"cannot connect to provider `{self.name}`") from None
        except (aiohttp.ClientError, OSError) as error:
            raise TransientProviderError(f"transport error ({type(error).__name__})") from None
        except ValueError as error:  # aiohttp's own refusals: a key and a URL's password
            raise FatalProviderError(
                redact(f"providers.{self.name}: cannot send ({error})")
            ) from None
        if not 200 <= status < 300:
            model = body.get("model")
            failure = http_error(
                status, raw, headers, provider=self.name, url=f"{self.base_url}/{path}",
                model=model if isinstance(model, str) else None,
            )
            if status == 404 and not isinstance(failure, NoSuchModel):
                failure = await self.not_found(path, raw)
            raise failure
        try:
            return decode_reply(raw), parse_rate_headers(headers), stated_cost(headers)
        except ValueError:
            raise ProviderError("the provider's reply is not valid JSON") from None


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def request_cost(body: dict[str, Any]) -> Cost:
    """What a request is charged against a provider's limits: its prompt, estimated from its
    characters as the provider does, and its ``max_tokens``."""
    limit = body.get("max_tokens", body.get("max_completion_tokens"))
    prompt = sum(_characters(body.get(key)) for key in ("messages", "system", "input"))
    return Cost(
        math.ceil(prompt / CHARS_PER_TOKEN), limit if isinstance(limit, int) else 0
    )


def _characters(value: Any) -> int:
    """The characters of the text in a request's ``value`` (messages, blocks, strings)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_characters(item) for item in value)
    if isinstance(value, dict):
        return _characters(value.get("content")) + _characters(value.get("text"))
    return 0


class NoSuchModel(FatalProviderError):
    """A provider that says it serves no such model: every request of it fails alike."""


def http_error(  # noqa: PLR0911 - one return a kind of failure
    status: int,
    raw: bytes,
    headers: Mapping[str, str],
    *,
    provider: str = "main",
    url: str | None = None,
    model: str | None = None,
) -> Exception:
    """The error an HTTP failure status stands for, naming ``provider`` (and for a 404 the
    ``url`` asked, masked: it is the likeliest mistake of a first setup). A 400 or 404
    that says ``model`` does not exist stops the stage: every other item would fail alike."""
    variable = provider_variable(provider, "api_key")
    if status in (401, 403):  # the provider's text is dropped: it can quote the key
        refused = AUTHENTICATION_FAILED if status == 401 else PERMISSION_DENIED
        return FatalProviderError(refused.format(name=provider, variable=variable))
    text = _provider_message(status, raw)
    if model is not None and status in (400, 404) and NO_SUCH_MODEL.search(text):
        said = redact(f"HTTP {status}: {text}")[:MESSAGE_LIMIT]
        return NoSuchModel(
            f"providers.{provider} has no model `{model}` ({said}): check the model's name "
            "in overbrainer.toml"
        )
    if status == 404 and url is not None:
        message = redact(f"HTTP 404 for {mask_url(url)}: {text}")[:MESSAGE_LIMIT] + NOT_FOUND_HINT
        return FatalProviderError(message)
    message = redact(f"HTTP {status}: {text}")[:MESSAGE_LIMIT]
    if status in FATAL_STATUSES:
        return FatalProviderError(message)
    if status == 429:
        if _out_of_credit(raw):
            return FatalProviderError(
                f"providers.{provider}: {message} (the account is out of credit: no wait helps)"
            )
        return RateLimitedError(message, parse_rate_headers(headers))
    if status in RETRIED_STATUSES or status >= 500:
        return TransientProviderError(message, parse_retry_after(headers.get("Retry-After")))
    return ProviderError(message)


def _out_of_credit(raw: bytes) -> bool:
    """Whether a 429 is OpenAI's ``insufficient_quota``: a refusal, not a queue."""
    try:
        data = json.loads(raw)
    except ValueError:
        return False
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return False
    return "insufficient_quota" in (error.get("code"), error.get("type"))


def _provider_message(status: int, raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        for candidate in (
            error.get("message") if isinstance(error, dict) else error,
            data.get("message"),
            data.get("detail"),
        ):
            if isinstance(candidate, str) and candidate.strip():
                text = candidate
                break
    text = " ".join(text.split())
    if text:
        return text
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "no message"
