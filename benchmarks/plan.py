"""How close ``plan`` comes to what the rest of a half-done ``answers`` stage then costs.

    uv run python benchmarks/plan.py [--questions 2000] [--seed 7]

A loopback provider (in this process) answers with token counts that vary as a real
parent's do: tokens in follow the question's length, tokens out are drawn per question
from a distribution (``steady``: normal, 15% spread; ``long-tail``: log-normal, a few
answers ten times the median; ``drift``: the later questions are answered at more length,
the case a measured average cannot see coming). For each, the stage is stopped half way
(a 401 at the middle question), ``plan --json`` projects the rest from the measured
average, then ``answers`` runs to its end. Printed: projected and actual USD of the rest,
and their ratio (the issue's goal: within 10% on the loopback provider).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from click.testing import CliRunner  # noqa: E402

from fake_provider import FakeProvider, Reply, Seen, openai_completion  # noqa: E402
from overbrainer.cli import cli  # noqa: E402
from pipeline_data import PIPELINE_CONFIG, seed_questions, write_project  # noqa: E402

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


def measure(root: Path, shape: str, count: int, seed: int) -> tuple[float, float, int]:
    """Projected and actual USD of the rest, and how many answers the rest was."""
    provider = FakeProvider().start()
    try:
        texts = [f"Q{n}: why does a move of value {n} invalidate " + "its source " * (n % 7)
                 for n in range(count)]  # fmt: skip
        place = {text: n / count for n, text in enumerate(texts)}
        draw = SHAPES[shape]

        def reply(seen: Seen) -> Reply:
            key = hashlib.sha256(f"{seed}|{seen.prompt}".encode()).digest()
            rng = random.Random(key)
            tokens_in = 24 + len(seen.prompt) // 4 + (len(seen.system or "") // 4)
            tokens_out = round(draw(rng, place.get(seen.prompt, 0.0)))
            return Reply(openai_completion("An answer.", reasoning="Thinking.",
                                           usage=(tokens_in, tokens_out)))  # fmt: skip

        middle = texts[count // 2]
        provider.on(lambda s: s.prompt == middle, Reply({"error": {}}, status=401), times=1)
        provider.on(lambda s: s.model == "parent-model", reply, times=None)
        project = write_project(root / shape, provider.url, CONFIG.format(n=count))
        seed_questions(project, {("ownership", "moves"): texts})
        code, _ = cli_run(project, "answers")
        assert code == 1, "the 401 should stop the stage half way"
        code, out = cli_run(project, "plan", "--json")
        assert code == 0
        planned = json.loads(out)["stages"]["answers"]
        code, _ = cli_run(project, "answers")
        assert code == 0
        history = (project / ".overbrainer" / "history.jsonl").read_text().splitlines()
        actual = json.loads(history[-1])["cost"]
        return planned["usd"], actual, planned["requests"]
    finally:
        provider.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"{'replies':<10} {'rest':>5} {'projected':>11} {'actual':>11} {'ratio':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in SHAPES:
            projected, actual, rest = measure(Path(tmp), shape, args.questions, args.seed)
            print(f"{shape:<10} {rest:>5} ${projected:>10.4f} ${actual:>10.4f} "
                  f"{projected / actual:>7.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
