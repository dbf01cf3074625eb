"""How close ``plan`` comes to what an ``answers`` stage then costs: before its first request
(a prior, or ``plan --pilot N``), and for the rest of a half-done stage.

    uv run python benchmarks/plan.py [--questions 2000] [--pilot 20] [--seed 7]

A loopback provider (in this process) answers with token counts that vary as a real
parent's do: tokens in follow the question's length, tokens out are drawn per question
from a distribution (``steady``: normal, 15% spread; ``long-tail``: log-normal, a few
answers ten times the median; ``drift``: the later questions are answered at more length,
the case a measured average cannot see coming). For each, on a fresh project with N
questions each time:

- **before the first request**: ``plan --json`` with none answered (the prior: 600 tokens
  an answer, 2,600 when the parent role has ``reasoning = true``), once with ``reasoning =
  false`` and once ``true``, then ``answers`` to its end; the loopback's replies do not
  depend on the setting, so one run is the actual cost of both. The bound (``up to``, what
  the budget reserves: ``max_tokens`` 16384 a request) beside it.
- **pilot**: ``plan --pilot N --json`` (N questions answered, paid, kept), then ``answers``
  to its end: the rest planned against the rest's cost.
- **half done**: the stage is stopped half way (a 401 at the middle question), ``plan
  --json`` projects the rest from the measured average, then ``answers`` runs to its end.

Printed: planned and actual USD, and their ratio (the issue's goals: the prior within
±50%, the pilot within ±15%, the rest of a half-done stage within 10%).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.helpers

from click.testing import CliRunner  # noqa: E402
from tests.helpers.fake_provider import FakeProvider, Reply, Seen, openai_completion  # noqa: E402
from tests.helpers.pipeline_data import PIPELINE_CONFIG, seed_questions, write_project  # noqa: E402

from overbrainer.cli import cli  # noqa: E402

Draw = Callable[[random.Random, float], float]
"""Tokens out of one answer: from a generator seeded by the question, and its place (0..1)."""

SHAPES: dict[str, Draw] = {
    "steady": lambda rng, at: max(rng.gauss(600, 90), 50),
    "long-tail": lambda rng, at: min(math.exp(rng.gauss(math.log(500), 0.8)), 16000),
    "drift": lambda rng, at: max(rng.gauss(400 + 600 * at, 80), 50),
}

CONFIG = (
    PIPELINE_CONFIG.replace("concurrency = 4", "concurrency = 8")
    .replace("subtopics = 2\nquestions_per_subtopic = 3",
             "subtopics = 1\nquestions_per_subtopic = {n}")
    .replace('[[topics]]\nname = "lifetimes"\nsubtopics = 1\nquestions_per_subtopic = 2\n', "")
)  # fmt: skip


def cli_run(project: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
    return result.exit_code, result.stdout


@dataclass
class Figure:
    plan: str
    requests: int
    planned: float
    actual: float
    bound: float | None = None


def loopback(shape: str, texts: list[str], seed: int, stop_at: str | None = None) -> FakeProvider:
    """The provider, its parent answering ``texts`` with ``shape``'s lengths (and a 401 to
    the question ``stop_at``, once)."""
    provider = FakeProvider().start()
    if stop_at is not None:
        provider.on(lambda s: s.prompt == stop_at, Reply({"error": {}}, status=401), times=1)
    place = {text: n / len(texts) for n, text in enumerate(texts)}
    draw = SHAPES[shape]

    def reply(seen: Seen) -> Reply:
        key = hashlib.sha256(f"{seed}|{seen.prompt}".encode()).digest()
        rng = random.Random(key)
        tokens_in = 24 + len(seen.prompt) // 4 + (len(seen.system or "") // 4)
        tokens_out = round(draw(rng, place.get(seen.prompt, 0.0)))
        return Reply(openai_completion("An answer.", reasoning="Thinking.",
                                       usage=(tokens_in, tokens_out)))  # fmt: skip

    provider.on(lambda s: s.model == "parent-model", reply, times=None)
    return provider


def questions(count: int) -> list[str]:
    return [f"Q{n}: why does a move of value {n} invalidate " + "its source " * (n % 7)
            for n in range(count)]  # fmt: skip


def last_cost(project: Path) -> float:
    history = (project / ".overbrainer" / "history.jsonl").read_text().splitlines()
    return float(json.loads(history[-1])["cost"])


def planned(project: Path, *args: str) -> dict[str, Any]:
    code, out = cli_run(project, "plan", "--json", *args)
    assert code == 0, out
    return dict(json.loads(out)["stages"]["answers"])


def half_done(root: Path, shape: str, count: int, seed: int) -> list[Figure]:
    """The rest of a stage stopped half way, projected from the measured average."""
    texts = questions(count)
    provider = loopback(shape, texts, seed, stop_at=texts[count // 2])
    try:
        project = write_project(root / f"{shape}-half", provider.url, CONFIG.format(n=count))
        seed_questions(project, {("ownership", "moves"): texts})
        code, _ = cli_run(project, "answers")
        assert code == 1, "the 401 should stop the stage half way"
        plan = planned(project)
        assert plan["basis"] == "measured", plan
        code, _ = cli_run(project, "answers")
        assert code == 0
        return [Figure("half done", plan["requests"], plan["usd"], last_cost(project))]
    finally:
        provider.stop()


def before_first(root: Path, shape: str, count: int, seed: int) -> list[Figure]:
    """The stage before its first request: the prior without and with reasoning."""
    texts = questions(count)
    provider = loopback(shape, texts, seed)
    try:
        config = CONFIG.format(n=count)
        project = write_project(root / f"{shape}-prior", provider.url, config)
        seed_questions(project, {("ownership", "moves"): texts})
        plans = {}
        for reasoning in ("false", "true"):
            (project / "overbrainer.toml").write_text(
                config.replace("reasoning = true", f"reasoning = {reasoning}")
            )
            plans[reasoning] = planned(project)
            assert plans[reasoning]["basis"] == "prior", plans[reasoning]
        code, _ = cli_run(project, "answers")
        assert code == 0
        actual = last_cost(project)
        return [
            Figure(f"prior, reasoning = {reasoning}", plan["requests"], plan["usd"], actual,
                   plan["usd_bound"])
            for reasoning, plan in plans.items()
        ]  # fmt: skip
    finally:
        provider.stop()


def piloted(
    root: Path, shape: str, count: int, seed: int, pilot: int, name: str = ""
) -> list[Figure]:
    """``plan --pilot N``: the rest planned from N answers, against the rest's cost."""
    texts = questions(count)
    provider = loopback(shape, texts, seed)
    try:
        project = write_project(root / f"{shape}-pilot{name}", provider.url, CONFIG.format(n=count))
        seed_questions(project, {("ownership", "moves"): texts})
        plan = planned(project, "--pilot", str(pilot))
        assert plan["basis"] == "measured", plan
        code, _ = cli_run(project, "answers")
        assert code == 0
        return [Figure(f"pilot {pilot}", plan["requests"], plan["usd"], last_cost(project))]
    finally:
        provider.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--pilot", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pilot-seeds", type=int, default=5,
                        help="pilots with this many seeds (draws) a shape, for the spread")
    args = parser.parse_args()
    os.environ.update(OVERBRAINER_LOAD_PLUGINS="", NO_COLOR="1")
    print(f"{args.questions} questions; planned and actual USD of the requests planned")
    print(f"{'replies':<10} {'plan':<24} {'requests':>8} {'planned':>10} {'actual':>10} "
          f"{'ratio':>7} {'up to / actual':>15}")  # fmt: skip
    pilots: list[list[float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for shape in SHAPES:
            figures = [
                *before_first(root, shape, args.questions, args.seed),
                *piloted(root, shape, args.questions, args.seed, args.pilot),
                *half_done(root, shape, args.questions, args.seed),
            ]
            for f in figures:
                bound = f"{f.bound / f.actual:>14.1f}x" if f.bound is not None else ""
                print(f"{shape:<10} {f.plan:<24} {f.requests:>8} ${f.planned:>9.4f} "
                      f"${f.actual:>9.4f} {f.planned / f.actual:>7.3f} {bound:>15}",
                      flush=True)  # fmt: skip
            pilots.append([figures[2].planned / figures[2].actual])
            for seed in range(args.seed + 1, args.seed + args.pilot_seeds):
                [f] = piloted(root, shape, args.questions, seed, args.pilot, f"-{seed}")
                pilots[-1].append(f.planned / f.actual)
    if args.pilot_seeds > 1:
        print(f"pilot {args.pilot}, seeds {args.seed}-{args.seed + args.pilot_seeds - 1} "
              "(each its own draws): planned rest / actual rest")  # fmt: skip
        for shape, ratios in zip(SHAPES, pilots, strict=True):
            within = sum(abs(r - 1) <= 0.15 for r in ratios)
            print(f"{shape:<10} {' '.join(f'{r:.3f}' for r in ratios)}  "
                  f"(within ±15%: {within} of {len(ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
