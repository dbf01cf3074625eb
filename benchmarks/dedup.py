"""Near-duplicate screening of questions at scale: the embedding check and the lexical one.

    uv run python benchmarks/dedup.py [--questions 100000] [--dims 1536] [--batch 10]
        [--labelled 20000] [--lexical-held 100000] [--skip-embedding] [--skip-lexical]

Embedding: one topic filled batch by batch to ``--questions`` through the real
``Deduplicator`` with a fake embedder (random vectors: nothing is a duplicate, so every
vector is kept and every one goes into the graph). Printed: the dedup's own CPU seconds (the
embedder's excluded) against the goal of 60 s, and the longest the event loop went without
running (a probe task asleep 5 ms at a time) against the goal of 50 ms, next to the same
probe with nothing to do. Baselines, in the same run: the pure-Python deduplicator
(``tests/pipeline/reference_dedup.py``) blocking the loop for one batch at 2,000 held
vectors; the exact screen (every held row, one matrix product) and the graph's, a batch at
1,000 to 16,000 held (where the exact one stops being the cheaper: ``EXACT_UP_TO``).

Labelled: ``--labelled`` questions of ``tests/pipeline/labelled_vectors.py`` (subtopics and
paraphrases, cosines either side of the 0.9 threshold) screened twice, by the exact screen
alone and by the one with the graph: the share of questions with the same decision (kept
or rejected) against the goal of 99%.

Lexical: ``--lexical-held`` questions seeded, then batches screened, for two worst cases: a
template every question shares (``what is the best way to ...``), and questions drawn from
a 30-word vocabulary (every bigram is common). Printed: CPU and the longest loop stall per
batch, against the reference at the same size.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from tests.pipeline.labelled_vectors import LabelledTopic  # noqa: E402
from tests.pipeline.reference_dedup import Deduplicator as Reference  # noqa: E402

from overbrainer.pipeline import vectors  # noqa: E402
from overbrainer.pipeline.dedup import Deduplicator  # noqa: E402

PROBE_S = 0.005


class Probe:
    """The longest the event loop went between two wake-ups of a 5 ms sleeper, beyond the 5 ms."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.over = 0  # stalls past the 50 ms goal
        self._running = True

    async def run(self) -> None:
        while self._running:
            began = time.perf_counter()
            await asyncio.sleep(PROBE_S)
            stall = time.perf_counter() - began - PROBE_S
            self.worst = max(self.worst, stall)
            self.over += stall > 0.05

    def stop(self) -> None:
        self._running = False


class Embedder:
    """Random vectors, as lists (the Python floats a provider's JSON gives) or arrays; the
    CPU it spends is counted apart."""

    def __init__(self, dims: int, as_lists: bool) -> None:
        self.rng = np.random.default_rng(7)
        self.dims = dims
        self.as_lists = as_lists
        self.cpu = 0.0

    async def __call__(self, texts: list[str]) -> Any:
        began = time.process_time()
        vectors = self.rng.standard_normal((len(texts), self.dims), dtype=np.float32)
        out = vectors.tolist() if self.as_lists else vectors
        self.cpu += time.process_time() - began
        return out


def texts_unique(start: int, count: int) -> list[str]:
    return [f"question {n} asks about item{n} and more" for n in range(start, start + count)]


IDLE_PROBE = f"""
import asyncio, sys, time
sys.path.insert(0, {str(ROOT)!r})
from benchmarks.dedup import Probe
async def main():
    probe = Probe()
    task = asyncio.create_task(probe.run())
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    probe.stop()
    await task
    print(probe.worst, probe.over)
asyncio.run(main())
"""
"""The probe alone in a process of its own, until its standard input closes: how long this
machine's load keeps a loop from running while the fill runs beside it."""


async def fill(
    dedup: Any, embedder: Embedder, total: int, batch: int, every: int
) -> tuple[float, Probe]:
    """Admit ``total`` questions ``batch`` at a time; progress every ``every``."""
    probe = Probe()
    task = asyncio.create_task(probe.run())
    gc.freeze()  # as the questions stage does: what was held before is never walked again
    began = time.process_time()
    for start in range(0, total, batch):
        admitted, _ = await dedup.admit(texts_unique(start, batch), batch)
        assert len(admitted) == batch
        if every and (start + batch) % every == 0:
            spent = time.process_time() - began - embedder.cpu
            stall = probe.worst * 1e3
            print(f"  {start + batch:>7} held: {spent:6.1f} s CPU, loop stall {stall:.0f} ms")
    cpu = time.process_time() - began - embedder.cpu
    gc.unfreeze()
    probe.stop()
    await task
    return cpu, probe


