"""``split``'s decontamination at scale, against a naive n-gram set intersection.

    uv run python benchmarks/decontaminate.py [--answers 100000] [--eval 10000]
        [--planted 1000] [--short 0] [-n 13] [--seed 1]

Synthetic texts from a random vocabulary of 30,000 words drawn with Zipf-like weights:
``--answers`` train texts (a question of 10-30 words and an answer of 100-200) and
``--eval`` eval questions of 30-80 words. Into ``--planted`` of the answers an eval question
is pasted, paraphrased: one word in 15 replaced by another (at random places), its case
changed and punctuation added. ``--short`` more eval questions of 5-12 words (fewer than
``n``: the index matches them whole, in one more pass over a train text) are drawn last,
never planted: they measure that pass's cost and that it drops no clean answer (the naive
method ignores them). Both methods see the same texts:

- the real ``overbrainer.pipeline.decontaminate.Index`` (every eval n-gram's hash in one
  dict, a train text tested by ``isdisjoint`` over its n-grams' hashes);
- the naive one: the eval n-grams as a Python set of word tuples, each train text's n-grams
  made into a set and intersected with it; words found by the regular expression alone
  (the index's ``words`` splits an ASCII text without it, four times faster).

Printed for each: recall of the planted copies (goal ≥ 0.95), the share of clean answers
dropped (goal ≤ 1%), CPU seconds (``time.process_time``, the index built and every text
tested; making the texts not counted; goal < 30 s for the real one at the defaults), and
the memory the eval n-grams take (traced apart, not timed); then the naive CPU over the
real one.
"""

from __future__ import annotations

import argparse
import gc
import random
import re
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT))  # benchmarks._harness

from benchmarks._harness import stopwatch  # noqa: E402

from overbrainer.pipeline.decontaminate import EvalItem, Index, grams  # noqa: E402

VOCABULARY = 30_000
PUNCTUATION = (",", ".", ";", ":", "!", "?", " -", "")


def vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    """Made-up words, and Zipf-like weights, cumulated (word k drawn in proportion to
    1 / (k + 10))."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    made = {"".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(VOCABULARY * 2)}
    chosen = sorted(made)[:VOCABULARY]
    rng.shuffle(chosen)
    cumulative, total = [], 0.0
    for rank in range(len(chosen)):
        total += 1 / (rank + 10)
        cumulative.append(total)
    return chosen, cumulative


def paraphrased(text: str, rng: random.Random, vocab: list[str]) -> str:
    """``text`` with one word in 15 replaced (at random places), shouted or not, and
    punctuated."""
    parts = text.split()
    for place in rng.sample(range(len(parts)), max(1, len(parts) // 15)):
        parts[place] = rng.choice(vocab)
    if rng.random() < 0.5:
        parts = [part.capitalize() for part in parts]
    return " ".join(part + rng.choice(PUNCTUATION) for part in parts)


def texts(args: argparse.Namespace) -> tuple[list[str], list[list[str]], set[int]]:
    """The eval questions; each answer's texts (question, answer); the planted ones."""
    rng = random.Random(args.seed)
    vocab, weights = vocabulary(rng)

    def draw(low: int, high: int) -> str:
        return " ".join(rng.choices(vocab, cum_weights=weights, k=rng.randint(low, high)))

    evaluation = [draw(30, 80) for _ in range(args.eval)]
    answers = [[draw(10, 30), draw(100, 200)] for _ in range(args.answers)]
    planted = set(rng.sample(range(args.answers), min(args.planted, args.answers)))
    for number in sorted(planted):
        body = answers[number][1].split()
        cut = rng.randrange(len(body))
        copy = paraphrased(rng.choice(evaluation), rng, vocab)
        answers[number][1] = " ".join([*body[:cut], copy, *body[cut:]])
    evaluation += [draw(5, 12) for _ in range(args.short)]  # last: the rest is as without
    return evaluation, answers, planted


def held_index(evaluation: list[str], n: int) -> object:
    return Index([EvalItem(f"eval {i}", text) for i, text in enumerate(evaluation)], n)


def naive_words(text: str) -> list[str]:
    """The same words as ``words``, the obvious way (``words`` splits ASCII text faster)."""
    return re.findall(r"\w+", text.casefold())


def held_naive(evaluation: list[str], n: int) -> object:
    held: set[tuple[str, ...]] = set()
    for text in evaluation:
        held.update(grams(naive_words(text), n))
    return held


def held_mib(build: Callable[[list[str], int], object], evaluation: list[str], n: int) -> float:
    """The memory what ``build`` holds of the eval n-grams takes (traced, not timed)."""
    gc.collect()
    tracemalloc.start()
    kept = build(evaluation, n)
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return size / 2**20


def real(evaluation: list[str], answers: list[list[str]], n: int) -> set[int]:
    index = held_index(evaluation, n)
    assert isinstance(index, Index)
    return {number for number, pair in enumerate(answers) if index.match(pair) is not None}


def naive(evaluation: list[str], answers: list[list[str]], n: int) -> set[int]:
    held = held_naive(evaluation, n)
    assert isinstance(held, set)
    dropped = set()
    for number, pair in enumerate(answers):
        if set(grams(naive_words("\n".join(pair)), n)) & held:
            dropped.add(number)
    return dropped


def measure(
    name: str, method: Callable[[list[str], list[list[str]], int], set[int]],
    build: Callable[[list[str], int], object], evaluation: list[str],
    answers: list[list[str]], planted: set[int], n: int,
) -> float:
    gc.collect()
    with stopwatch() as watch:
        dropped = method(evaluation, answers, n)
    cpu = watch.cpu
    clean = len(answers) - len(planted)
    recall = len(dropped & planted) / len(planted) if planted else 1.0
    false = len(dropped - planted) / clean if clean else 0.0
    print(f"{name:>6}: recall {recall:.4f} of {len(planted)} planted, clean dropped "
          f"{false:.4%} of {clean}, CPU {cpu:.2f} s, eval n-grams held in "
          f"{held_mib(build, evaluation, n):.1f} MiB")
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=100_000)
    parser.add_argument("--eval", type=int, default=10_000)
    parser.add_argument("--planted", type=int, default=1000)
    parser.add_argument("--short", type=int, default=0)
    parser.add_argument("-n", type=int, default=13)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    evaluation, answers, planted = texts(args)
    words_in = sum(len(text.split()) for pair in answers for text in pair)
    print(f"{len(answers)} answers ({words_in} words), {len(evaluation)} eval items, "
          f"{len(planted)} planted, n = {args.n}")
    fast = measure("index", real, held_index, evaluation, answers, planted, args.n)
    slow = measure("naive", naive, held_naive, evaluation, answers, planted, args.n)
    print(f"naive / index CPU: {slow / fast:.2f}x (goal for the index: < 30 s)")


if __name__ == "__main__":
    main()
