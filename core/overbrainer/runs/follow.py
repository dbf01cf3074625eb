"""Following a job: polling, publishing its metrics, and the snapshot time limits."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loguru import logger

from overbrainer.errors import UserError
from overbrainer.hookcalls import Hooks
from overbrainer.job.interface import Executor
from overbrainer.job.metrics import parse_event
from overbrainer.job.record import RunRecord
from overbrainer.job.spec import JobState, JobStatus
from overbrainer.runs.interrupt import deferred_sigint

POLL_S = 2.0
FINAL_POLL_S = 0.5
"""The poll interval once training ended: only saving (and merging) is left, so the end
of the job is near and worth noticing sooner."""
MAX_FAILURES = 5
PLUGIN_EVENTS = frozenset({"begin", "log", "eval", "end"})


@dataclass(frozen=True)
class StopLimits:
    """How long a snapshot may take once asked for, and a job may live once it saved one."""

    proof_s: float = 30 * 60
    end_s: float = 10 * 60


STOP_LIMITS = StopLimits()


class FollowLost(UserError):
    """Following gave up after repeated failures to reach the job, which may still be
    running (``DetachedRun`` is the other way to stop following: Ctrl-C, asked for)."""


@dataclass
class Followed:
    """What following a job saw, up to the end of its output."""

    status: JobStatus
    snapshot: str | None = None
    plugin_lines: int = 0
    malformed: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Follower:
    """Follows the job of ``run`` through ``hook`` (the plugin manager's hook relay).

    ``asked_at`` is when a snapshot was asked for (``train stop``); with
    ``watch_requests`` a request written by anyone else starts the same clock. Runs whose
    job cannot save a snapshot are never held to the limits. ``stop_when`` is asked at each
    poll of a running job: the first reason it gives asks the job for a snapshot (and starts
    the clock), as ``train stop`` would. ``on_machine`` gets the text of each new sample of
    the machine's gauges a poll brings (``JobPoll.machine``).
    """

    hook: Hooks
    executor: Executor
    run: RunRecord
    on_event: Callable[[dict[str, Any]], None]
    limits: StopLimits = STOP_LIMITS
    watch_requests: bool = True
    asked_at: float | None = None
    poll_s: float = POLL_S
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    stop_when: Callable[[], str | None] | None = None
    on_machine: Callable[[str], None] | None = None
    _machine: str | None = None
    _proof_at: float | None = None
    _ending: bool = False
    _cancelled_by_limit: bool = False

    def follow(self) -> Followed:
        """Poll until the job ends and its last metrics are read."""
        seen = Followed(status=JobStatus(JobState.RUNNING))
        failures = 0
        draining = False
        while True:
            try:
                poll = self.hook.poll_job(executor=self.executor, run=self.run)
            except Exception as error:  # noqa: BLE001 - any transport failure is retried
                failures += 1
                if failures > MAX_FAILURES:
                    raise FollowLost(
                        f"cannot reach the job of run {self.run.id}: {error}; follow it again "
                        f"with `overbrainer train attach {self.run.id}`"
                    ) from None
                logger.warning(f"cannot reach the job ({failures}/{MAX_FAILURES}): {error}")
                self.sleep(self.poll_s)
                continue
            failures = 0
            if poll is None:
                raise UserError(f"no plugin can follow the job of run {self.run.id}")
            for line in poll.lines:
                self._publish(line, seen)
            self._machine_sample(poll.machine)
            seen.status = poll.status
            if poll.snapshot is not None:
                seen.snapshot = poll.snapshot
            if poll.status.state is not JobState.RUNNING:
                if draining and not poll.lines:
                    return seen
                draining = True
                continue  # read again at once until nothing new comes
            self._stop_if_asked(poll.snapshot)
            self._watch_snapshot(poll.snapshot_request, poll.snapshot)
            self._wait(min(self.poll_s, FINAL_POLL_S) if self._ending else self.poll_s)

    def _wait(self, seconds: float) -> None:
        """Until the job changes state, when its executor can tell (``wait_for_job``);
        else the poll interval."""
        waited = None
        try:
            waited = self.hook.wait_for_job(executor=self.executor, run=self.run, timeout=seconds)
        except Exception as error:  # noqa: BLE001 - a failed wait only means polling
            logger.debug(f"cannot wait for the job's events: {error}")
        if waited is None:
            self.sleep(seconds)

    def _machine_sample(self, text: str | None) -> None:
        if text is None or text == self._machine or self.on_machine is None:
            return
        self._machine = text
        self.on_machine(text)

    def _publish(self, line: str, seen: Followed) -> None:
        event = parse_event(line)
        if event is None:
            seen.malformed += 1
            logger.warning(f"ignoring a malformed metrics line ({seen.malformed} so far)")
            return
        if event["event"] in PLUGIN_EVENTS:
            seen.plugin_lines += 1
        if event["event"] == "end":
            self._ending = True
        seen.events.append(event)
        self.on_event(event)

    def _stop_if_asked(self, snapshot: str | None) -> None:
        if self.stop_when is None or self.asked_at is not None or snapshot is not None:
            return
        if not self.run.snapshots:
            return
        reason = self.stop_when()
        if reason is None:
            return
        self.hook.request_snapshot(executor=self.executor, run=self.run, reason="requested")
        self.asked_at = self.clock()
        logger.info(f"{reason}: run {self.run.id} saves a snapshot at the end of its step")

    def _watch_snapshot(self, request: str | None, snapshot: str | None) -> None:
        if not self.run.snapshots:
            return
        now = self.clock()
        if request is not None and self.asked_at is None and self.watch_requests:
            self.asked_at = now
        if snapshot is not None and self._proof_at is None:
            self._proof_at = now
        if self._cancelled_by_limit:
            return
        if self._proof_at is None and self.asked_at is not None:
            if now - self.asked_at >= self.limits.proof_s:
                self._cancel(
                    f"no snapshot {_minutes(self.limits.proof_s)} after it was asked for: "
                    "the job was cancelled"
                )
        elif self._proof_at is not None and now - self._proof_at >= self.limits.end_s:
            self._cancel("the job saved its snapshot but did not end: it was cancelled")

    def _cancel(self, warning: str) -> None:
        with deferred_sigint():
            self.hook.cancel_job(executor=self.executor, run=self.run)
        self._cancelled_by_limit = True
        logger.warning(warning)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
