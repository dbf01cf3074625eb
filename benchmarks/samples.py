"""``[roles.parent] samples = 4`` against ``samples = 1``: the cost and wall time of four
answers a question, asked with ``n`` (one request a question) and as separate requests.

    uv run python benchmarks/samples.py [--questions 200] [--samples 4] [--latency 0.2]
                                        [--concurrency 16] [--system-chars 2000]
                                        [--reply-tokens 600]

The loopback provider (``tests/helpers/fake_provider.py``, in a thread of this process) answers at
``--latency`` a reply, counts a prompt's tokens as its characters / 4 (as a provider's
tokenizer roughly does) and writes ``--reply-tokens`` tokens a reply; with ``n`` it gives
``n`` replies for one prompt, as OpenAI bills them (the prompt once). The system prompt is
``--system-chars`` characters (a project's instructions). For each way, a fresh project of
the same questions is answered by the real CLI in this process (warmed up first by a
project of two questions). Printed: wall seconds, cost
(``.overbrainer/history.jsonl``), requests and answers, and each as a ratio of
``samples = 1`` (the baseline, measured in the same run).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers, benchmarks._harness
sys.path.insert(0, str(ROOT / "benchmarks"))

from answers import project  # noqa: E402
from benchmarks._harness import stopwatch  # noqa: E402
from tests.helpers.fake_provider import FakeProvider, Seen  # noqa: E402

from overbrainer.cli import cli  # noqa: E402


def prompt_tokens(seen: Seen) -> int:
    """A prompt's tokens as a provider counts them, roughly: its characters / 4."""
    messages = seen.body.get("messages", []) if isinstance(seen.body, dict) else []
    return max(1, sum(len(m["content"]) for m in messages) // 4)


def configure(directory: Path, samples: int, in_one: bool, system: str) -> None:
    config = directory / "overbrainer.toml"
    config.write_text(config.read_text().replace(
        "reasoning = true\n",
        f"samples = {samples}\nsamples_n = {'true' if in_one else 'false'}\n",
    ))  # fmt: skip
    (directory / "prompts" / "answer_system.txt").write_text(system)


def answer(directory: Path) -> tuple[float, float, int]:
    """Wall seconds, cost (USD) and answers of ``overbrainer answers``."""
    with stopwatch() as watch:
        cli.main(["-C", str(directory), "answers"], prog_name="overbrainer", standalone_mode=False)
    history = (directory / ".overbrainer" / "history.jsonl").read_text().splitlines()
    entry = json.loads(history[-1])
    assert entry["status"] == "ok", entry
    answers = len((directory / "data" / "answers.jsonl").read_text().splitlines())
    return watch.wall, float(entry["cost"]), answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--system-chars", type=int, default=2000)
    parser.add_argument("--reply-tokens", type=int, default=600)
    args = parser.parse_args()

    provider = FakeProvider(latency=args.latency)
    provider.prompt_tokens = prompt_tokens
    provider.reply_tokens = args.reply_tokens
    provider.start()
    system = ("You answer questions about {{ topic }} for an engineer. " * 200)[
        : args.system_chars
    ]
    ways = [("samples = 1", 1, True), (f"samples = {args.samples}, n", args.samples, True),
            (f"samples = {args.samples}, separate", args.samples, False)]  # fmt: skip
    rows = []
    try:
        with tempfile.TemporaryDirectory() as root:
            warm = project(Path(root) / "warm", provider.url, args.concurrency, 2)
            answer(warm)  # imports, the price list: not the baseline's alone
            for index, (name, samples, in_one) in enumerate(ways):
                directory = project(Path(root) / str(index), provider.url, args.concurrency,
                                    args.questions)  # fmt: skip
                configure(directory, samples, in_one, system)
                before = len(provider.chats())
                wall, cost, answers = answer(directory)
                rows.append((name, wall, cost, len(provider.chats()) - before, answers))
    finally:
        provider.stop()

    print(
        f"{args.questions} questions, {args.latency:g} s a reply, concurrency "
        f"{args.concurrency}, a system prompt of {args.system_chars} characters, "
        f"{args.reply_tokens} tokens a reply"
    )
    print(f"{'':<24} {'wall s':>8} {'cost $':>10} {'requests':>9} {'answers':>8} "
          f"{'wall x':>7} {'cost x':>7} {'cost/answer x':>14}")  # fmt: skip
    _, base_wall, base_cost, _, base_answers = rows[0]
    for name, wall, cost, requests, answers in rows:
        per_answer = (cost / answers) / (base_cost / base_answers)
        print(
            f"{name:<24} {wall:>8.2f} {cost:>10.4f} {requests:>9} {answers:>8} "
            f"{wall / base_wall:>7.2f} {cost / base_cost:>7.2f} {per_answer:>14.2f}"
        )


if __name__ == "__main__":
    main()
