"""Job exit to the end of following, over SSH: by events (one watch channel) and by polling.

    uv run python benchmarks/follow_ssh.py [--job-seconds 30] [--repeat 3]

A real sshd on 127.0.0.1 (the tests' fixture), a job that runs ``--job-seconds`` then
exits, followed by the core's ``Follower`` through ``SshHost``: once with the transport's
``wait_for_change`` (a long-lived channel watching the job directory), once with it off
(the poll interval alone, as before). Printed for each: the median time from the job
writing ``exit_code`` to ``follow()`` returning (goal: 1 s or less), and the SSH round trips
(scripts run, channels opened) a minute of following and a follow, events against polling
(goal: no more). Events end the follow sooner, so a minute's rate counts their fixed cost
(the watch channel) over a shorter time: compare the counts a follow too.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import median  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job-seconds", type=float, default=30.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        os.environ["HOME"] = str(root / "client-home")
        os.environ.pop("SSH_AUTH_SOCK", None)
        (root / "client-home").mkdir()
        from tests.helpers.sshd import Sshd, make_keys, write_client_config

        (root / "keys").mkdir()
        server = Sshd(root / "sshd", make_keys(root / "keys"))
        server.start()
        try:
            alias = write_client_config(root / "client-home", server)
            results = {
                "events": [measure(alias, root, args.job_seconds, events=True, n=n)
                           for n in range(args.repeat)],
                "polling": [measure(alias, root, args.job_seconds, events=False, n=n)
                            for n in range(args.repeat)],
            }
        finally:
            server.stop()
    from overbrainer.runs.follow import POLL_S

    print(f"SSH follow of a {args.job_seconds:g} s job, {args.repeat} runs each, medians; "
          f"poll interval {POLL_S:g} s")
    lag = {k: median(r[0] for r in v) for k, v in results.items()}
    trips = {k: median(r[1] for r in v) for k, v in results.items()}
    total = {k: median(r[2] for r in v) for k, v in results.items()}
    for name in results:
        print(f"  {name:<8} exit_code -> followed: {lag[name]:.2f} s; "
              f"{trips[name]:.1f} round trips a minute, {total[name]:.0f} a follow")
    print(f"  events / polling: latency {lag['events'] / lag['polling']:.2f}, "
          f"round trips a minute {trips['events'] / trips['polling']:.2f} (goal <= 1.00); "
          f"latency goal <= 1 s: {lag['events']:.2f} s")


def measure(
    alias: str, root: Path, seconds: float, events: bool, n: int
) -> tuple[float, float, int]:
    from tests.helpers.jobs import write_job

    from overbrainer.job.executor import HostExecutor
    from overbrainer.job.record import RunRecord
    from overbrainer.job.spec import JobSpec
    from overbrainer.plugins import new_manager
    from overbrainer.runs.follow import Follower
    from overbrainer_ssh import SshTarget
    from overbrainer_ssh.host import SshHost

    target = SshTarget(kind="ssh", host=alias)
    host = SshHost("box", alias)
    calls = {"n": 0}
    for name in ("run", "stream_out", "stream_in"):
        original = getattr(host, name)

        def counted(*a, _original=original, **k):  # type: ignore[no-untyped-def]
            calls["n"] += 1
            return _original(*a, **k)

        setattr(host, name, counted)
    if not events:
        host.wait_for_change = lambda root, timeout: None  # type: ignore[method-assign]
    executor = HostExecutor("box", target, host, target.workdir)
    host.connect()
    run_id = f"bench_20260101-0000{n:02d}{'e' if events else 'p'}"
    remote = executor.claim(run_id)
    local = root / "runs" / run_id
    # Not a whole number of poll intervals: polling's wait for the exit is then typical.
    write_job(local, f"sleep {seconds + 0.7 * (n + 1)}; exit 0")
    run = RunRecord(id=run_id, target="box", created="2026-01-01T00:00:00Z", remote_dir=remote)
    handle = executor.launch(run, JobSpec(run_id=run_id, local_dir=local))
    run = run.evolve(job=handle, state="running", snapshots=True)
    calls["n"] = 0
    began = time.monotonic()
    follower = Follower(new_manager().hook, executor, run, on_event=lambda event: None)
    follower.follow()
    ended_wall = time.time()
    followed = time.monotonic() - began
    exit_code = Path(remote) / "exit_code"  # the sshd serves this machine
    lag = ended_wall - exit_code.stat().st_mtime
    trips = calls["n"] / followed * 60
    executor.close()
    return lag, trips, calls["n"]


if __name__ == "__main__":
    main()
