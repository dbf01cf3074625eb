"""How a run that ended is recorded when its files cannot all come home: a field of the
record says so, not the words of its message."""

from __future__ import annotations

from pathlib import Path

from overbrainer.hookcalls import Hooks
from overbrainer.plugin import (
    LOST,
    Executor,
    JobHandle,
    JobPoll,
    JobState,
    JobStatus,
    LogChunk,
    RunRecord,
    RunState,
    TargetInfo,
    UserError,
)
from overbrainer.plugins import new_manager
from overbrainer.runs.follow import Followed
from overbrainer.runs.outcome import settle
from overbrainer.runs.store import RunStore


class GoneMachine(Executor):
    """A target whose machine went away with the job: nothing can be brought home."""

    def describe(self) -> TargetInfo:
        return TargetInfo(device="cpu", local_paths=False)

    def claim(self, run_id: str) -> str:
        return f"/gone/{run_id}"

    def launch(self, run, job) -> JobHandle:
        raise NotImplementedError

    def poll(self, run) -> JobPoll:
        return JobPoll(LOST)

    def request_snapshot(self, run, reason) -> None:
        raise NotImplementedError

    def cancel(self, run) -> JobStatus:
        return LOST

    def collect(self, run, artifacts, dest: Path) -> list[str]:
        raise UserError("the machine is gone")

    def read_log(self, run, offset) -> LogChunk:
        return LogChunk(b"", offset)


def _ended(tmp_path: Path, status: JobStatus, message: str | None = None) -> RunRecord:
    store = RunStore(tmp_path)
    run = store.create("Demo", "t", lambda run_id: f"/gone/{run_id}")
    running = run.evolve(state=RunState.RUNNING, job=JobHandle(dir=run.remote_dir))
    store.save(running)
    return settle(Hooks(new_manager()), GoneMachine(), store, running, Followed(status=status))


def test_a_failed_run_whose_files_stay_on_the_machine_says_so_in_a_field(tmp_path):
    record = _ended(tmp_path, JobStatus.exited(3))
    assert record.state is RunState.FAILED and record.artifacts_missing
    assert record.message == (
        f"the job exited with code 3 (see runs/{record.id}/job.log) "
        "(artifacts not retrieved: the machine is gone)"
    )
    assert RunStore(tmp_path).load(record.id).artifacts_missing


def test_a_cancelled_run_whose_files_stay_on_the_machine_says_so_too(tmp_path):
    record = _ended(tmp_path, JobStatus(JobState.CANCELLED))
    assert record.state is RunState.CANCELLED and record.artifacts_missing


class BackMachine(GoneMachine):
    """The machine answers again (a later ``train attach``): its files come home."""

    def collect(self, run, artifacts, dest: Path) -> list[str]:
        return []


def test_settling_again_with_the_files_home_clears_it(tmp_path):
    store = RunStore(tmp_path)
    missing = _ended(tmp_path, JobStatus.exited(3))
    seen = Followed(JobStatus.exited(3))
    again = settle(Hooks(new_manager()), BackMachine(), store, missing, seen)
    assert again.state is RunState.FAILED and not again.artifacts_missing
    assert "artifacts_missing" not in (tmp_path / "runs" / again.id / "run.json").read_text()
