"""Following by events over a real sshd: one long-lived channel tells the follower when the
job ends; when it drops, the follower polls again."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.following import WAIT_FOR_GO, running, touch_later

from overbrainer.plugins import new_manager
from overbrainer.runs.follow import Follower


def test_the_follower_ends_on_the_exit_without_sleeping_a_poll_interval(bench):
    run = bench.launch(bench.new_run(), WAIT_FOR_GO)
    bench.wait(run, until=running)
    slept: list[float] = []
    follower = Follower(
        new_manager().hook,
        bench.executor,
        run,
        on_event=lambda event: None,
        poll_s=3600,
        sleep=slept.append,
    )
    toucher = touch_later(Path(run.remote_dir) / "go")
    seen = follower.follow()
    toucher.join()
    assert seen.status.exit_code == 5
    assert [event["event"] for event in seen.events][-1] == "end"
    assert slept == []


def test_a_dropped_channel_wakes_the_follower_then_it_polls(bench):
    run = bench.launch(bench.new_run(), WAIT_FOR_GO)
    bench.wait(run, until=running)
    host = bench.executor.host
    assert host.wait_for_change(run.remote_dir, 1.0) is False  # the stream is up, no change
    host.close()  # the connection drops under the stream
    assert host.wait_for_change(run.remote_dir, 30) is True  # woken to poll at once
    assert host.wait_for_change(run.remote_dir, 0.1) is None  # then: polling
    (Path(run.remote_dir) / "go").touch()
    poll, _ = bench.wait(run)
    assert poll.status.exit_code == 5
