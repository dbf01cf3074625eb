"""The deduplicator against its pure-Python predecessor (tests/pipeline/reference_dedup.py):
the same texts admitted and rejected, for the same reasons, on generated topics full of
near-duplicates, with and without an embedder."""

from __future__ import annotations

import asyncio
import hashlib
import random

import pytest
from tests.pipeline.reference_dedup import Deduplicator as Reference

from overbrainer.pipeline.dedup import Deduplicator

WORDS = (
    "what", "how", "why", "when", "does", "is", "the", "a", "of", "in", "model", "training",
    "loss", "rate", "learning", "data", "set", "batch", "size", "layer", "weight", "gradient",
    "token", "attention", "head", "memory", "GPU", "CPU",
)  # fmt: skip


def generated(seed: int, count: int) -> list[str]:
    """Questions drawn from a small vocabulary, many of them variants of earlier ones."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(count):
        if texts and rng.random() < 0.4:
            words = rng.choice(texts).split()
            words[rng.randrange(len(words))] = rng.choice(WORDS)
            if rng.random() < 0.5:
                words.append(rng.choice(WORDS))
        else:
            words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
        texts.append(" ".join(words) + rng.choice(["?", "", " ?", "!"]))
    texts.append("")
    texts.append("?!")
    return texts


async def embed(texts: list[str]) -> list[list[float]]:
    """Bag-of-words vectors (similar texts, close vectors), one zero vector for a text of
    no known word."""
    vectors = []
    for text in texts:
        vector = [0.0] * 24
        for word in text.lower().split():
            digest = hashlib.sha256(word.strip("?!").encode()).digest()
            vector[digest[0] % 24] += 1.0 + digest[1] / 255
        vectors.append(vector)
    return vectors


def run(dedup, batches: list[list[str]], limit: int):
    async def go():
        return [await dedup.admit(batch, limit) for batch in batches]

    return asyncio.run(go())


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.8, 1.0])
@pytest.mark.parametrize("with_embedder", [False, True])
def test_the_same_results_as_the_pure_python_deduplicator(seed, threshold, with_embedder):
    texts = generated(seed, 400)
    seeded, rest = texts[:60], texts[60:]
    batches = [rest[i : i + 10] for i in range(0, len(rest), 10)]
    results = []
    for kind in (Reference, Deduplicator):
        dedup = kind(threshold, embed if with_embedder else None, 0.92)
        dedup.seed(seeded)
        results.append(run(dedup, batches, limit=7))
    assert results[0] == results[1]
    assert any(rejected for _, rejected in results[1])
    assert any(admitted for admitted, _ in results[1])


def test_texts_seeded_after_vectors_were_made_are_embedded_at_the_next_batch():
    results = []
    for kind in (Reference, Deduplicator):
        dedup = kind(0.9, embed, 0.8)
        first = run(dedup, [["how does the learning rate work", "what is a gradient"]], 5)
        dedup.seed(["why is the batch size large"])
        second = run(dedup, [["why is batch size large", "what is attention head memory"]], 5)
        results.append((first, second))
    assert results[0] == results[1]
    assert results[1][1][0][1] == [("why is batch size large", "embedding")]
