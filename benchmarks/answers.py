"""Throughput of the ``answers`` stage against the loopback provider at 100 ms a reply.

    uv run python benchmarks/answers.py [--answers 1000] [--latency 0.1] [--concurrency 8 64 256]

The provider runs in its own process, so it shares neither the CLI's event loop nor its CPU
accounting. For each concurrency, a fresh project with N questions is answered by the real
CLI in this process; printed: requests per second, the ratio to the ideal (concurrency /
latency), and the CPU time per request of the CLI and of the provider.

``--baseline`` first measures a bare aiohttp client (no overbrainer code) sending the same
requests: the most this machine allows, worth knowing on a shared or small machine.
"""

from __future__ import annotations

import argparse
import asyncio
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


def bare_client(url: str, concurrency: int, count: int) -> tuple[float, float]:
    """Wall and CPU seconds of ``count`` chat requests from a plain aiohttp session."""
    import aiohttp

    async def send_all() -> None:
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(connector=connector) as session:
            pending = iter(range(count))

            async def worker() -> None:
                for n in pending:
                    body = {"model": "parent-model", "max_tokens": 16384, "messages": [
                        {"role": "system", "content": "system|ownership"},
                        {"role": "user", "content": f"Question {n}: why?"},
                    ]}
                    async with session.post(f"{url}/chat/completions", json=body) as response:
                        json.loads(await response.read())

            await asyncio.gather(*(worker() for _ in range(concurrency)))

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(send_all())
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--baseline", action="store_true", help="measure bare aiohttp first")
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
            print(f"{'client':<11}  {'concurrency':>11}  {'req/s':>8}  {'ideal':>8}  {'ratio':>5}  "
                  f"{'client CPU/request':>18}  {'provider CPU/request':>20}")
            runs = [("overbrainer", c) for c in args.concurrency]
            if args.baseline:
                runs = [("aiohttp", c) for c in args.concurrency] + runs
            for client, concurrency in runs:
                served = cpu_seconds(server.pid)
                if client == "aiohttp":
                    wall, cpu = bare_client(url, concurrency, args.answers)
                else:
                    wall, cpu = answer(project(root, url, concurrency, args.answers))
                served = cpu_seconds(server.pid) - served
                rate = args.answers / wall
                ideal = concurrency / args.latency
                print(f"{client:<11}  {concurrency:>11}  {rate:>8.1f}  {ideal:>8.1f}  "
                      f"{rate / ideal:>5.2f}  {cpu / args.answers * 1000:>15.3f} ms  "
                      f"{served / args.answers * 1000:>17.3f} ms", flush=True)
    finally:
        server.stdin.close()
        server.wait(10)


if __name__ == "__main__":
    main()
