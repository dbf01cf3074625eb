"""The conformance suite drives a plugin written as raw, guarded hooks as well as one
whose hooks are the core's dispatcher calling ``Executor`` methods: a plugin's own hook
answers before the dispatcher, so both styles stay the contract."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from overbrainer.plugin import (
    ArtifactSpec,
    Executor,
    JobHandle,
    JobPoll,
    JobSpec,
    JobStatus,
    LogChunk,
    Project,
    RunRecord,
    RunState,
    TargetInfo,
    hookimpl,
)
from overbrainer.plugin.host import HostExecutor, HostTarget, LocalHost
from overbrainer.testing import (
    ContractTarget,
    ExecutorContract,
    job_signaller,
    make_fake_venv,
    runner_signaller,
)


class RawTarget(HostTarget):
    kind: Literal["raw"]
    workdir: str


@dataclass
class RawExecutor(Executor):
    """An ``Executor`` whose own methods are never reached: this module's hooks answer for
    it first, and it declares no optional operation, so the core's dispatcher (answering
    last) calls none of them."""

    inner: HostExecutor

    def _never(self, *args: object) -> None:
        raise AssertionError("the raw hooks answer, not the dispatcher")

    describe = claim = launch = poll = request_snapshot = cancel = collect = read_log = _never


def _mine(executor: object) -> HostExecutor | None:
    return executor.inner if isinstance(executor, RawExecutor) else None


@hookimpl
def register_targets(register: Callable[[str, type[BaseModel]], None]) -> None:
    register("raw", RawTarget)


@hookimpl
def create_executor(
    name: str, target: BaseModel, project: Project, run: RunRecord | None
) -> RawExecutor | None:
    if not isinstance(target, RawTarget):
        return None
    env = dict(os.environ)
    runtime = target.host_runtime()
    return RawExecutor(HostExecutor(name, runtime, LocalHost(env), target.workdir, env=env))


@hookimpl
def describe_target(executor: object) -> TargetInfo | None:
    return mine.describe() if (mine := _mine(executor)) else None


@hookimpl
def prepare_target(executor: object) -> None:
    if mine := _mine(executor):
        mine.prepare()


@hookimpl
def claim_run_dir(executor: object, run_id: str) -> str | None:
    return mine.claim(run_id) if (mine := _mine(executor)) else None


@hookimpl
def launch_job(executor: object, run: RunRecord, job: JobSpec) -> JobHandle | None:
    return mine.launch(run, job) if (mine := _mine(executor)) else None


@hookimpl
def poll_job(executor: object, run: RunRecord) -> JobPoll | None:
    return mine.poll(run) if (mine := _mine(executor)) else None


@hookimpl
def request_snapshot(executor: object, run: RunRecord, reason: str) -> bool | None:
    if not (mine := _mine(executor)):
        return None
    mine.request_snapshot(run, reason)
    return True


@hookimpl
def cancel_job(executor: object, run: RunRecord) -> JobStatus | None:
    return mine.cancel(run) if (mine := _mine(executor)) else None


@hookimpl
def collect_artifacts(
    executor: object, run: RunRecord, artifacts: ArtifactSpec, dest: Path
) -> list[str] | None:
    return mine.collect(run, artifacts, dest) if (mine := _mine(executor)) else None


@hookimpl
def read_job_log(executor: object, run: RunRecord, offset: int) -> LogChunk | None:
    return mine.read_log(run, offset) if (mine := _mine(executor)) else None


@hookimpl
def release_executor(executor: object, run: RunRecord | None, outcome: RunState | None) -> None:
    if mine := _mine(executor):
        mine.close()


class TestRawHookExecutor(ExecutorContract):
    @pytest.fixture
    def contract_target(self, tmp_path: Path) -> ContractTarget:
        venv = make_fake_venv(tmp_path / "venv")
        return ContractTarget(
            plugin=sys.modules[__name__],
            table={"kind": "raw", "venv": str(venv), "workdir": str(tmp_path / "work")},
            job_dir=lambda run: Path(run.remote_dir),
            signal_runner=runner_signaller,
            signal_job=job_signaller,
        )
