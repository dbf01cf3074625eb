"""Following by events on this machine: inotify on the job directory wakes the follower
when the job ends, a snapshot is asked for or saved; metrics alone do not."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from overbrainer.job.changes import DirectoryEvents, StreamWatches
from overbrainer.job.localhost import LocalHost
from overbrainer.job.spec import JobState
from overbrainer.plugins import new_manager
from overbrainer.runs.follow import Follower

LONG = 30.0
"""A timeout no event-driven wait reaches: True before it proves an event woke it."""


def later(action, delay: float = 0.2) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def write_atomically(path: Path, text: str) -> None:
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(text)
    os.replace(temp, path)


def test_the_exit_code_wakes_a_wait(tmp_path):
    events = DirectoryEvents(str(tmp_path))
    try:
        writer = later(lambda: write_atomically(tmp_path / "exit_code", "0\n"))
        assert events.wait(LONG) is True
        writer.join()
    finally:
        events.close()


def test_metrics_lines_alone_do_not_wake_a_wait(tmp_path):
    events = DirectoryEvents(str(tmp_path))
    try:
        with (tmp_path / "metrics.jsonl").open("a") as metrics:
            metrics.write('{"event":"log","step":1}\n')
        (tmp_path / "job.log").write_text("step 1\n")
        assert events.wait(0.3) is False
    finally:
        events.close()


def test_a_snapshot_request_wakes_a_wait_and_a_change_before_the_wait_is_kept(tmp_path):
    events = DirectoryEvents(str(tmp_path))
    try:
        write_atomically(tmp_path / "snapshot.request", "requested\n")
        assert events.wait(LONG) is True  # it came before the call: the call returns at once
        assert events.wait(0.2) is False
    finally:
        events.close()


def test_a_job_that_ended_before_the_watch_began_wakes_at_once(tmp_path):
    (tmp_path / "exit_code").write_text("0\n")
    host = LocalHost(os.environ)
    try:
        assert host.wait_for_change(str(tmp_path), LONG) is True
    finally:
        host.close()


def test_a_directory_that_does_not_exist_means_polling(tmp_path):
    host = LocalHost(os.environ)
    assert host.wait_for_change(str(tmp_path / "gone"), 0.1) is None


def test_a_stream_watch_wakes_on_the_exit_and_then_asks_for_polling(tmp_path):
    """The remote kind of watch (one long-lived script), run here through sh."""
    watches = StreamWatches(LocalHost(os.environ))
    root = str(tmp_path)
    assert watches.wait(root, 0.5) is False  # nothing changed
    writer = later(lambda: write_atomically(tmp_path / "exit_code", "0\n"))
    assert watches.wait(root, LONG) is True
    writer.join()
    # The script ended with the job: later waits poll (None) instead of blocking.
    deadline = time.monotonic() + LONG
    while (answer := watches.wait(root, 0.1)) is not None:
        assert answer is False
        assert time.monotonic() < deadline
    assert answer is None


def test_the_follower_ends_on_the_exit_without_sleeping_a_poll_interval(bench):
    """A running job that ends on its own: the follower waits on events and never sleeps
    its (here enormous) poll interval, yet reads the last lines and the exit code."""
    run = bench.new_run()
    run = bench.launch(
        run,
        "while [ ! -f go ]; do sleep 0.05; done; "
        'printf \'{"event":"end","step":1}\\n\' >> metrics.jsonl; exit 4',
    )
    bench.wait(run, until=lambda poll: poll.status.state is JobState.RUNNING)
    slept: list[float] = []
    follower = Follower(
        new_manager().hook,
        bench.executor,
        run,
        on_event=lambda event: None,
        poll_s=3600,
        sleep=slept.append,
    )
    later((Path(run.remote_dir) / "go").touch, 0.3)
    seen = follower.follow()
    assert seen.status.exit_code == 4
    assert [event["event"] for event in seen.events][-1] == "end"
    assert slept == []
    bench.executor.close()
