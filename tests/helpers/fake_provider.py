"""A loopback LLM provider for tests and benchmarks: OpenAI chat completions, embeddings and
models, and Anthropic messages, on 127.0.0.1 with a real socket.

By default it plays a model that follows the test prompts (``subtopics|TOPIC|COUNT``,
``questions|TOPIC|SUBTOPIC|COUNT``, anything else is a question to answer, with raw
reasoning). Tests script other replies and faults with ``on``; every request is recorded.

Run as a script (``python tests/helpers/fake_provider.py --latency 0.1``) it serves in its own
process and prints its URL on stdout.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import math
import socket
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from aiohttp import web

PRICES = {"gen-model": ("0.000001", "0.000002"), "parent-model": ("0.000003", "0.000004")}


@dataclass
class Seen:
    """A request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    reply_usage: tuple[int, int] | None = None
    """The tokens in and out of the reply it made (and billed, whether the client waited
    for it or not), when the reply says them."""

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def prompt(self) -> str:
        """The last user message (or the embedding inputs joined)."""
        if not isinstance(self.body, dict):
            return ""
        if "input" in self.body:
            return "\n".join(self.body["input"])
        users = [m["content"] for m in self.body.get("messages", []) if m["role"] == "user"]
        return users[-1] if users else ""

    @property
    def system(self) -> str | None:
        if not isinstance(self.body, dict):
            return None
        if "system" in self.body:
            return self.body["system"]
        systems = [m["content"] for m in self.body.get("messages", []) if m["role"] == "system"]
        return systems[0] if systems else None


@dataclass
class Reply:
    """A scripted reply: JSON (a dict or list), raw text or bytes, or a dropped connection.

    A 200 without a body is the default reply, so a script may only add a delay or act.
    """

    body: Any = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    delay: float = 0.0


Script = Callable[[Seen], "Reply | dict | None"]


@dataclass
class _Rule:
    match: Callable[[Seen], bool]
    reply: Reply | Script
    times: int | None


def _usage_of(body: Any) -> tuple[int, int] | None:
    usage = body.get("usage") if isinstance(body, dict) else None
    if not isinstance(usage, dict):
        return None
    tokens_in = usage.get("prompt_tokens", usage.get("input_tokens"))
    tokens_out = usage.get("completion_tokens", usage.get("output_tokens"))
    if isinstance(tokens_in, int) and isinstance(tokens_out, int):
        return tokens_in, tokens_out
    return None


def openai_completion(
    content: str | None,
    *,
    finish: str = "stop",
    reasoning: str | None = None,
    usage: tuple[int, int] = (10, 20),
    **message: Any,
) -> dict[str, Any]:
    """An OpenAI chat completion body."""
    body: dict[str, Any] = {"role": "assistant", "content": content, **message}
    if reasoning is not None:
        body["reasoning"] = reasoning
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": body, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]},
    }


LOGPROB_ALPHABET = string.ascii_letters + string.digits + " .,?:"
"""The characters the fake parent's top-k candidates are drawn from."""


def fake_logprobs(text: str, top_k: int) -> dict[str, Any]:
    """``choices[0].logprobs`` as vLLM gives it for ``text``, one token a character: the
    character itself first, then the alphabet's others, less and less likely."""
    content = []
    for char in text:
        others = [c for c in LOGPROB_ALPHABET if c != char][: max(0, top_k - 1)]
        chosen = {"token": char, "logprob": -0.125, "bytes": list(char.encode())}
        top = [chosen] + [
            {"token": c, "logprob": -1.0 - n / 2, "bytes": list(c.encode())}
            for n, c in enumerate(others)
        ]
        content.append({**chosen, "top_logprobs": top[:top_k]})
    return {"content": content}


def anthropic_message(
    blocks: list[dict[str, Any]], *, stop: str = "end_turn", usage: tuple[int, int] = (10, 20)
) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": stop,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


