"""A local host executor with its own work directory, so runs go through upload and
verified download exactly as on a remote host."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.helpers.jobs import write_job

from overbrainer.plugin import JobPoll, JobSpec, JobState, RunRecord
from overbrainer.plugin.host import HostExecutor, LocalHost
from overbrainer_local import LocalTarget


@dataclass
class Bench:
    executor: HostExecutor
    tmp: Path

    def new_run(self, run_id: str = "demo_20260101-000000") -> RunRecord:
        remote = self.executor.claim(run_id)
        assert remote
        local = self.tmp / "runs" / run_id
        local.mkdir(parents=True, exist_ok=True)
        return RunRecord(id=run_id, target="box", created="2026-01-01T00:00:00Z", remote_dir=remote)

    def launch(
        self, run: RunRecord, script: str | dict[str, str], env: dict[str, str] | None = None
    ) -> RunRecord:
        local = self.tmp / "runs" / run.id
        write_job(local, script, env)
        handle = self.executor.launch(run, JobSpec(run_id=run.id, local_dir=local))
        return run.evolve(job=handle, state="running", snapshots=True)

    def wait(
        self, run: RunRecord, until: Callable[[JobPoll], bool] | None = None, timeout: float = 20
    ) -> tuple[JobPoll, list[str]]:
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            poll = self.executor.poll(run)
            lines += poll.lines
            done = until(poll) if until else poll.status.state is not JobState.RUNNING
            if done:
                return poll, lines
            assert time.monotonic() < deadline, f"timed out; last status {poll.status}"
            time.sleep(0.05)


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    work = tmp_path / "work"
    target = LocalTarget(kind="local", workdir=str(work))
    executor = HostExecutor(
        "box", target.host_runtime(), LocalHost(os.environ), str(work), env=os.environ
    )
    bench = Bench(executor, tmp_path)
    yield bench
    # Whatever a test left running is stopped by its process group.
    for pid_file in work.glob("*/job.pid"):
        pid = int(pid_file.read_text())
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, 9)
