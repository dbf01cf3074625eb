"""A served parent's speed (issue 40): llama-cpp-python's server of the toolchain
``export`` builds, serving a tiny random Llama (``tests/helpers/tiny_gguf.py``) on the
local target.

    uv run python benchmarks/serve.py [--answers 40] [--max-tokens 32] [--rounds 2]

Printed:

- cold: the whole ``answers`` command in a fresh process, the engine not up: from the
  command's start to its first answer (the engine's load included), and from the last
  answer to the engine's end (its watchdog's process group gone) and to the command's end;
  ``engine end - command end`` (negative: the engine was ended before the command exited);
- warm: with the engine kept up (``overbrainer serve up``), answers a second through
  ``overbrainer answers`` beside a bare aiohttp client sending the same requests (each
  answer's messages as the stage sent them, read back from ``answers.jsonl``, the same
  ``max_tokens``, temperature 0, one at a time as the engine answers) to the same server
  in the same run, ``--rounds`` times; the rate is counted between the first and the
  last answer on both sides, so the command's start-up is left out (the cold figures show
  it). The figure is the median of the rounds' ratios (``_harness.medians``). Goal: >= 0.9x.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness

from benchmarks._harness import medians  # noqa: E402 - the checkout on the path first
from tests.helpers.serving import (  # noqa: E402 - the checkout on the path first
    llama_toolchain,
    running,
    watchdog_pids,
    write_llama_project,
    write_tiny_gguf,
)

TOOLCHAIN = llama_toolchain()
OVERBRAINER = str(Path(sys.executable).parent / "overbrainer")
GGUF_TIMEOUT_S = 600


def questions(count: int, tag: str) -> list[str]:
    return [f"Question {tag}{n}: why does a move invalidate its source?" for n in range(count)]


def answer_times(command: list[str], directory: Path) -> dict[str, float | list[float]]:
    """Run ``command`` (an ``answers``) watching ``answers.jsonl`` and the watchdogs every
    2 ms: when each answer came, when the engine's process group went, when it ended."""
    answers = directory / "data" / "answers.jsonl"
    before = watchdog_pids(directory)
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    times: list[float] = []
    engine: int | None = None
    engine_end = exited = None
    while exited is None or (engine is not None and engine_end is None):
        now = time.monotonic()
        if answers.exists():
            count = answers.read_bytes().count(b"\n")
            times += [now] * (count - len(times))
        if engine is None:
            fresh = [pid for pid in watchdog_pids(directory) if pid not in before]
            engine = fresh[0] if fresh else None
        elif engine_end is None and not running(engine):
            engine_end = now
        if exited is None and process.poll() is not None:
            exited = now
        if exited is not None and engine is None:
            break
        time.sleep(0.002)
    error = process.stderr.read().decode() if process.stderr else ""
    if process.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{error}")
    return {"start": start, "answers": times, "exited": exited or 0.0,
            "engine_end": engine_end or 0.0}  # fmt: skip


def bare(url: str, asked: list[list[dict[str, str]]], model: str, max_tokens: int) -> list[float]:
    """The same requests from a plain aiohttp session, one at a time: when each came."""
    import aiohttp

    async def send() -> list[float]:
        done = []
        async with aiohttp.ClientSession() as session:
            for messages in asked:
                body = {"model": model, "messages": messages, "max_tokens": max_tokens,
                        "temperature": 0}  # fmt: skip
                async with session.post(f"{url}/chat/completions", json=body) as reply:
                    reply.raise_for_status()
                    await reply.json()
                done.append(time.monotonic())
        return done

    return asyncio.run(send())


def rate(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    if not (TOOLCHAIN / "bin" / "python").is_file():
        raise SystemExit(f"no llama.cpp toolchain in {TOOLCHAIN}: build it as .ci/run does")
    root = Path(tempfile.mkdtemp(prefix="serve-bench-"))
    model = write_tiny_gguf(TOOLCHAIN, root / "tiny.gguf", GGUF_TIMEOUT_S)
    n, most = options.answers, options.max_tokens

    cold_dir = write_llama_project(
        root / "cold", TOOLCHAIN, model, questions(n, "c"), max_tokens=most
    )
    cold = answer_times([OVERBRAINER, "-C", str(cold_dir), "answers"], cold_dir)
    times = cold["answers"]
    assert isinstance(times, list)
    assert len(times) == n, f"{len(times)} answers of {n}"
    first = times[0] - float(cold["start"])  # type: ignore[arg-type]
    engine_after = float(cold["engine_end"]) - times[-1]  # type: ignore[arg-type]
    exit_after = float(cold["exited"]) - times[-1]  # type: ignore[arg-type]
    print(f"cold: start-up to first answer {first:.2f} s; after the last answer the engine "
          f"ended in {engine_after:.3f} s and the command in {exit_after:.3f} s "
          f"(engine end - command end: {engine_after - exit_after:+.3f} s)")  # fmt: skip

    warm_dir = write_llama_project(
        root / "warm", TOOLCHAIN, model, questions(n * options.rounds, "w"), max_tokens=most
    )
    up = subprocess.run([OVERBRAINER, "-C", str(warm_dir), "serve", "up"],
                        capture_output=True, text=True, check=True)  # fmt: skip
    url = re.search(r"up at (\S+)", up.stdout)
    assert url is not None, up.stdout
    try:
        rounds: list[dict[str, float]] = []
        data = warm_dir / "data"
        everything = (data / "questions.jsonl").read_text().splitlines()
        for round_ in range(options.rounds):
            (data / "questions.jsonl").write_text("\n".join(everything[: n * (round_ + 1)]) + "\n")
            warm = answer_times([OVERBRAINER, "-C", str(warm_dir), "answers"], warm_dir)
            got = warm["answers"]
            assert isinstance(got, list)
            records = (data / "answers.jsonl").read_text().splitlines()[n * round_ :]
            asked = [json.loads(line)["messages"][:-1] for line in records]
            ours = rate(got[n * round_ :])
            theirs = rate(bare(url.group(1), asked, str(model), most))
            rounds.append({"ours": ours, "bare": theirs, "ratio": ours / theirs})
            print(f"warm round {round_ + 1}: overbrainer {ours:.2f} answers/s, bare aiohttp "
                  f"{theirs:.2f}/s: {ours / theirs:.2f}x")  # fmt: skip
        # each round's two sides run back to back: the median of their ratios is the
        # figure a machine that drifts between rounds moves least
        median = medians(rounds)
        print(f"warm (medians of {len(rounds)} rounds): overbrainer {median['ours']:.2f} "
              f"answers/s, bare {median['bare']:.2f}/s; the rounds' ratio "
              f"{median['ratio']:.2f}x (goal >= 0.9x)")  # fmt: skip
    finally:
        subprocess.run([OVERBRAINER, "-C", str(warm_dir), "serve", "down"], check=False,
                       capture_output=True)  # fmt: skip
        for pid in watchdog_pids(root):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
    print(json.dumps({"first_answer_s": round(first, 3), "engine_end_after_last_s":
                      round(engine_after, 3), "command_end_after_last_s": round(exit_after, 3),
                      "rounds": rounds}))  # fmt: skip


if __name__ == "__main__":
    main()
