"""Goodput of the ``answers`` stage against a provider that admits so many requests a second.

    uv run python benchmarks/ratelimit.py [--answers 960] [--rate 60] [--concurrency 64]
        [--dialect openai anthropic litellm litellm-bare] [--latency 0.05]

The loopback provider runs in its own process with a token bucket (one second's burst) and
answers what it cannot admit with a 429 and the headers of the chosen dialect: OpenAI's
``x-ratelimit-*`` and ``retry-after-ms``; Anthropic's ``anthropic-ratelimit-*`` and
``retry-after``; LiteLLM's limit and remaining without a reset, its 429 waiting
``llm_provider-retry-after`` whole seconds (``litellm``) or telling no wait at all
(``litellm-bare``, as its ``/v1/messages``). The real CLI answers N questions with
``max_retries = 3``. Printed for each dialect: the questions answered, the share of requests
refused (goal at most 5%), and the goodput against the limit, the ideal in the same run (goal
at least 0.9).

Then the real LiteLLM proxy (``tests/helpers/litellm_proxy.py``: mock models, no network; its
venv as ``.ci/run`` makes it) with ``--litellm-rpm`` (6) on its model: ``--litellm-answers`` (12)
answers, the requests it refused and the time per answer against the limit's own pace
(60 s / rpm). It counts per wall-clock minute and admits one fewer than its ``rpm`` (its
``remaining`` says one too many), so the ideal is ``rpm - 1`` a minute. ``--litellm-answers
0`` leaves it out.
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
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness
sys.path.insert(0, str(ROOT / "benchmarks"))

from answers import project  # noqa: E402
from benchmarks._harness import stopwatch  # noqa: E402

from overbrainer.cli import cli  # noqa: E402


def run(
    url: str, root: Path, answers: int, concurrency: int, *, model: str = "parent-model",
    key: str | None = None,
) -> dict[str, float]:
    directory = project(root, url, concurrency, answers)
    config = directory / "overbrainer.toml"
    text = config.read_text().replace("max_retries = 2", "max_retries = 3")
    if model != "parent-model":  # a real server's model: no reasoning to collect
        text = text.replace('model = "parent-model"\nreasoning = true', f'model = "{model}"')
    config.write_text(text)
    if key is not None:
        (directory / ".env").write_text(
            f"OVERBRAINER_PROVIDERS__MAIN__BASE_URL={url}\n"
            f"OVERBRAINER_PROVIDERS__MAIN__API_KEY={key}\n"
        )
    with stopwatch() as watch:
        try:
            cli.main(["-C", str(directory), "answers"], prog_name="overbrainer",
                     standalone_mode=False)
        except Exception as error:  # noqa: BLE001 - a failed item is a figure here, not a crash
            print(f"  answers: {error}")
    wall = watch.wall
    answered = len((directory / "data" / "answers.jsonl").read_text().splitlines())
    history = (directory / ".overbrainer" / "history.jsonl").read_text().splitlines()
    entry = json.loads(history[-1])
    return {"wall": wall, "answered": answered, "refused": entry.get("rate_limited", 0),
            "failed": entry["failed"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=960)
    parser.add_argument("--rate", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--dialect", nargs="+",
                        default=["openai", "anthropic", "litellm", "litellm-bare"])
    parser.add_argument("--litellm-answers", type=int, default=12)
    parser.add_argument("--litellm-rpm", type=int, default=6)
    args = parser.parse_args()
    os.environ.update(OVERBRAINER_LOAD_PLUGINS="", OVERBRAINER_LOG="WARNING", NO_COLOR="1")
    print(f"{args.answers} answers at concurrency {args.concurrency}, a provider admitting "
          f"{args.rate:g}/s, {args.latency * 1000:.0f} ms a reply")
    print(f"{'dialect':<12}  {'answered':>8}  {'failed':>6}  {'refused':>7}  {'share':>6}  "
          f"{'wall s':>6}  {'goodput/s':>9}  {'of limit':>8}")
    for dialect in args.dialect:
        bare = ["--bare-429"] if dialect.endswith("-bare") else []
        server = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "helpers" / "fake_provider.py"), "--latency",
             str(args.latency), "--rate", str(args.rate), "--dialect",
             dialect.removesuffix("-bare"), *bare],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        try:
            url = server.stdout.readline().strip()
            with tempfile.TemporaryDirectory() as temp:
                got = run(url, Path(temp), args.answers, args.concurrency)
        finally:
            server.stdin.close()
            server.wait(10)
        sent = got["answered"] + got["refused"] + got["failed"]
        share = got["refused"] / sent if sent else 0.0
        goodput = got["answered"] / got["wall"]
        print(f"{dialect:<12}  {got['answered']:>8}  {got['failed']:>6}  {got['refused']:>7}  "
              f"{share:>6.1%}  {got['wall']:>6.1f}  {goodput:>9.1f}  "
              f"{goodput / args.rate:>8.2f}", flush=True)
    if args.litellm_answers:
        litellm(args.litellm_answers, args.litellm_rpm)


def litellm(answers: int, rpm: int) -> None:
    """The answers stage through the real LiteLLM proxy, its model limited to ``rpm``."""
    from tests.helpers import litellm_proxy

    if not (litellm_proxy.VENV / "bin" / "litellm").is_file():
        print(f"LiteLLM proxy: not installed ({litellm_proxy.INSTALL})")
        return
    config = litellm_proxy.CONFIG.replace(
        f"rpm: {litellm_proxy.LIMITED_RPM}", f"rpm: {rpm}"
    )
    with tempfile.TemporaryDirectory() as temp:
        proxy = litellm_proxy.start(Path(temp) / "proxy", config)
        try:
            began = time.time()
            got = run(proxy.url, Path(temp), answers, rpm, model="limited-model",
                      key=litellm_proxy.MASTER_KEY)
        finally:
            proxy.stop()
    # The ideal: each window admits rpm - 1 at its start, the first from the second it began.
    windows = (answers - 1) // (rpm - 1) + 1
    ideal = max((windows - 1) * 60 - began % 60, 0.0)
    each = got["wall"] / max(got["answered"], 1)
    print(f"LiteLLM proxy {litellm_proxy.VERSION}, rpm = {rpm}: {got['answered']:.0f} of "
          f"{answers} answered, {got['failed']:.0f} failed, {got['refused']:.0f} refused "
          f"(over {windows} minute windows); {each:.1f} s an answer (the limit's pace: "
          f"{60 / rpm:.1f} s); wall {got['wall']:.0f} s against {ideal:.0f} s ideal from "
          f"the windows: {got['wall'] - ideal:+.0f} s", flush=True)

if __name__ == "__main__":
    main()
