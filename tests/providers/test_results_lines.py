"""Reading a batch's results file: linear in its size, every line whole, a bound on one."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web

from overbrainer.providers import batch_api
from overbrainer.providers.client import Client
from overbrainer.providers.errors import ProviderError
from overbrainer.providers.retry import RetryPolicy


async def _read(body_chunks: list[bytes], limit: int | None = None) -> list[bytes]:
    async def serve(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        for chunk in body_chunks:
            await response.write(chunk)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/results", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    client = Client("main", "openai", f"http://127.0.0.1:{port}", None, concurrency=1,
                    timeout_secs=30, retry=RetryPolicy(0))
    try:
        return [line async for line in batch_api.lines(client, client.base_url + "/results", 30)]
    finally:
        await client.close()
        await runner.cleanup()


def test_lines_split_across_chunks_come_whole():
    body = b"".join(b'{"n": %d, "pad": "%s"}\n' % (n, b"x" * (n * 997 % 70000)) for n in range(300))
    chunks = [body[i : i + 4093] for i in range(0, len(body), 4093)]
    found = asyncio.run(_read(chunks))
    assert found == body.splitlines()


def test_a_huge_line_without_an_end_is_refused_quickly(monkeypatch):
    """A 96 MB line with no newline (it took 75 s and 348 MB, the buffer re-joined at each
    chunk): refused once past the bound."""
    monkeypatch.setattr(batch_api, "MAX_LINE", 32 << 20)
    chunk = b"y" * (1 << 20)
    with pytest.raises(ProviderError, match="longer than 32 MiB"):
        asyncio.run(_read([chunk] * 96))
