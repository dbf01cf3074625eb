"""Whether ``[budget] max_usd`` holds against the loopback provider: what it billed, beside
the budget and the spend as overbrainer's files say, in the scenarios of issue 36 (part 2).

    uv run python benchmarks/budget.py [--kills 5] [--batch 295] [--typical 100] [--seed 7]
        [--only a a2 b c c2 d e]

Each scenario is a fresh project in a temporary directory, answered by the real CLI in this
process (click's ``CliRunner``), or in a process of its own where it is killed with
``kill -9`` (by its pid). The loopback provider (``tests/helpers/fake_provider.py``,
``tests/helpers/fake_batch.py``) serves from a thread of this process and records each reply's
tokens: ``billed`` is what it answered (a reply is billed once the provider has made it,
whether or not the client waited for it), at the prices it lists (a batch's results at the
listed price less ``batch_discount``, 0.5). ``spent`` is
``overbrainer.pipeline.spend.spent`` of the project after the scenario. Scenarios:

- ``a``: five runs of ``overbrainer answers`` (a subprocess), each killed with ``kill -9``
  1-3 s (drawn) after its first request (its start-up, about a second here, is not
  counted: a run killed before it sends anything pays nothing), against a provider
  answering in 0.3 s at concurrency 8, ``max_usd = 0.10``, answers of 300 tokens
  (``max_tokens = 1000``) priced so that 33 requests pass the budget (the first run nearly
  spends it); ``a2``: the same killed 0.2-0.8 s after its first request, so that every
  run dies with requests in flight;
- ``b``: a first run whose answers took 1 output token, then a parent that answers 1,000
  (``max_tokens = 1000``) at concurrency 64, ``max_usd`` = the spend + $0.05;
- ``c``: a batch (``roles.parent.batch``, the fake batch API) of 295 questions answered with
  1,000 tokens (``max_tokens = 1000``), with a budget worth 100 of them at the batch price;
  ``c2``: the same after a first online run whose answers took 1 token (the issue's case);
- ``d``: a provider that omits ``usage`` (answers of about 300 tokens, ``max_tokens =
  1000``), a budget worth 50 answers: billed at the tokens the fake really made;
- ``e``: a budget worth N typical answers (N = 100, answers drawn around 500 tokens, the
  default ``max_tokens`` 16384, concurrency 8): the answers kept (not excluded) / N.

Printed: a row a scenario, with the budget, what was billed, the spend the files say, the
share of the budget billed and spent (goal: at most 1.00; ``held``: both within it), and
where a budget is worth N answers, the answers kept / N (goal for ``e``: at least 0.80).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers

from click.testing import CliRunner  # noqa: E402
from tests.helpers.fake_batch import FakeBatchProvider  # noqa: E402
from tests.helpers.fake_provider import FakeProvider, Seen, openai_completion  # noqa: E402
from tests.helpers.pipeline_data import PIPELINE_CONFIG, lines, seed_questions, write_project  # noqa: E402

from overbrainer.cli import cli  # noqa: E402
from overbrainer.pipeline.spend import read_spending, spent  # noqa: E402

CLI = str(Path(sys.executable).parent / "overbrainer")
DISCOUNT = 0.5
"""``batch_discount``'s default: the batch price is half the listed one."""


@dataclass
class Row:
    name: str
    budget: float
    billed: float
    spent: float
    kept: int
    """Answers kept (not excluded)."""
    worth: int
    """The answers the budget is worth."""
    note: str = ""


class Tokens:
    """What a parent answers: its tokens out for each request (cut at its ``max_tokens``),
    and what it billed when its replies carry no usage."""

    def __init__(self, draw: Callable[[Seen], int], usage: bool = True) -> None:
        self.draw = draw
        self.usage = usage
        self.unreported: list[tuple[int, int]] = []

    def __call__(self, seen: Seen) -> dict[str, Any]:
        wanted = self.draw(seen)
        out = min(wanted, seen.body["max_tokens"])
        tokens_in = tokens_in_of(seen)
        body = openai_completion("An answer.", reasoning="Thinking.", usage=(tokens_in, out),
                                 finish="length" if out < wanted else "stop")  # fmt: skip
        if not self.usage:
            del body["usage"]
            self.unreported.append((tokens_in, out))
        return body


