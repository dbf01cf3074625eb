"""Throughput of the ``answers`` stage against the loopback provider at 100 ms a reply.

    uv run python benchmarks/answers.py [--answers 1000] [--latency 0.1] [--concurrency 8 64 256]

The provider runs in its own process, so it shares neither the CLI's event loop nor its CPU
accounting. For each concurrency, a fresh project with N questions is answered by the real
CLI in this process; printed: requests per second, the ratio to the ideal (concurrency /
latency), and the CPU time per request of the CLI and of the provider.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from overbrainer.cli import cli  # noqa: E402
from overbrainer.pipeline.ids import question_id, subtopic_id  # noqa: E402
from pipeline_data import PIPELINE_CONFIG, write_project  # noqa: E402


def project(root: Path, url: str, concurrency: int, answers: int) -> Path:
    config = PIPELINE_CONFIG.replace("concurrency = 4", f"concurrency = {concurrency}")
    directory = write_project(root / f"c{concurrency}-{answers}", url, config)
    sid = subtopic_id("ownership", "moves")
    data = directory / "data"
    data.mkdir()
    (data / "subtopics.jsonl").write_text(
        json.dumps({"id": sid, "topic": "ownership", "name": "moves"}) + "\n"
    )
    with (data / "questions.jsonl").open("w") as file:
        for n in range(answers):
            text = f"Question {n}: why does a move of value {n} invalidate its source?"
            record = {"id": question_id(sid, text), "topic": "ownership", "subtopic_id": sid,
                      "subtopic": "moves", "text": text}
            file.write(json.dumps(record) + "\n")
    return directory


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def answer(directory: Path) -> tuple[float, float]:
    """Wall and CPU seconds of ``overbrainer answers`` on ``directory``."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        cli.main(["-C", str(directory), "answers"], prog_name="overbrainer", standalone_mode=False)
    finally:
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    lines = (directory / "data" / "answers.jsonl").read_text().splitlines()
    assert len(lines) == len((directory / "data" / "questions.jsonl").read_text().splitlines())
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 64, 256])
    args = parser.parse_args()
    os.environ.update(OVERBRAINER_LOAD_PLUGINS="", OVERBRAINER_LOG="WARNING", NO_COLOR="1")
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fake_provider.py"), "--latency", str(args.latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as temp:
            root = Path(temp)
            answer(project(root, url, 8, 16))  # warm up: imports, first connections
            print(f"{args.answers} answers, {args.latency * 1000:.0f} ms a reply, "
                  f"provider in process {server.pid}")
            print(f"{'concurrency':>11}  {'req/s':>8}  {'ideal':>8}  {'ratio':>5}  "
                  f"{'CLI CPU/request':>15}  {'provider CPU/request':>20}")
            for concurrency in args.concurrency:
                directory = project(root, url, concurrency, args.answers)
                served = cpu_seconds(server.pid)
                wall, cpu = answer(directory)
                served = cpu_seconds(server.pid) - served
                rate = args.answers / wall
                ideal = concurrency / args.latency
                print(f"{concurrency:>11}  {rate:>8.1f}  {ideal:>8.1f}  {rate / ideal:>5.2f}  "
                      f"{cpu / args.answers * 1000:>12.3f} ms  "
                      f"{served / args.answers * 1000:>17.3f} ms", flush=True)
    finally:
        server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    main()