def hashed_vector(text: str, dims: int = 32) -> list[float]:
    """A fixed pseudo-random vector per text: different texts are nearly orthogonal."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(digest[i % len(digest)] ^ (i * 37 % 256)) / 255 - 0.5 for i in range(dims)]


def go_duration(seconds: float) -> str:
    """A duration as OpenAI writes its resets: ``6m0s``, ``1.5s``, ``40ms``."""
    if seconds < 1:
        return f"{max(round(seconds * 1000), 0)}ms"
    minutes, rest = divmod(seconds, 60)
    text = f"{rest:.3f}".rstrip("0").rstrip(".") + "s"
    return f"{int(minutes)}m{text}" if minutes else text


@dataclass
class RateLimit:
    """A token bucket of ``burst`` requests refilled at ``rate`` a second (and, with
    ``token_rate``, one of ``token_burst`` tokens), telling of itself in the headers of
    ``dialect``; what it admits and refuses is counted.

    ``litellm`` is LiteLLM proxy's dialect: OpenAI's names without the reset, and a 429
    whose wait is ``llm_provider-retry-after`` (whole seconds), or none with ``bare_429``.
    ``window_s`` makes the buckets fixed windows (full again at each multiple of it, as
    LiteLLM's per-minute counters) instead of refilling smoothly. Tokens are counted from
    each reply's usage, or with ``charge = "reserved"`` at admission, the prompt (4
    characters a token) plus ``max_tokens``, as OpenAI, Anthropic and LiteLLM count them."""

    rate: float
    burst: float
    dialect: Literal["openai", "anthropic", "litellm"] = "openai"
    token_rate: float | None = None
    token_burst: float | None = None
    window_s: float | None = None
    bare_429: bool = False
    charge: Literal["usage", "reserved"] = "usage"
    admitted: int = 0
    refused: int = 0
    _level: float = 0.0
    _tokens: float = 0.0
    _at: float = 0.0
    _need: float = 1.0

    def __post_init__(self) -> None:
        self._level, self._tokens = self.burst, self.token_burst or 0.0
        self._at = time.monotonic()

    def take(self, seen: Seen) -> dict[str, str] | None:
        """The headers of an admitted request, or None when it is refused."""
        now = time.monotonic()
        if self.window_s is not None:
            if now // self.window_s != self._at // self.window_s:
                self._level, self._tokens = self.burst, self.token_burst or 0.0
        else:
            self._level = min(self.burst, self._level + (now - self._at) * self.rate)
            if self.token_rate:
                self._tokens = min(self.token_burst or 0.0,
                                   self._tokens + (now - self._at) * self.token_rate)
        self._at = now
        need = self.reserved(seen) if self.charge == "reserved" else 1
        if self._level < 1 or (self.token_rate and self._tokens < need):
            self.refused += 1
            self._need = need
            return None
        self._level -= 1
        if self.charge == "reserved":
            self._tokens -= need
        self.admitted += 1
        return self.headers()

    @staticmethod
    def reserved(seen: Seen) -> int:
        """What a request is charged at admission: its prompt's characters over 4, plus its
        ``max_tokens``."""
        body = seen.body if isinstance(seen.body, dict) else {}
        text = sum(len(m.get("content") or "") for m in body.get("messages", []))
        text += len(body.get("system") or "")
        return math.ceil(text / 4) + int(body.get("max_tokens") or 0)

    def spend_tokens(self, count: int) -> None:
        if self.token_rate and self.charge == "usage":
            self._tokens -= count

    def _wait(self) -> float:
        """Seconds until a request of the bucket's may pass again."""
        if self.window_s is not None:
            return self.window_s - time.monotonic() % self.window_s
        wait = max((1 - self._level) / self.rate, 0.0)
        if self.token_rate and self._tokens < self._need:
            wait = max(wait, (self._need - self._tokens) / self.token_rate)
        return wait

    def headers(self) -> dict[str, str]:
        buckets = {"requests": (self.burst, self._level, self.rate)}
        if self.token_rate:
            buckets["tokens"] = (self.token_burst or 0.0, max(self._tokens, 0.0), self.token_rate)
        found = {}
        for name, (limit, level, rate) in buckets.items():
            reset = (limit - level) / rate if self.window_s is None else self._wait()
            if self.dialect in ("openai", "litellm"):
                found[f"x-ratelimit-limit-{name}"] = str(int(limit))
                found[f"x-ratelimit-remaining-{name}"] = str(int(level))
                if self.dialect == "openai":
                    found[f"x-ratelimit-reset-{name}"] = go_duration(reset)
            else:
                when = datetime.now(UTC) + timedelta(seconds=reset)
                found[f"anthropic-ratelimit-{name}-limit"] = str(int(limit))
                found[f"anthropic-ratelimit-{name}-remaining"] = str(int(level))
                found[f"anthropic-ratelimit-{name}-reset"] = when.isoformat(
                    timespec="milliseconds"
                ).replace("+00:00", "Z")
        return found

    def refusal(self) -> Reply:
        """A 429 as the dialect's provider sends it."""
        wait = self._wait()
        headers = self.headers()
        if self.dialect == "openai":
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
            headers["retry-after"] = str(math.ceil(wait))
            body = {"error": {"message": "Rate limit reached for requests", "type": "requests",
                              "code": "rate_limit_exceeded"}}
        elif self.dialect == "litellm":
            if not self.bare_429:
                headers["llm_provider-retry-after"] = str(math.ceil(wait))
            body = {"error": {"message": "litellm.RateLimitError: Max parallel request limit "
                                         "reached", "type": "None", "code": "429"}}
        else:
            headers["retry-after"] = str(math.ceil(wait))
            body = {"type": "error", "error": {"type": "rate_limit_error",
                                               "message": "Number of requests has exceeded "
                                                          "your rate limit"}}
        return Reply(body, status=429, headers=headers)


