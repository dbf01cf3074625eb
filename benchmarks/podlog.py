"""The cost of keeping a pod's log, on the fake Runpod of the tests.

    uv run python benchmarks/podlog.py [--runs 5] [--lines 5000]

1. A pod's delete with the drain before it (nothing new to read: the usual case once the
   results are home), against the same delete without the drain, in the same run.
2. Reading ``--lines`` lines of a pod's log stream (parsed, redacted, made into lines): the
   time from the request to the last line, against a bare ``http.client`` loop that only
   counts the events of the same stream.

Printed: the medians and their ratios.
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# benchmarks/runpod.py is named like the SDK: this directory must not shadow the package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "benchmarks"]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import median  # noqa: E402
from pydantic import SecretStr  # noqa: E402
from tests.helpers.fake_runpod import FakeRunpod, Pod  # noqa: E402

KEY = "rpa_BENCHMARKKEY0123456789abcdef"


def quiet_pod(fake: FakeRunpod, runs: Path, lines: int = 0) -> tuple[str, Path]:
    """A pod that runs nothing, with ``lines`` lines in its log, and its run directory."""
    from overbrainer_runpod import record
    from overbrainer_runpod.record import PodRecord, PodState

    pod_id = secrets.token_hex(7)
    run_id = f"bench_20260101-{pod_id}"
    pod = Pod(  # named as the target names a run's pods: `delete` checks it
        id=pod_id, name=f"overbrainer-{run_id}-1", gpu_type="NVIDIA A40", cost=0.44, env={},
        docker_args="", dir=fake.root / "pods" / pod_id, ports={}, key="rpa_POD" + pod_id,
    )  # fmt: skip
    pod.dir.mkdir(parents=True)
    fake.pods[pod_id] = pod
    feed = fake.log_feed(pod_id)
    for index in range(lines):
        feed.add(f"step {index} loss 1.234 lr 2e-4 tokens/s 5123.4 " + "x" * 40)
    run_dir = runs / run_id
    record.save(run_dir, PodRecord(run_id=run_dir.name, state=PodState.RUNNING, pod_id=pod_id))
    return pod_id, run_dir


def delete_time(fake: FakeRunpod, api: object, runs: Path, drain: bool) -> float:
    from overbrainer_runpod.pods import PodLifecycle
    from overbrainer_runpod.timing import timing

    _, run_dir = quiet_pod(fake, runs)
    life = PodLifecycle(api, run_dir, timing())  # type: ignore[arg-type]
    life.drained = not drain
    started = time.monotonic()
    life.delete("client")
    return time.monotonic() - started


def stream_time(fake: FakeRunpod, runs: Path, lines: int) -> float:
    from overbrainer_runpod.logstream import LogClient, LogQuery, snapshot

    pod_id, _ = quiet_pod(fake, runs, lines)
    done: list[float] = []
    count = 0

    def sink(batch: list, _cursor: str | None) -> None:
        nonlocal count
        count += len(batch)
        if count >= lines + 2 and not done:  # with Runpod's own two lines
            done.append(time.monotonic())

    started = time.monotonic()
    snapshot(LogClient(KEY, f"{fake.url}/v1"), pod_id, LogQuery(tail=5000), sink)
    return done[0] - started


def bare_time(fake: FakeRunpod, runs: Path, lines: int) -> float:
    pod_id, _ = quiet_pod(fake, runs, lines)
    host, port = fake.url.removeprefix("http://").split(":")
    started = time.monotonic()
    connection = http.client.HTTPConnection(host, int(port))
    connection.request(
        "GET", f"/v1/pods/{pod_id}/logs?tail=5000", headers={"Authorization": f"Bearer {KEY}"}
    )
    response = connection.getresponse()
    seen, tail = 0, b""
    while seen < min(lines + 2, 5000):
        data = tail + response.read1(65536)
        seen += data.count(b"id: ")
        tail = data[-3:]  # too short to hold the pattern: nothing is counted twice
    elapsed = time.monotonic() - started
    connection.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lines", type=int, default=4998)
    args = parser.parse_args()
    from loguru import logger

    from overbrainer_runpod.api import api_of

    logger.remove()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["RUNPOD_OVERBRAINER_TIMING"] = "minute=0.5,tick=0.2,poll=0.05,confirm=0.02"
        fake = FakeRunpod(root / "fake", KEY).start()
        api = api_of(SecretStr(KEY), fake.url, f"{fake.url}/v1")
        runs = root / "runs"
        try:
            plain, drained, read, bare = [], [], [], []
            for _ in range(args.runs):
                plain.append(delete_time(fake, api, runs, drain=False))
                drained.append(delete_time(fake, api, runs, drain=True))
                bare.append(bare_time(fake, runs, args.lines))
                read.append(stream_time(fake, runs, args.lines))
        finally:
            fake.stop()
    p, d = median(plain), median(drained)
    b, r = median(bare), median(read)
    print(f"delete without the drain: {p:.2f} s, with it: {d:.2f} s "
          f"(ratio {d / p:.2f}x; median of {args.runs})")  # fmt: skip
    print(f"{args.lines + 2} lines of a pod's log: bare read {b * 1000:.0f} ms, parsed and "
          f"redacted {r * 1000:.0f} ms (ratio {r / b:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
