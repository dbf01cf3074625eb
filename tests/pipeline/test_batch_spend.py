"""A batch's money: each result's cost is on disk as it is saved, so a ``kill -9`` in the
middle of a download loses none of it, and a budget holds the batch to what it can pay."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from tests.helpers.fake_batch import FakeBatchProvider
from tests.helpers.fake_provider import Seen
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions, write_project

from overbrainer.pipeline.spend import read_spending, spent

CLI = str(Path(sys.executable).parent / "overbrainer")
BATCH_CONFIG = PIPELINE_CONFIG.replace(
    'model = "parent-model"\nreasoning = true\n',
    'model = "parent-model"\nreasoning = true\nbatch = true\nmax_tokens = 20\n',
).replace("[pipeline]\n", "[pipeline]\nbatch_poll_s = 0.02\n")
EACH = (10 * 3e-6 + 20 * 4e-6) * 0.5  # an answer at the batch price (batch_discount 0.5)


class SlowResults(FakeBatchProvider):
    """Streams a results file a line every ``pause`` seconds, as a big download goes."""

    pause = 0.3

    async def _route(self, seen: Seen) -> web.StreamResponse:
        parts = seen.path.split("?")[0].split("/")
        if seen.method == "GET" and parts[0] == "files" and parts[2:] == ["content"]:
            data = self.files.get(parts[1], b"")
            response = web.StreamResponse(headers={"Content-Type": "application/jsonl"})
            assert self._request is not None
            await response.prepare(self._request)
            for line in data.splitlines(keepends=True):
                await response.write(line)
                await asyncio.sleep(self.pause)
            await response.write_eof()
            return response
        return await super()._route(seen)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self._request = request
        return await super()._handle(request)


@pytest.fixture
def provider() -> Iterator[SlowResults]:
    server = SlowResults(process_s=0.05)
    server._request = None
    server.start()
    yield server
    server.stop()


@pytest.fixture
def project_dir(tmp_path: Path, provider: SlowResults) -> Path:
    return write_project(tmp_path / "project", provider.url, BATCH_CONFIG)


def _answers(project_dir: Path) -> int:
    path = project_dir / "data" / "answers.jsonl"
    return path.read_text().count("}\n") if path.exists() else 0


def test_a_batch_killed_mid_download_keeps_the_cost_of_every_result_saved(
    run_cli, project_dir, provider
):
    seed_questions(project_dir, {("ownership", "moves"): [f"q{i}" for i in range(12)]})
    process = subprocess.Popen(
        [CLI, "-C", str(project_dir), "answers"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 30
    while _answers(project_dir) < 4:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    saved = _answers(project_dir)
    assert 4 <= saved < 12
    assert not (project_dir / ".overbrainer" / "history.jsonl").exists()
    # The batch is still live (not collected): it counts at what it can cost at most,
    # and its results saved are in the journal.
    paid = sum(read_spending(project_dir).by_batch.values())
    assert paid >= saved * EACH - 1e-9
    assert spent(project_dir) >= 12 * EACH

    provider.pause = 0.0
    again = run_cli("answers")
    assert again.exit_code == 0, again.stderr
    assert len(lines(project_dir, "answers.jsonl")) == 12
    assert len(provider.submitted()) == 1  # none sent twice
    assert spent(project_dir) == pytest.approx(12 * EACH)  # each result counted once
    shown = run_cli("history", "--json")
    assert shown.exit_code == 0
