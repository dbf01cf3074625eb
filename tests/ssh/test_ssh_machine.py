"""The machine's gauges over a real sshd: the poll brings the runner's latest sample with
the job's status, and the follower hands each new one on, once."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.following import WAIT_FOR_GO, running, touch_later

from overbrainer.plugins import new_manager
from overbrainer.runs.follow import Follower


def test_the_follower_gets_each_new_machine_sample_over_ssh(bench):
    run = bench.launch(bench.new_run(), WAIT_FOR_GO)
    bench.wait(run, until=running)
    sample = '{"format": 1, "time": 1000.5, "gpus": []}'
    (Path(run.remote_dir) / "machine.json").write_text(sample)
    assert bench.executor.poll(run).machine == sample
    got: list[str] = []
    follower = Follower(
        new_manager().hook,
        bench.executor,
        run,
        on_event=lambda event: None,
        poll_s=0.05,
        on_machine=got.append,
    )
    toucher = touch_later(Path(run.remote_dir) / "go")
    seen = follower.follow()
    toucher.join()
    assert seen.status.exit_code == 5
    assert got == [sample]  # every poll brought it: handed on once
