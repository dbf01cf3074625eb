"""Throughput of the ``answers`` stage against the loopback provider at 100 ms a reply.

    uv run python benchmarks/answers.py [--answers 1000] [--latency 0.1] [--concurrency 8 64 256]

The provider runs in its own process, so it shares neither the CLI's event loop nor its CPU
accounting. For each concurrency, a fresh project with N questions is answered by the real
CLI in this process; printed: requests per second, the ratio to the ideal (concurrency /
latency), and the CPU time per request of the CLI and of the provider.

``--baseline`` first measures a bare aiohttp client (no overbrainer code) sending the same
requests: the most this machine allows, worth knowing on a shared or small machine.

``--cold N`` measures the whole command the issue's table has in mind instead: the real
console script in a fresh process, N answers at the first concurrency, a provider in this
process noting when the first request came and the last reply left. Printed: the start-up
before the first request (goal 0.25 s or less), the tail after the last reply, the whole
command against the ideal (goal 0.90 or more), and its CPU a request against a bare aiohttp
client's in the same run (goal 1.15x or less): the bare client as a whole process too
(interpreter, ``import aiohttp``, the requests), run as ``--bare`` in a fresh process; and,
for information, against the bare client's request loop alone (its thread's CPU, warm).
Neither counts the provider's CPU: it is this process's, in a thread of its own.
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
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness



def project(root: Path, url: str, concurrency: int, answers: int) -> Path:
    from tests.helpers.pipeline_data import PIPELINE_CONFIG, write_project

    from overbrainer.pipeline.ids import question_id, subtopic_id

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
    from benchmarks._harness import stopwatch

    from overbrainer.cli import cli

    with stopwatch() as watch:
        cli.main(["-C", str(directory), "answers"], prog_name="overbrainer", standalone_mode=False)
    lines = (directory / "data" / "answers.jsonl").read_text().splitlines()
    assert len(lines) == len((directory / "data" / "questions.jsonl").read_text().splitlines())
    return watch.wall, watch.cpu


def bare_client(url: str, concurrency: int, count: int) -> tuple[float, float]:
    """Wall and CPU seconds (of this thread: a provider may serve from another) of
    ``count`` chat requests from a plain aiohttp session."""
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

    # Timed by hand: the bare process (``--bare``) imports nothing more than it needs.
    wall, cpu = time.perf_counter(), time.thread_time()
    asyncio.run(send_all())
    return time.perf_counter() - wall, time.thread_time() - cpu


def bare_process(url: str, concurrency: int, count: int, libraries: bool = False) -> float:
    """CPU seconds of a fresh process that is only a bare aiohttp client sending ``count``
    chat requests (its start-up, ``import aiohttp`` included); with ``libraries``, it
    imports the other libraries of overbrainer's design first (click, pydantic, loguru)."""
    from benchmarks._harness import children_cpu, stopwatch

    with stopwatch(children_cpu) as watch:
        subprocess.run(
            [sys.executable, __file__, "--bare", url, "--answers", str(count),
             "--concurrency", str(concurrency), *(["--libraries"] if libraries else [])],
            check=True,
        )
    return watch.cpu


