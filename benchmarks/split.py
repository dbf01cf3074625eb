"""``overbrainer split`` on a large answers file against a naive stdlib-json script.

    uv run python benchmarks/split.py [--answers 100000] [--words 60] [-n 3]

A project with N generated answers (about 64 MiB at the defaults) is split by the real
console script, and by a naive script doing the same work with the standard library (read
every record, keep the latest of each id, rank by the seeded hash, write train and eval).
Both run in fresh processes, interleaved, after one unmeasured run of ``split`` that writes
the bytecode caches (``PYTHONDONTWRITEBYTECODE`` is dropped: an installed package has them);
printed: the median CPU seconds of each, the ratio
(goal: 0.5 or less), and the peak RSS of `split` against the size of answers.jsonl (goal:
2x or less).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._harness import column_medians  # noqa: E402
from tests.helpers.answers_data import write_dataset  # noqa: E402

NAIVE = r"""
import json, sys
from collections import defaultdict
from pathlib import Path
import xxhash
data = Path(sys.argv[1]) / "data"
questions = {
    json.loads(line)["id"] for line in open(data / "questions.jsonl", encoding="utf-8")
}
latest = {}
for line in open(data / "answers.jsonl", encoding="utf-8"):
    if line.strip():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        latest[record["id"]] = record
groups = defaultdict(list)
for record in latest.values():
    if record["id"] in questions and record["meta"]["excluded"] is None:
        groups[(record["topic"], record["subtopic"])].append(record)
key = lambda r: (xxhash.xxh3_64_intdigest(r["id"].encode(), seed=42), r["id"])
train, evaluation = [], []
for name in sorted(groups):
    ranked = sorted(groups[name], key=key)
    share = round(len(ranked) * 0.1)
    evaluation += ranked[:share]
    train += ranked[share:]
for name, records in (("train.naive", train), ("eval.naive", evaluation)):
    with open(data / name, "w", encoding="utf-8") as out:
        for record in sorted(records, key=key):
            out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
"""

MEASURE = r"""
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, done.returncode)
"""


ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Installed packages have their bytecode compiled (pip does it): the first, unmeasured,
run writes it here, as ``startup.py`` does."""


def measure(argv: list[str]) -> tuple[float, float]:
    """CPU seconds and peak RSS (MiB) of ``argv`` alone (a fresh parent, so ru_maxrss is
    the child's)."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, check=True,
        env=ENV,
    ).stdout.split()
    if out[2] != "0":
        raise SystemExit(f"{argv[0]} failed")
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--words", type=int, default=40)
    parser.add_argument("-n", type=int, default=3)
    args = parser.parse_args()
    overbrainer = shutil.which("overbrainer") or "overbrainer"
    with tempfile.TemporaryDirectory() as work:
        project = Path(work) / "project"
        write_dataset(project, args.answers, odd=False, words=args.words)
        size = (project / "data" / "answers.jsonl").stat().st_size / (1 << 20)
        print(f"split of {args.answers} answers ({size:.0f} MiB), {args.n} runs each, medians")
        split_runs, naive_runs = [], []
        env_note = os.environ.get("OVERBRAINER_LOG", "")
        measure([overbrainer, "-C", str(project), "split"])  # warm-up: bytecode, page cache
        for _ in range(args.n):
            split_runs.append(measure([overbrainer, "-C", str(project), "split"]))
            naive_runs.append(measure([sys.executable, "-c", NAIVE, str(project)]))
        cpu, rss = column_medians(split_runs)
        naive_cpu, naive_rss = column_medians(naive_runs)
        print(f"  overbrainer split: {cpu:.2f} s CPU, peak RSS {rss:.0f} MiB")
        print(f"  naive stdlib-json script: {naive_cpu:.2f} s CPU, peak RSS {naive_rss:.0f} MiB")
        print(f"  CPU ratio split / naive: {cpu / naive_cpu:.2f} (goal <= 0.5)")
        print(f"  peak RSS / input: {rss / size:.2f} (goal <= 2){env_note}")


if __name__ == "__main__":
    main()