class FakeProvider:
    """The server; ``url`` is the base URL to configure (``…/v1``)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.requests: list[Seen] = []
        self.prices: dict[str, tuple[str, str]] = dict(PRICES)
        self.listing: Literal["openrouter", "litellm"] = "openrouter"
        """Where the prices are: OpenRouter's ``pricing`` in ``/models``, or LiteLLM's
        ``model_info`` in ``/model/info`` (its ``/models`` then lists no prices)."""
        self.embedding: Callable[[str], list[float]] = hashed_vector
        self.in_flight = 0  # chat requests being answered
        self.max_in_flight = 0
        self.rate_limit: RateLimit | None = None
        self.max_logprobs: int | None = 20
        """The most ``top_logprobs`` a request may ask (vLLM's ``--max-logprobs``); None:
        a server that ignores ``logprobs`` altogether."""
        self.reply_tokens = 20
        """Tokens of a default reply (fewer when ``max_tokens`` cuts it)."""
        self.prompt_tokens: Callable[[Seen], int] = lambda seen: 10
        """Tokens the default reply says its prompt took (a benchmark counts them)."""
        self.takes_n = True
        """Whether a chat completion asking for ``n`` replies gets them (False: one, as a
        server that ignores ``n`` gives)."""
        self._rules: list[_Rule] = []
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -----------------------------------------------------------------------

    def on(
        self,
        match: Callable[[Seen], bool] | None,
        reply: Reply | Script,
        times: int | None = 1,
    ) -> None:
        """Answer requests ``match`` accepts (default: any chat request) with ``reply``, a
        ``Reply`` or a function of the request returning one (or a JSON body, or None to
        fall through), ``times`` times (None: always)."""
        with self._lock:
            self._rules.append(_Rule(match or is_chat, reply, times))

    def limit(self, rate: float, burst: float | None = None, **more: Any) -> RateLimit:
        """Admit chat requests at ``rate`` a second (bursts of ``burst``, default one
        second's worth); the rest get a 429. Returns the bucket, to read its counts."""
        with self._lock:
            self.rate_limit = RateLimit(rate, rate if burst is None else burst, **more)
            return self.rate_limit

    def chats(self, model: str | None = None) -> list[Seen]:
        """The chat requests received, of ``model`` if given."""
        return [s for s in self.requests if is_chat(s) and (model is None or s.model == model)]

    # -- running -------------------------------------------------------------------------

    def start(self) -> FakeProvider:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()

        def serve() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._serve(sock))
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=serve, name="fake-provider", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    async def _serve(self, sock: socket.socket) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, backlog=1024).start()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = request.path_qs.removeprefix("/v1/").removeprefix("/")
        seen = Seen(request.method, path, dict(request.headers), body)
        chat = is_chat(seen)
        with self._lock:
            self.requests.append(seen)
            self.in_flight += chat
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            limited: dict[str, str] | None = {}
            if chat and self.rate_limit is not None:
                with self._lock:
                    limited = self.rate_limit.take(seen)
            if limited is None:
                assert self.rate_limit is not None
                with self._lock:
                    reply = self.rate_limit.refusal()
            else:
                reply = self._scripted(seen) or Reply()
                reply = replace(reply, headers={**limited, **reply.headers})
            if reply.body is None and reply.status == 200:
                if seen.path == "model/info" and self.listing != "litellm":
                    reply = replace(reply, body={"detail": "Not Found"}, status=404)
                else:
                    made = self._default(seen)
                    reply = made if isinstance(made, Reply) else replace(reply, body=made)
            if chat and reply.status == 200:
                seen.reply_usage = _usage_of(reply.body)
            if limited and self.rate_limit is not None and isinstance(reply.body, dict):
                usage = reply.body.get("usage") or {}
                with self._lock:
                    self.rate_limit.spend_tokens(sum(
                        v for v in usage.values() if isinstance(v, int)
                    ))
            await asyncio.sleep(self.latency + reply.delay)
            if reply.drop:
                assert request.transport is not None
                request.transport.abort()
                raise asyncio.CancelledError
            return _response(reply)
        finally:
            with self._lock:
                self.in_flight -= chat

    def _scripted(self, seen: Seen) -> Reply | None:
        with self._lock:
            rules = list(self._rules)
        for rule in rules:
            if not rule.match(seen):
                continue
            with self._lock:
                if rule.times is not None:
                    if rule.times <= 0:
                        continue
                    rule.times -= 1
            reply = rule.reply(seen) if callable(rule.reply) else rule.reply
            if reply is None:
                continue
            return reply if isinstance(reply, Reply) else Reply(reply)
        return None

    def _default(self, seen: Seen) -> Any:
        if seen.method == "GET" and seen.path == "model/info":
            return {"data": [
                {"model_name": model, "litellm_params": {"model": f"openai/{model}"},
                 "model_info": {"input_cost_per_token": float(prompt),
                                "output_cost_per_token": float(completion)}}
                for model, (prompt, completion) in self.prices.items()
            ]}
        if seen.method == "GET" and seen.path.startswith("models") and self.listing == "litellm":
            return {"object": "list", "data": [
                {"id": model, "object": "model", "owned_by": "openai"} for model in self.prices
            ]}
        if seen.method == "GET" and seen.path.startswith("models"):
            return {"data": [
                {"id": model, "pricing": {"prompt": prompt, "completion": completion}}
                for model, (prompt, completion) in self.prices.items()
            ]}
        if seen.path == "embeddings":
            inputs = seen.body["input"]
            return {
                "data": [
                    {"index": i, "embedding": self.embedding(text)}
                    for i, text in reversed(list(enumerate(inputs)))  # out of order, on purpose
                ],
                "usage": {"prompt_tokens": 2 * len(inputs)},
            }
        prompt = seen.prompt
        parts = prompt.split("|")
        if parts[0] == "subtopics":
            topic, count = parts[1], int(parts[2])
            text = json.dumps([f"{topic} area {next(self._counter)}" for _ in range(count)])
            reasoning = None
        elif parts[0] == "questions":
            count = int(parts[3])
            names = [next(self._counter) for _ in range(count)]
            text = json.dumps([f"Q{n} alpha{n} beta{n} gamma{n} delta{n}?" for n in names])
            reasoning = None
        else:
            text, reasoning = f"The answer to: {prompt}", f"Thinking about: {prompt}"
        # As a real provider does: never more than max_tokens out, cut ("length") at it.
        limit = seen.body.get("max_tokens") if isinstance(seen.body, dict) else None
        whole = self.reply_tokens
        out = min(whole, limit) if isinstance(limit, int) else whole
        tokens_in = self.prompt_tokens(seen)
        if seen.path == "messages":
            # Signed, as Anthropic's are (an open-weights server's thinking is not).
            blocks = (
                [{"type": "thinking", "thinking": reasoning, "signature": "c2lnbmVk"}]
                if reasoning else []
            )
            stop = "max_tokens" if out < whole else "end_turn"
            return anthropic_message(
                [*blocks, {"type": "text", "text": text}], stop=stop, usage=(tokens_in, out)
            )
        reply = openai_completion(
            text, reasoning=reasoning, finish="length" if out < whole else "stop",
            usage=(tokens_in, out),
        )
        asked = seen.body.get("top_logprobs") if seen.body.get("logprobs") else None
        if isinstance(asked, int) and self.max_logprobs is not None:
            if asked > self.max_logprobs:
                return Reply({"error": {"message": (
                    f"Requested sample logprobs of {asked}, which is greater than max "
                    f"allowed: {self.max_logprobs}")}}, status=400)
            reply["choices"][0]["logprobs"] = fake_logprobs(text, asked)
        n = seen.body.get("n", 1) if isinstance(seen.body, dict) else 1
        if self.takes_n and isinstance(n, int) and n > 1:  # n replies, the prompt paid once
            [choice] = reply["choices"]
            reply["choices"] = [{**choice, "index": i} for i in range(n)]
            reply["usage"]["completion_tokens"] = n * out
        return reply


def is_chat(seen: Seen) -> bool:
    return seen.method == "POST" and seen.path in ("chat/completions", "messages")


def _response(reply: Reply) -> web.Response:
    if isinstance(reply.body, dict | list):
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)
    data = reply.body.encode() if isinstance(reply.body, str) else (reply.body or b"")
    return web.Response(
        body=data, status=reply.status, headers=reply.headers, content_type="application/json"
    )


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--rate", type=float, help="admit this many chat requests a second")
    parser.add_argument("--dialect", choices=["openai", "anthropic", "litellm"],
                        default="openai")
    parser.add_argument("--bare-429", action="store_true", help="429s without a wait")
    args = parser.parse_args()
    server = FakeProvider(latency=args.latency).start()
    if args.rate:
        server.limit(args.rate, dialect=args.dialect, bare_429=args.bare_429)
    print(server.url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    server.stop()


if __name__ == "__main__":
    main()