def cold(answers: int, latency: float, concurrency: int, repeat: int) -> None:
    """The console script in fresh processes: start-up, tail, whole-command ratio, CPU."""
    import shutil

    from benchmarks._harness import children_cpu, column_medians, median, stopwatch
    from tests.helpers.fake_provider import FakeProvider, is_chat

    provider = FakeProvider(latency=latency).start()
    arrivals: list[float] = []

    def note(seen: object) -> None:
        arrivals.append(time.monotonic())

    provider.on(lambda seen: is_chat(seen) and note(seen) is None and False, None, times=None)
    script = shutil.which("overbrainer") or "overbrainer"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rows = []
    bare_whole: list[float] = []
    bare_rows: list[tuple[float, float]] = []  # its start-up and wall
    floor: list[float] = []  # the start-up of a bare client importing the design's libraries

    def timed(libraries: bool) -> tuple[float, float, float]:
        arrivals.clear()
        began = time.monotonic()
        cpu = bare_process(provider.url, concurrency, answers, libraries)
        return arrivals[0] - began, time.monotonic() - began, cpu
    try:
        with tempfile.TemporaryDirectory() as temp:
            for number in range(repeat + 1):
                directory = project(Path(temp) / str(number), provider.url, concurrency, answers)
                arrivals.clear()
                with stopwatch(children_cpu) as watch:
                    began = time.monotonic()  # the clock of ``arrivals``
                    subprocess.run([script, "-C", str(directory), "answers"], env=env,
                                   check=True, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                    ended = time.monotonic()
                cpu = watch.cpu
                if number:  # the first run warms the caches
                    rows.append((arrivals[0] - began, ended - (max(arrivals) + latency),
                                 ended - began, cpu))
                    start_up, whole_wall, bare_cpu = timed(libraries=False)
                    bare_whole.append(bare_cpu)
                    bare_rows.append((start_up, whole_wall))
                    floor.append(timed(libraries=True)[0])
        _, bare_cpu = bare_client(provider.url, concurrency, answers)
    finally:
        provider.stop()
    columns = list(zip(*rows, strict=True))
    start, tail, wall, cpu = column_medians(rows)
    whole = median(bare_whole)
    ideal = answers / concurrency * latency

    def spread(values: tuple[float, ...] | list[float], scale: float = 1.0) -> str:
        return f"{min(values) * scale:.2f}-{max(values) * scale:.2f}"

    print(f"cold `overbrainer answers`: {answers} answers at concurrency {concurrency}, "
          f"{latency * 1000:.0f} ms a reply, median of {repeat}")
    bare_start, bare_wall = column_medians(bare_rows)
    print(f"  start-up before the first request: {start:.2f} s ({spread(columns[0])}; "
          f"goal <= 0.25); a bare aiohttp client's {bare_start:.2f} s, the same importing "
          f"click, pydantic and loguru first {median(floor):.2f} s")
    print(f"  after the last reply: {tail:.2f} s ({spread(columns[1])})")
    print(f"  whole command: {wall:.2f} s, {ideal / wall:.2f} of ideal ({ideal:.2f} s; "
          f"{min(ideal / w for w in columns[2]):.2f}-{max(ideal / w for w in columns[2]):.2f}; "
          f"goal >= 0.90); the bare client's whole process {ideal / bare_wall:.2f} of ideal")
    per = 1000 / answers
    print(f"  CPU a request, whole process: {cpu * per:.3f} ms ({spread(columns[3], per)}); "
          f"a bare aiohttp client's whole process {whole * per:.3f} ms "
          f"({spread(bare_whole, per)}): {cpu / whole:.2f}x (goal <= 1.15)")
    print(f"  for information, against the bare client's request loop alone "
          f"({bare_cpu * per:.3f} ms, warm, its thread): {cpu / bare_cpu:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--baseline", action="store_true", help="measure bare aiohttp first")
    parser.add_argument("--cold", type=int, metavar="N", help="the whole command, N answers")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bare", metavar="URL", help=argparse.SUPPRESS)  # see bare_process
    parser.add_argument("--libraries", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        if args.libraries:
            import click  # noqa: F401
            import loguru  # noqa: F401
            import pydantic.main  # noqa: F401
        bare_client(args.bare, args.concurrency[0], args.answers)
        return
    os.environ.update(OVERBRAINER_LOAD_PLUGINS="", OVERBRAINER_LOG="WARNING", NO_COLOR="1")
    if args.cold:
        cold(args.cold, args.latency, args.concurrency[0], args.repeat)
        return
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "helpers" / "fake_provider.py"),
         "--latency", str(args.latency)],
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