async def one_batch_stall(dedup: Any, texts: list[str]) -> tuple[float, float]:
    """CPU and loop stall of one admit."""
    probe = Probe()
    task = asyncio.create_task(probe.run())
    await asyncio.sleep(PROBE_S * 2)
    began = time.process_time()
    await dedup.admit(texts, len(texts))
    cpu = time.process_time() - began
    await asyncio.sleep(PROBE_S * 2)
    probe.stop()
    await task
    return cpu, probe.worst


def embedding(args: argparse.Namespace) -> None:
    print(f"embedding dedup: {args.questions} questions of one topic, {args.dims} dims, "
          f"batches of {args.batch}")
    # Baseline: the pure-Python one at 2,000 held vectors, one batch.
    held = 2000
    for name, kind in (("pure Python (before)", Reference), ("now", Deduplicator)):
        embedder = Embedder(args.dims, as_lists=True)
        dedup = kind(0.8, embedder, 0.9)
        dedup.seed(texts_unique(0, held))
        asyncio.run(dedup.admit(texts_unique(held, 1), 1))  # embeds the held texts
        cpu, stall = asyncio.run(one_batch_stall(dedup, texts_unique(held + 1, args.batch)))
        print(f"  {name}: one batch at {held} held: {cpu * 1e3:.0f} ms CPU, "
              f"loop stall {stall * 1e3:.0f} ms")
        if kind is Reference:
            before = stall
        else:
            print(f"  loop stall now / before: {stall / before:.3f}")
    crossover(args.dims, args.batch)
    embedder = Embedder(args.dims, as_lists=False)
    dedup = Deduplicator(0.8, embedder, 0.9)
    every = max(args.questions // 10, args.batch)
    idle = subprocess.Popen(
        [sys.executable, "-c", IDLE_PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    cpu, probe = asyncio.run(fill(dedup, embedder, args.questions, args.batch, every))
    idle_worst, idle_over = idle.communicate("")[0].split()
    print(
        f"  {args.questions} questions: dedup CPU {cpu:.1f} s ({cpu / 60:.2f} of the 60 s goal), "
        f"longest loop stall {probe.worst * 1e3:.0f} ms, {probe.over} stalls over 50 ms; "
        f"the probe alone in a process beside it (this machine's load): longest "
        f"{float(idle_worst) * 1e3:.0f} ms, {idle_over} over 50 ms"
    )
    rate = sgemm_rate(args.dims, args.batch)
    floor = args.questions**2 / 2 * args.dims * 2 / rate
    print(f"  floor: every pair compared once is {args.questions**2 / 2 * args.dims:.2g} "
          f"multiply-adds; this machine's float32 matrix product ({args.batch} columns) runs at "
          f"{rate / 1e9:.1f} GFLOP/s: at least {floor:.0f} s")


def crossover(dims: int, batch: int) -> None:
    """CPU of one batch's screen and admission, exact against the graph, by rows held."""
    rng = np.random.default_rng(5)
    for held in (250, 500, 1000, 2000, 4000, 16000):
        rows = vectors.Vectors.units(rng.standard_normal((held + 20 * batch, dims), np.float32))
        figures = []
        for graph in (False, True):
            screen = vectors.Vectors()
            screen.append(rows[:held])
            if graph:
                saved, vectors.EXACT_UP_TO = vectors.EXACT_UP_TO, 0
                while screen.graph_behind:
                    screen.add_to_graph()
            began = time.process_time()
            for start in range(held, held + 20 * batch, batch):
                screen.closest(rows[start : start + batch])
                screen.append(rows[start : start + batch])
                while screen.graph_behind:
                    screen.add_to_graph()
            figures.append((time.process_time() - began) / 20)
            if graph:
                vectors.EXACT_UP_TO = saved
        exact, graph = figures
        print(f"  a batch at {held:>5} held: exact {exact * 1e3:5.1f} ms CPU, graph "
              f"{graph * 1e3:5.1f} ms ({graph / exact:.2f}x)")


def labelled(args: argparse.Namespace) -> None:
    topic = LabelledTopic(args.labelled, args.dims)
    print(f"labelled set: {args.labelled} questions, {args.dims} dims, threshold 0.9")
    decisions = []
    for name, exact_up_to in (("exact", 10**12), ("graph", vectors.EXACT_UP_TO)):
        saved, vectors.EXACT_UP_TO = vectors.EXACT_UP_TO, exact_up_to
        began = time.process_time()
        decisions.append(asyncio.run(screen(topic, args.labelled, args.batch)))
        vectors.EXACT_UP_TO = saved
        print(f"  {name}: {sum(decisions[-1].values())} kept, "
              f"{time.process_time() - began:.1f} s CPU")
    exact, graph = decisions
    same = sum(exact[text] == graph[text] for text in exact)
    slipped = sum(graph[text] and not exact[text] for text in exact)
    print(f"  same decision for {same / len(exact):.2%} of questions (goal 99%); "
          f"{slipped} near-duplicates the graph missed were kept")


async def screen(topic: LabelledTopic, count: int, batch: int) -> dict[str, bool]:
    """Whether each question of ``topic`` was kept, screened ``batch`` at a time."""
    dedup = Deduplicator(1.0, topic.embed, 0.9)
    kept: dict[str, bool] = {}
    for start in range(0, count, batch):
        admitted, rejected = await dedup.admit(topic.texts[start : start + batch], batch)
        kept |= dict.fromkeys(admitted, True) | {text: False for text, _ in rejected}
    return kept


def sgemm_rate(dims: int, batch: int) -> float:
    rows = np.random.default_rng(1).standard_normal((20_000, dims), dtype=np.float32)
    columns = np.random.default_rng(2).standard_normal((batch, dims), dtype=np.float32)
    began = time.process_time()
    for _ in range(10):
        (rows @ columns.T).max(axis=0)
    return 10 * 2 * rows.shape[0] * dims * batch / (time.process_time() - began)


def template_texts(rng: random.Random, count: int) -> list[str]:
    words = [f"w{n}" for n in range(2000)]
    return [
        f"what is the best way to {rng.choice(words)} {rng.choice(words)} in {rng.choice(words)}"
        for _ in range(count)
    ]


def small_vocabulary_texts(rng: random.Random, count: int) -> list[str]:
    words = [f"v{n}" for n in range(30)]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(6, 12))) for _ in range(count)]