def tokens_in_of(seen: Seen) -> int:
    """A real tokenizer's count of the prompt: about 4 characters a token, and framing."""
    return 12 + sum(len(m["content"]) for m in seen.body["messages"]) // 4


def drawn(seed: int, mean: float, spread: float) -> Callable[[Seen], int]:
    """Tokens out drawn per question (the same question, the same length)."""

    def draw(seen: Seen) -> int:
        rng = random.Random(f"{seed}|{seen.prompt}")
        return max(round(rng.gauss(mean, spread)), 1)

    return draw


def fixed(tokens: int) -> Callable[[Seen], int]:
    return lambda seen: tokens


def billed(provider: FakeProvider, unreported: Sequence[tuple[int, int]] = ()) -> float:
    """USD of every chat the provider answered, at the prices it lists (and of the replies
    ``unreported``, whose usage it left out, at the tokens it really made)."""
    total = 0.0
    for seen in provider.chats():
        price_in, price_out = (float(p) for p in provider.prices[seen.model or ""])
        if seen.reply_usage is not None:
            total += seen.reply_usage[0] * price_in + seen.reply_usage[1] * price_out
    price_in, price_out = (float(p) for p in provider.prices["parent-model"])
    total += sum(i * price_in + o * price_out for i, o in unreported)
    return total


def configure(concurrency: int, max_tokens: int | None, extra: str = "") -> str:
    config = PIPELINE_CONFIG.replace("concurrency = 4", f"concurrency = {concurrency}")
    if max_tokens is not None:
        config = config.replace("reasoning = true", f"reasoning = true\nmax_tokens = {max_tokens}")
    return config + extra


def questions(project: Path, count: int, topic: str = "ownership", sub: str = "moves") -> None:
    texts = [f"Question {n} of {topic}: why does a move of value {n} invalidate its source?"
             for n in range(count)]  # fmt: skip
    seed_questions(project, {(topic, sub): texts})


def cli_run(project: Path, *args: str, env: dict[str, str] | None = None) -> int:
    result = CliRunner().invoke(cli, ["-C", str(project), *args], env=env,
                                catch_exceptions=False)  # fmt: skip
    return result.exit_code


def kept(project: Path) -> int:
    return sum(1 for a in lines(project, "answers.jsonl") if a["meta"].get("excluded") is None)


def per_answer(provider: FakeProvider, tokens_in: int, tokens_out: int) -> float:
    price_in, price_out = (float(p) for p in provider.prices["parent-model"])
    return tokens_in * price_in + tokens_out * price_out


def typical_in(project: Path) -> int:
    """The tokens in of a question of ``project`` as the fake counts them."""
    question = lines(project, "questions.jsonl")[0]["text"]
    return 12 + (len(question) + len("system|ownership")) // 4


# -- the scenarios ------------------------------------------------------------------------------


