"""A loopback LLM provider for tests and benchmarks: OpenAI chat completions, embeddings and
models, and Anthropic messages, on 127.0.0.1 with a real socket.

By default it plays a model that follows the test prompts (``subtopics|TOPIC|COUNT``,
``questions|TOPIC|SUBTOPIC|COUNT``, anything else is a question to answer, with raw
reasoning). Tests script other replies and faults with ``on``; every request is recorded.

Run as a script (``python tests/fake_provider.py --latency 0.1``) it serves in its own
process and prints its URL on stdout.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

PRICES = {"gen-model": ("0.000001", "0.000002"), "parent-model": ("0.000003", "0.000004")}


@dataclass
class Seen:
    """A request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

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


class FakeProvider:
    """The server; ``url`` is the base URL to configure (``…/v1``)."""

    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency
        self.requests: list[Seen] = []
        self.prices: dict[str, tuple[str, str]] = dict(PRICES)
        self.embedding: Callable[[str], list[float]] = hashed_vector
        self.in_flight = 0  # chat requests being answered
        self.max_in_flight = 0
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
            reply = self._scripted(seen) or Reply()
            if reply.body is None and reply.status == 200:
                reply.body = self._default(seen)
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
        if seen.path == "messages":
            blocks = [{"type": "thinking", "thinking": reasoning}] if reasoning else []
            return anthropic_message([*blocks, {"type": "text", "text": text}])
        return openai_completion(text, reasoning=reasoning)


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
    args = parser.parse_args()
    server = FakeProvider(latency=args.latency).start()
    print(server.url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    server.stop()


if __name__ == "__main__":
    main()