def lexical(args: argparse.Namespace) -> None:
    cases: dict[str, Callable[[random.Random, int], list[str]]] = {
        "a shared template": template_texts,
        "a 30-word vocabulary": small_vocabulary_texts,
    }
    print(f"lexical dedup (threshold 0.8), {args.lexical_held} held, batches of {args.batch}")
    for case, make in cases.items():
        rng = random.Random(3)
        held = make(rng, args.lexical_held)
        batches = [make(rng, args.batch) for _ in range(args.lexical_batches)]
        figures = {}
        for name, kind in (("before", Reference), ("now", Deduplicator)):
            dedup = kind(0.8)
            dedup.seed(held)
            asyncio.run(dedup.admit([], 0))  # indexes what was seeded: not in the figures
            cpus, stalls = [], []
            for texts in batches:
                cpu, stall = asyncio.run(one_batch_stall(dedup, texts))
                cpus.append(cpu)
                stalls.append(stall)
            figures[name] = (sum(cpus) / len(cpus), max(stalls))
        (cpu_before, stall_before), (cpu_now, stall_now) = figures["before"], figures["now"]
        print(f"  {case}: CPU a batch {cpu_now * 1e3:.1f} ms ({cpu_now / cpu_before:.3f} of "
              f"before, {cpu_before * 1e3:.1f} ms); longest loop stall {stall_now * 1e3:.0f} ms "
              f"(before {stall_before * 1e3:.0f} ms); at 100k a topic, about "
              f"{cpu_now * 100_000 / args.batch / 2:.0f} s CPU to fill it")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--labelled", type=int, default=20_000)
    parser.add_argument("--lexical-held", type=int, default=100_000)
    parser.add_argument("--lexical-batches", type=int, default=20)
    parser.add_argument("--skip-embedding", action="store_true")
    parser.add_argument("--skip-lexical", action="store_true")
    args = parser.parse_args()
    if not args.skip_lexical:
        lexical(args)
    if not args.skip_embedding:
        embedding(args)
        labelled(args)


if __name__ == "__main__":
    main()