def killed(root: Path, runs: int, seed: int, window: tuple[float, float], name: str) -> Row:
    """a: ``kill -9`` a few times against a slow provider."""
    provider = FakeProvider(latency=0.3).start()
    provider.prices["parent-model"] = ("0.000002", "0.00001")  # 300 out: $0.0031 an answer
    try:
        provider.on(None, Tokens(fixed(300)), times=None)
        project = write_project(
            root / name, provider.url, configure(8, 1000, "\n[budget]\nmax_usd = 0.10\n")
        )
        questions(project, 400)
        rng = random.Random(seed)
        fates = []
        env = {**os.environ, "NO_COLOR": "1"}
        for _ in range(runs):
            asked = len(provider.chats())
            after = rng.uniform(*window)
            process = subprocess.Popen(
                [CLI, "-C", str(project), "answers"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            began = time.monotonic()
            while len(provider.chats()) == asked and process.poll() is None:
                time.sleep(0.01)  # its start-up: imports, the price list
            first = time.monotonic() - began
            time.sleep(after)
            if process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                fate = f"killed {first:.1f}+{after:.1f} s"
            else:
                stderr = process.stderr.read().decode() if process.stderr else ""
                stopped = "budget: answers stopped" in stderr
                fate = f"exit {process.returncode}" + (" (budget)" if stopped else "")
            if process.stderr:
                process.stderr.close()
            fates.append(f"{fate}: {len(provider.chats()) - asked} asked")
        time.sleep(0.5)  # the replies the provider was making when the last run died
        each = per_answer(provider, typical_in(project), 300)
        unsure = sum(e.unsure for e in read_spending(project).executions.values())
        note = (f"{len(provider.chats())} requests, {len(lines(project, 'answers.jsonl'))} "
                f"answers saved, {unsure} counted at their bound (in flight when killed); "
                f"runs: {'; '.join(fates)}")  # fmt: skip
        label = f"{name} kill -9 x{runs}, {window[0]:g}-{window[1]:g} s"
        return Row(label, 0.10, billed(provider), spent(project),
                   kept(project), int(0.10 / each), note)  # fmt: skip
    finally:
        provider.stop()


def first_short_then_long(
    root: Path, name: str, provider: FakeProvider, config: str, count: int
) -> tuple[Path, float]:
    """A project whose first 20 answers took 1 token; the rest (``count`` questions of
    another topic) are answered with 1,000. Returns it and its spend after the first run."""
    short = Tokens(fixed(1))
    long = Tokens(fixed(1000))
    provider.on(lambda s: "ownership" in s.prompt, short, times=None)
    provider.on(None, long, times=None)
    project = write_project(root / name, provider.url, config)
    questions(project, 20)
    questions(project, count, "lifetimes", "scopes")
    code = cli_run(project, "answers", "--topic", "ownership", "--no-batch")
    assert code == 0, "the first run should answer its 20 questions"
    return project, spent(project)


def longer_than_measured(root: Path) -> Row:
    """b: the measured average is 1 token, the parent now answers 1,000, concurrency 64."""
    provider = FakeProvider().start()
    try:
        project, before = first_short_then_long(root, "b", provider, configure(64, 1000), 100)
        budget = before + 0.05
        code = cli_run(project, "answers", env={"OVERBRAINER_BUDGET__MAX_USD": f"{budget:.6f}"})
        long = sum(
            1
            for a in lines(project, "answers.jsonl")
            if a["meta"]["output_tokens"] == 1000 and a["meta"]["excluded"] is None
        )
        worth = int(0.05 / per_answer(provider, typical_in(project), 1000))
        return Row("b 1 token, then 1000", budget, billed(provider), spent(project), long,
                   worth, f"exit {code}; first run ${before:.4f}")  # fmt: skip
    finally:
        provider.stop()


class BatchBilling(FakeBatchProvider):
    """The fake batch API, answering parent requests with ``answer``'s tokens, and
    counting what its results bill (at the batch price)."""

    def __init__(self, answer: Callable[[Seen], dict[str, Any]]) -> None:
        super().__init__(process_s=0.0)
        self.answer = answer
        self.batch_billed = 0.0
        self.batch_items_made = 0

    def _default(self, seen: Seen) -> Any:
        if seen.model == "parent-model" and seen.path in ("chat/completions", "messages"):
            return self.answer(seen)
        return super()._default(seen)

    def _result(self, protocol: str, custom_id: str, body: dict[str, Any],
                kind: str | None) -> tuple[bytes | None, bool]:  # fmt: skip
        line, to_errors = super()._result(protocol, custom_id, body, kind)
        if line is not None and kind is None:
            record = json.loads(line)
            usage = record["response"]["body"]["usage"]
            price_in, price_out = (float(p) for p in self.prices[body["model"]])
            self.batch_billed += (
                usage["prompt_tokens"] * price_in + usage["completion_tokens"] * price_out
            ) * (1 - DISCOUNT)
            self.batch_items_made += 1
        return line, to_errors


def in_batch(root: Path, count: int, after_short: bool) -> Row:
    """c, c2: a batch of ``count`` questions and a budget worth 100 answers of it."""
    provider = BatchBilling(Tokens(fixed(1000)))
    provider.start()
    env = {"OVERBRAINER_PIPELINE__BATCH_POLL_S": "0.1"}
    try:
        config = configure(8, 1000).replace("reasoning = true", "reasoning = true\nbatch = true")
        if after_short:
            project, before = first_short_then_long(root, "c2", provider, config, count)
        else:
            project = write_project(root / "c", provider.url, config)
            questions(project, count, "lifetimes", "scopes")
            before = 0.0
        worth = 100
        budget = before + worth * per_answer(provider, typical_in(project), 1000) * (1 - DISCOUNT)
        env["OVERBRAINER_BUDGET__MAX_USD"] = f"{budget:.6f}"
        code = cli_run(project, "answers", env=env)
        total = billed(provider) + provider.batch_billed
        name = "c2 batch after 1 token" if after_short else "c batch"
        caps = sorted({item[1].get("max_tokens") for b in provider.submitted() for item in b.items})
        note = (f"exit {code}; {provider.batch_items_made} batch items of {count}, "
                f"max_tokens {caps}")  # fmt: skip
        return Row(f"{name} of {count}", budget, total, spent(project), kept(project) - (
            20 if after_short else 0), worth, note)  # fmt: skip
    finally:
        provider.stop()


def no_usage(root: Path, seed: int) -> Row:
    """d: a provider that omits ``usage``; billed at what it really made."""
    provider = FakeProvider().start()
    try:
        tokens = Tokens(drawn(seed, 300, 45), usage=False)
        provider.on(None, tokens, times=None)
        project = write_project(root / "d", provider.url, configure(8, 1000))
        questions(project, 200)
        worth = 50
        budget = worth * per_answer(provider, typical_in(project), 300)
        code = cli_run(project, "answers", env={"OVERBRAINER_BUDGET__MAX_USD": f"{budget:.6f}"})
        return Row(
            "d no usage",
            budget,
            billed(provider, tokens.unreported),
            spent(project),
            kept(project),
            worth,
            f"exit {code}; {len(provider.chats())} requests",
        )
    finally:
        provider.stop()


def typical(root: Path, worth: int, seed: int) -> Row:
    """e: a budget worth ``worth`` typical answers, the default ``max_tokens``."""
    provider = FakeProvider().start()
    try:
        provider.on(None, Tokens(drawn(seed, 500, 75)), times=None)
        project = write_project(root / "e", provider.url, configure(8, None))
        questions(project, worth * 3)
        budget = worth * per_answer(provider, typical_in(project), 500)
        code = cli_run(project, "answers", env={"OVERBRAINER_BUDGET__MAX_USD": f"{budget:.6f}"})
        caps = sorted({s.body["max_tokens"] for s in provider.chats()})
        shown = caps if len(caps) <= 4 else [*caps[:2], "…", *caps[-2:]]
        truncated = sum(
            1 for a in lines(project, "answers.jsonl") if a["meta"].get("excluded") == "truncated"
        )
        note = (f"exit {code}; {len(provider.chats())} requests, {truncated} truncated; "
                f"max_tokens {shown}")  # fmt: skip
        return Row(f"e worth {worth} answers", budget, billed(provider), spent(project),
                   kept(project), worth, note)  # fmt: skip
    finally:
        provider.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--batch", type=int, default=295)
    parser.add_argument("--typical", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", nargs="+", default=["a", "a2", "b", "c", "c2", "d", "e"])
    args = parser.parse_args()
    os.environ.update(OVERBRAINER_LOAD_PLUGINS="", OVERBRAINER_LOG="ERROR", NO_COLOR="1")
    scenarios: dict[str, Callable[[Path], Row]] = {
        "a": lambda root: killed(root, args.kills, args.seed, (1.0, 3.0), "a"),
        "a2": lambda root: killed(root, args.kills, args.seed, (0.2, 0.8), "a2"),
        "b": longer_than_measured,
        "c": lambda root: in_batch(root, args.batch, after_short=False),
        "c2": lambda root: in_batch(root, args.batch, after_short=True),
        "d": lambda root: no_usage(root, args.seed),
        "e": lambda root: typical(root, args.typical, args.seed),
    }
    print(f"{'scenario':<30} {'budget':>9} {'billed':>9} {'spent':>9} {'billed/':>8} "
          f"{'spent/':>7} {'held':>5} {'kept/N':>16}")  # fmt: skip
    print(f"{'':<30} {'':>9} {'':>9} {'':>9} {'budget':>8} {'budget':>7}")
    with tempfile.TemporaryDirectory() as temp:
        for name in args.only:
            row = scenarios[name](Path(temp))
            share = f"{row.kept}/{row.worth} = {row.kept / row.worth:.2f}"
            held = "yes" if max(row.billed, row.spent) <= row.budget + 1e-9 else "NO"
            print(f"{row.name:<30} ${row.budget:>8.4f} ${row.billed:>8.4f} ${row.spent:>8.4f} "
                  f"{row.billed / row.budget:>8.2f} {row.spent / row.budget:>7.2f} {held:>5} "
                  f"{share:>16}", flush=True)  # fmt: skip
            if row.note:
                print(f"    {row.note}", flush=True)


if __name__ == "__main__":
    main()
