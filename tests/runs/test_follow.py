"""The follower through a real plugin manager, with a scripted target plugin: retries and
detaching, draining the last lines, malformed lines, and the snapshot limits."""

from __future__ import annotations

import json

import pytest

from overbrainer import hookimpl
from overbrainer.job.interface import Executor
from overbrainer.job.record import RunRecord
from overbrainer.job.spec import CANCELLED, RUNNING, JobPoll, JobStatus
from overbrainer.plugins import new_manager
from overbrainer.runs.follow import Follower, FollowLost, StopLimits


class Scripted:
    """A target plugin whose polls follow a script: a JobPoll, or an exception to raise."""

    def __init__(self, polls: list) -> None:
        self.polls = polls
        self.cancels = 0

    @hookimpl
    def poll_job(self, executor, run):
        step = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        if isinstance(step, Exception):
            raise step
        return step

    @hookimpl
    def cancel_job(self, executor, run):
        self.cancels += 1
        self.polls = [JobPoll(CANCELLED)]
        return CANCELLED


class Unanswered(Executor):
    """An executor only the scripted plugin's own hooks answer for: its methods are never
    reached (the core's dispatcher answers after that plugin)."""

    def _never(self, *args: object) -> None:
        raise AssertionError("the scripted plugin answers, not the executor's method")

    describe = claim = launch = poll = request_snapshot = cancel = collect = read_log = _never


RUN = RunRecord(
    id="demo_20260101-000000", target="box", created="x", remote_dir="/r", snapshots=True
)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def follower(plugin: Scripted, **options) -> tuple[Follower, list[dict]]:
    plugins = new_manager()
    plugins.register(plugin, name="scripted")
    events: list[dict] = []
    clock = Clock()
    follower = Follower(
        plugins.hook,
        executor=Unanswered(),
        run=options.pop("run", RUN),
        on_event=events.append,
        clock=clock,
        sleep=clock.sleep,
        **options,
    )
    return follower, events


def line(**event) -> str:
    return json.dumps(event)


def test_five_failures_are_retried_and_the_sixth_detaches(capsys):
    from overbrainer.logs import configure_logging

    configure_logging()
    plugin = Scripted([OSError("connection reset")])
    with pytest.raises(FollowLost) as raised:
        follower(plugin)[0].follow()
    err = capsys.readouterr().err
    assert [
        f"warning: cannot reach the job ({k}/5): connection reset" for k in range(1, 6)
    ] == err.splitlines()
    assert str(raised.value) == (
        f"cannot reach the job of run {RUN.id}: connection reset; follow it again with "
        f"`overbrainer train attach {RUN.id}`"
    )


def test_a_success_after_failures_resets_the_count():
    polls = [OSError("down")] * 4 + [JobPoll(RUNNING)] + [OSError("down")] * 4
    polls += [
        JobPoll(JobStatus.exited(0), (line(event="end", step=3),)),
        JobPoll(JobStatus.exited(0)),
    ]
    seen = follower(Scripted(polls))[0].follow()
    assert seen.status == JobStatus.exited(0)
    assert seen.plugin_lines == 1


def test_lines_written_after_the_exit_are_drained_and_malformed_ones_counted():
    polls = [
        JobPoll(RUNNING, (line(event="begin", max_steps=2), "not json")),
        JobPoll(JobStatus.exited(0), (line(event="log", step=1, loss=1.0),)),
        JobPoll(JobStatus.exited(0), (line(event="end", step=2),)),
        JobPoll(JobStatus.exited(0)),
    ]
    plugin = Scripted(polls)
    seen, events = None, None
    f, events = follower(plugin)
    seen = f.follow()
    assert [e["event"] for e in events] == ["begin", "log", "end"]
    assert seen.malformed == 1 and seen.plugin_lines == 3


def test_a_snapshot_never_given_is_cancelled_at_the_limit():
    plugin = Scripted([JobPoll(RUNNING, snapshot_request="requested")])
    f, _ = follower(plugin, limits=StopLimits(proof_s=10, end_s=5), poll_s=2)
    seen = f.follow()
    assert plugin.cancels == 1
    assert seen.status == CANCELLED


def test_a_job_never_asked_for_a_snapshot_is_never_cancelled():
    polls = [JobPoll(RUNNING)] * 50 + [JobPoll(JobStatus.exited(0)), JobPoll(JobStatus.exited(0))]
    plugin = Scripted(polls)
    f, _ = follower(plugin, limits=StopLimits(proof_s=1, end_s=1))
    f.follow()
    assert plugin.cancels == 0


def test_a_run_that_cannot_snapshot_is_not_held_to_the_limits():
    plugin = Scripted([JobPoll(RUNNING, snapshot_request="requested")] * 20 + [JobPoll(CANCELLED)])
    f, _ = follower(plugin, run=RUN.evolve(snapshots=False), limits=StopLimits(proof_s=1, end_s=1))
    f.follow()
    assert plugin.cancels == 0


def test_a_snapshot_given_but_no_end_is_cancelled_after_the_end_limit():
    plugin = Scripted(
        [JobPoll(RUNNING, snapshot='{"checkpoint": "output/checkpoint-2", "step": 2}')]
    )
    f, _ = follower(plugin, limits=StopLimits(proof_s=100, end_s=6), poll_s=2)
    seen = f.follow()
    assert plugin.cancels == 1
    assert seen.snapshot is not None
