"""The loopback provider with both batch APIs: OpenAI's files and batches, and Anthropic's
Message Batches, on 127.0.0.1 with a real socket.

A batch ends ``process_s`` seconds after it was made (never while ``hold`` is set), each
item answered as the fake's default model answers it online. Tests script what goes wrong:
``item_fate`` (an item ``errored``, ``expired`` or ``malformed`` in the results), and
``batch_fate`` (the whole batch ``failed``, ``cancelled`` or ``expired``), ``hold_create``
(the batch is made, its id sent back that many seconds later: a kill in between), and the
scripted replies and faults of ``FakeProvider.on`` (a failing poll, a 429). As real ones do,
it lists batches a page at a time (``page_size``, newest first unless ``oldest_first``),
forgets a batch it ``purge``s (a 404 from then on), and may give a relative ``results_url``
(``results_base = "/v1"``); a running batch's ``progress`` is the items its
``request_counts`` say are done. Every request is recorded in ``requests``, the uploaded files
in ``uploads`` (their names in ``filenames``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp import web
from tests.helpers.fake_provider import FakeProvider, Reply, Seen, _response

Fate = Callable[[str, dict[str, Any]], "str | None"]
"""What becomes of an item (its custom_id, its body): None (answered), ``errored``,
``expired`` or ``malformed``."""

_PATHS = ("files", "batches", "messages/batches")


@dataclass
class FakeBatch:
    id: str
    protocol: str
    items: list[tuple[str, dict[str, Any]]]
    created: float
    status: str = "in_progress"
    input_file_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    output_file_id: str | None = None
    error_file_id: str | None = None
    results: bytes = b""
    counts: dict[str, int] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    cancelled: bool = False
    progress: int = 0
    """Items counted as answered while it still runs (its ``request_counts``)."""

    def questions(self) -> list[str]:
        """The question ids its items' custom_ids carry (behind the batch's key)."""
        return [question(custom_id) for custom_id, _ in self.items]


def question(custom_id: str) -> str:
    """The question id in an item's custom_id: what follows the batch's key."""
    return custom_id.rsplit("-", 1)[-1]


class FakeBatchProvider(FakeProvider):
    """``url`` as ``FakeProvider``'s; ``batches`` by id, in the order they were made."""

    foreign = False
    """Whether a ``foreign`` line was written (a results line naming no item)."""

    def __init__(self, latency: float = 0.0, process_s: float = 0.05) -> None:
        super().__init__(latency)
        self.process_s = process_s
        self.hold = False
        self.hold_create = 0.0
        self.lose_create_replies = 0
        """How many batches are made and answered with a 500 instead of their id."""
        self.item_fate: Fate = lambda custom_id, body: None
        self.batch_fate: Callable[[FakeBatch], str | None] = lambda batch: None
        self.results_base: str | None = None
        """Where Anthropic's ``results_url`` points (default: this server); a path makes
        it a relative reference."""
        self.page_size = 100
        """The most batches a page of the list holds (``has_more`` tells of the rest)."""
        self.oldest_first = False
        self.batches: dict[str, FakeBatch] = {}
        self.files: dict[str, bytes] = {}
        self.uploads: list[bytes] = []
        self.filenames: list[str] = []
        self._ids = itertools.count(1)

    # -- what tests read ------------------------------------------------------------------

    def submitted(self) -> list[FakeBatch]:
        return list(self.batches.values())

    def purge(self, batch_id: str) -> None:
        """Forget a batch, as a provider does after a while (or another account's key)."""
        del self.batches[batch_id]

    def batch_items(self) -> list[str]:
        """The question ids of every item of every batch made, in order."""
        return [q for batch in self.batches.values() for q in batch.questions()]

    # -- serving ----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path_qs.removeprefix("/v1/").removeprefix("/")
        if not path.startswith(_PATHS):
            return await super()._handle(request)
        if request.content_type.startswith("multipart/"):
            body: Any = {}
            async for part in await request.multipart():
                data = await part.read()  # type: ignore[union-attr]
                body[part.name] = data.decode() if part.name == "purpose" else data  # type: ignore[union-attr]
                if part.filename:  # type: ignore[union-attr]
                    body["filename"] = part.filename  # type: ignore[union-attr]
        else:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
        seen = Seen(request.method, path, dict(request.headers), body)
        with self._lock:
            self.requests.append(seen)
        reply = self._scripted(seen)
        await asyncio.sleep(self.latency + (reply.delay if reply else 0))
        if reply is not None and (reply.body is not None or reply.status != 200):
            return _response(reply)
        return await self._route(seen)

    async def _route(self, seen: Seen) -> web.StreamResponse:
        method, parts = seen.method, seen.path.split("?")[0].split("/")
        if parts[0] == "messages":
            parts = ["messages/batches", *parts[2:]]
        head, rest = parts[0], parts[1:]
        if head == "files" and method == "POST" and not rest:
            return self._upload(seen.body)
        if head == "files" and method == "GET" and len(rest) == 2 and rest[1] == "content":
            data = self.files.get(rest[0])
            if data is None:
                return _json({"error": {"message": "no such file"}}, 404)
            return web.Response(body=data, content_type="application/jsonl")
        protocol = "anthropic" if head == "messages/batches" else "openai"
        if method == "POST" and not rest:
            return await self._create(protocol, seen.body)
        if method == "GET" and not rest:
            return _json(self._list(protocol, seen.path))
        batch = self.batches.get(rest[0]) if rest else None
        if batch is None or batch.protocol != protocol:
            return _json({"error": {"message": "no such batch"}}, 404)
        if method == "GET" and len(rest) == 1:
            return _json(self._view(self._advance(batch)))
        if method == "POST" and rest[1:] == ["cancel"]:
            batch.cancelled = True
            batch.status = "cancelling" if protocol == "openai" else "canceling"
            return _json(self._view(batch))
        if method == "GET" and rest[1:] == ["results"] and batch.status == "ended":
            return web.Response(body=batch.results, content_type="application/binary")
        return _json({"error": {"message": "not found"}}, 404)

    def _list(self, protocol: str, path: str) -> dict[str, Any]:
        """A page of the batches, after the one named by ``after`` (openai) or
        ``after_id`` (anthropic)."""
        listed = sorted(
            (b for b in self.batches.values() if b.protocol == protocol),
            key=lambda b: (b.created, b.id), reverse=not self.oldest_first,
        )
        query = parse_qs(urlsplit(path).query)
        after = (query.get("after") or query.get("after_id") or [None])[0]
        ids = [b.id for b in listed]
        start = ids.index(after) + 1 if after in ids else 0
        page = listed[start:start + self.page_size]
        return {"data": [self._view(self._advance(b)) for b in page],
                "has_more": start + self.page_size < len(listed)}

    def _upload(self, body: dict[str, Any]) -> web.Response:
        if not isinstance(body, dict) or body.get("purpose") != "batch" or "file" not in body:
            return _json({"error": {"message": "purpose=batch and a file are required"}}, 400)
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = body["file"]
        self.uploads.append(body["file"])
        self.filenames.append(body.get("filename", ""))
        return _json({"id": file_id, "object": "file", "purpose": "batch"})

    async def _create(self, protocol: str, body: Any) -> web.Response:
        if protocol == "openai":
            data = self.files.get(body.get("input_file_id"))
            if data is None:
                return _json({"error": {"message": "no such input file"}}, 400)
            lines = [json.loads(line) for line in data.splitlines() if line.strip()]
            items = [(line["custom_id"], line["body"]) for line in lines]
            batch_id = f"batch_{next(self._ids)}"
        else:
            items = [(r["custom_id"], r["params"]) for r in body["requests"]]
            batch_id = f"msgbatch_{next(self._ids)}"
        batch = FakeBatch(batch_id, protocol, items, time.time(),
                          input_file_id=body.get("input_file_id"),
                          metadata=body.get("metadata") or {})
        if protocol == "openai":
            batch.status = "validating"
        self.batches[batch_id] = batch
        await asyncio.sleep(self.hold_create)
        if self.lose_create_replies > 0:
            self.lose_create_replies -= 1
            return _json({"error": {"message": "upstream timeout"}}, 500)
        return _json(self._view(batch))

    # -- processing -------------------------------------------------------------------------

    def _advance(self, batch: FakeBatch) -> FakeBatch:
        if batch.status in ("completed", "failed", "expired", "cancelled", "ended"):
            return batch
        if batch.status == "validating":
            batch.status = "in_progress"
            return batch
        if self.hold and not batch.cancelled:
            return batch
        if not batch.cancelled and time.time() - batch.created < self.process_s:
            return batch
        fate = "cancelled" if batch.cancelled else self.batch_fate(batch)
        self._finish(batch, fate)
        return batch

    def _finish(self, batch: FakeBatch, fate: str | None) -> None:
        out: list[bytes] = []
        err: list[bytes] = []
        counts = {"succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        for number, (custom_id, body) in enumerate(batch.items):
            if fate == "failed":
                break
            kind = self.item_fate(custom_id, body)
            if fate in ("cancelled", "expired") and number > 0:
                kind = "expired" if fate == "expired" else "canceled"
            line, to_errors = self._result(batch.protocol, custom_id, body, kind)
            if line is not None:
                (err if to_errors else out).append(line)
            counts[kind if kind in counts else "succeeded"] += 1
        batch.counts = counts
        batch.cancelled = batch.cancelled or fate == "cancelled"
        if fate == "failed":
            batch.errors = [{"code": "invalid_request", "message": "the input file is invalid"}]
        if batch.protocol == "anthropic":
            batch.status = "ended"
            batch.results = b"".join(out + err)
            return
        batch.status = {"failed": "failed", "cancelled": "cancelled",
                        "expired": "expired"}.get(fate or "", "completed")
        if out:
            batch.output_file_id = f"file-{next(self._ids)}"
            self.files[batch.output_file_id] = b"".join(out)
        if err:
            batch.error_file_id = f"file-{next(self._ids)}"
            self.files[batch.error_file_id] = b"".join(err)

    def _result(
        self, protocol: str, custom_id: str, body: dict[str, Any], kind: str | None
    ) -> tuple[bytes | None, bool]:
        """An item's results line, and whether it goes to the error file (``foreign``: the
        line of an item the batch never had, beside the item's own)."""
        if kind == "foreign":
            self.foreign = True
            own, _ = self._result(protocol, custom_id, body, None)
            other, _ = self._result(protocol, "ob-0000000000000000-nobody", body, None)
            return (own or b"") + (other or b""), False
        if kind == "malformed":
            return f'{{"custom_id": "{custom_id}", "resp'.encode() + b"\n", False
        if kind == "canceled" and protocol == "openai":
            return None, False  # a cancelled batch's unfinished items have no line
        if protocol == "anthropic":
            if kind is None:
                seen = Seen("POST", "messages", {}, body)
                result: dict[str, Any] = {"type": "succeeded", "message": self._default(seen)}
            elif kind == "errored":
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "invalid_request_error", "message": "max_tokens: too large"}}}
            else:
                result = {"type": kind}
            return _line({"custom_id": custom_id, "result": result}), False
        if kind is None:
            seen = Seen("POST", "chat/completions", {}, body)
            response = {"status_code": 200, "request_id": "req", "body": self._default(seen)}
            return _line({"id": "r", "custom_id": custom_id, "response": response,
                          "error": None}), False
        if kind == "errored":
            response = {"status_code": 400, "request_id": "req",
                        "body": {"error": {"message": "max_tokens is too large"}}}
            return _line({"id": "r", "custom_id": custom_id, "response": response,
                          "error": None}), True
        error = {"code": "batch_expired",
                 "message": "This request could not be executed before the completion window "
                 "expired."}
        return _line({"id": "r", "custom_id": custom_id, "response": None, "error": error}), True

    def _view(self, batch: FakeBatch) -> dict[str, Any]:
        if batch.protocol == "anthropic":
            ended = batch.status == "ended"
            counts = batch.counts or {"processing": len(batch.items) - batch.progress,
                                      "succeeded": batch.progress}
            base = self.results_base or self.url
            return {
                "id": batch.id, "type": "message_batch",
                "processing_status": batch.status if batch.status != "canceling" else "canceling",
                "request_counts": {"processing": 0, "succeeded": 0, "errored": 0,
                                   "canceled": 0, "expired": 0, **counts},
                "created_at": _iso(batch.created),
                "cancel_initiated_at": _iso(batch.created) if batch.cancelled else None,
                "results_url": f"{base}/messages/batches/{batch.id}/results" if ended else None,
            }
        return {
            "id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions",
            "status": batch.status, "input_file_id": batch.input_file_id,
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "created_at": int(batch.created), "metadata": batch.metadata,
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "request_counts": {"total": len(batch.items),
                               "completed": batch.counts.get("succeeded", batch.progress),
                               "failed": len(batch.items) - batch.counts.get("succeeded", 0)
                               if batch.counts else 0},
        }


def _line(record: dict[str, Any]) -> bytes:
    return (json.dumps(record) + "\n").encode()


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _json(body: Any, status: int = 200) -> web.Response:
    return _response(Reply(body, status))


def main() -> None:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--process-s", type=float, default=0.05)
    args = parser.parse_args()
    server = FakeBatchProvider(latency=args.latency, process_s=args.process_s).start()
    print(server.url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
    server.stop()


if __name__ == "__main__":
    main()
