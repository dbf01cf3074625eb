"""``answers`` in batch against ``answers`` online, in the same run: cost and wall time.

    uv run python benchmarks/batch.py [--answers 2000] [--latency 0.1] [--concurrency 64]
                                      [--process-s 0] [--poll 0.2] [--repeat 3]

The loopback provider (``tests/helpers/fake_batch.py``, in its own process) answers online at
``--latency`` a reply, and ends a batch ``--process-s`` after it was made (0: at once, so
that what is measured is overbrainer's own work: building and uploading the file, the
polls, downloading and writing the results). For each repeat, a fresh project with N
questions is answered by the real CLI in this process online, then another in batch.
Printed: each run's wall time, CPU and cost (from ``.overbrainer/history.jsonl``), and the
batch run as a ratio of the online one (cost goal: the provider's ``batch_discount``, 0.50).

A real provider's batch ends within its completion window (minutes to 24 h): the wall time
in batch is then the provider's, and what this benchmark shows is that overbrainer adds
little to it and spends less CPU than the online run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness
sys.path.insert(0, str(ROOT / "benchmarks"))

from answers import project  # noqa: E402
from benchmarks._harness import median_of_ratios, stopwatch  # noqa: E402

from overbrainer.cli import cli  # noqa: E402


def answer(directory: Path, *args: str) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and cost (USD) of ``overbrainer answers ARGS``."""
    with stopwatch() as watch:
        cli.main(["-C", str(directory), "answers", *args], prog_name="overbrainer",
                 standalone_mode=False)
    lines = (directory / "data" / "answers.jsonl").read_text().splitlines()
    assert len(lines) == len((directory / "data" / "questions.jsonl").read_text().splitlines())
    history = (directory / ".overbrainer" / "history.jsonl").read_text().splitlines()
    entry = json.loads(history[-1])
    assert entry["status"] == "ok", entry
    return watch.wall, watch.cpu, float(entry["cost"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--process-s", type=float, default=0.0)
    parser.add_argument("--poll", type=float, default=0.2, help="batch_poll_s")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.update(OVERBRAINER_LOAD_PLUGINS="", OVERBRAINER_LOG="WARNING", NO_COLOR="1",
                      OVERBRAINER_PIPELINE__BATCH_POLL_S=str(args.poll))
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.fake_batch", "--latency", str(args.latency),
         "--process-s", str(args.process_s)],
        cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    rows: list[tuple[float, float, float, float, float, float]] = []
    try:
        url = server.stdout.readline().strip() if server.stdout else ""
        with tempfile.TemporaryDirectory() as temp:
            root = Path(temp)
            answer(project(root / "warm", url, 8, 16))  # imports, first connections
            print(f"{args.answers} answers, concurrency {args.concurrency}, "
                  f"{args.latency * 1000:.0f} ms a request, batch ends {args.process_s} s "
                  f"after it is made, polled every {args.poll} s")
            print(f"{'run':>3}  {'online s':>8}  {'batch s':>7}  {'wall x':>6}  "
                  f"{'online CPU':>10}  {'batch CPU':>9}  {'online $':>9}  {'batch $':>9}  "
                  f"{'cost x':>6}")
            for number in range(1, args.repeat + 1):
                online = answer(project(root / f"online{number}", url, args.concurrency,
                                        args.answers), "--no-batch")
                batch = answer(project(root / f"batch{number}", url, args.concurrency,
                                       args.answers), "--batch")
                rows.append((*online, *batch))
                print(f"{number:>3}  {online[0]:>8.2f}  {batch[0]:>7.2f}  "
                      f"{batch[0] / online[0]:>6.2f}  {online[1]:>9.2f}s  {batch[1]:>8.2f}s  "
                      f"{online[2]:>9.4f}  {batch[2]:>9.4f}  {batch[2] / online[2]:>6.2f}",
                      flush=True)
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(10)
    wall = median_of_ratios((r[3] for r in rows), (r[0] for r in rows))
    cpu = median_of_ratios((r[4] for r in rows), (r[1] for r in rows))
    cost = median_of_ratios((r[5] for r in rows), (r[2] for r in rows))
    print(f"median batch / online: wall {wall:.2f}x, CPU {cpu:.2f}x, cost {cost:.2f}x "
          "(goal: the batch_discount, 0.50x)")


if __name__ == "__main__":
    main()
