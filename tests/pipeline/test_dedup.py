"""The deduplicator against its pure-Python predecessor (tests/pipeline/reference_dedup.py):
the same texts admitted and rejected, for the same reasons, on generated topics full of
near-duplicates, with and without an embedder."""

from __future__ import annotations

import asyncio
import hashlib
import random

import pytest
from tests.pipeline.labelled_vectors import LabelledTopic
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


@pytest.fixture
def small_graph(monkeypatch):
    """The graph from 200 held vectors on, added 128 rows a step: the graph's path on sets
    small enough for a test."""
    from overbrainer.pipeline import vectors

    monkeypatch.setattr(vectors, "EXACT_UP_TO", 200)
    monkeypatch.setattr(vectors, "CHUNK", 128)


def screen_all(dedup, texts: list[str], batch: int = 10) -> list[tuple[list[str], list]]:
    return run(dedup, [texts[i : i + batch] for i in range(0, len(texts), batch)], batch)


def kept_by_text(results) -> dict[str, bool]:
    kept: dict[str, bool] = {}
    for admitted, rejected in results:
        kept |= dict.fromkeys(admitted, True) | {text: False for text, _ in rejected}
    return kept


def test_the_graph_screen_agrees_with_the_exact_one_on_the_labelled_set(small_graph):
    from overbrainer.pipeline import vectors

    topic = LabelledTopic(3000, 768)
    graph = Deduplicator(1.0, topic.embed, 0.9)
    with_graph = kept_by_text(screen_all(graph, topic.texts))
    assert graph._vectors._graphed > 2000  # the graph did the work
    vectors.EXACT_UP_TO = 10**9
    exact = Deduplicator(1.0, topic.embed, 0.9)
    exact_kept = kept_by_text(screen_all(exact, topic.texts))
    assert exact._vectors._graphed == 0
    same = sum(with_graph[text] == exact_kept[text] for text in topic.texts)
    assert same >= 0.99 * len(topic.texts)
    assert 0.05 * len(topic.texts) < list(exact_kept.values()).count(False)  # duplicates exist


def test_every_text_the_graph_screen_drops_has_an_exact_cosine_at_the_threshold(small_graph):
    import numpy as np

    topic = LabelledTopic(2000, 768, seed=5)
    dedup = Deduplicator(1.0, topic.embed, 0.9)
    held: list[int] = []
    dropped = 0
    for start in range(0, len(topic.texts), 10):
        batch = topic.texts[start : start + 10]
        admitted, rejected = run(dedup, [batch], 10)[0]
        assert admitted == [text for text in batch if text in set(admitted)]  # order kept
        reasons = dict(rejected)
        kept_before: list[int] = []
        for text in batch:
            number = int(text[1:])
            if text in reasons:
                assert reasons[text] == "embedding"
                others = topic.vectors[held + kept_before]
                assert (others @ topic.vectors[number]).max() >= 0.9 - 1e-6, text
                dropped += 1
            else:
                kept_before.append(number)
        held += [int(text[1:]) for text in admitted]
    assert dropped > 100
    assert np.isfinite(topic.vectors).all()


def test_a_resumed_screen_builds_its_graph_from_what_is_held_and_decides_the_same(small_graph):
    topic = LabelledTopic(2400, 768, seed=9)
    first, rest = topic.texts[:1200], topic.texts[1200:]
    straight = Deduplicator(1.0, topic.embed, 0.9)
    before = screen_all(straight, first)
    straight_rest = kept_by_text(screen_all(straight, rest))
    resumed = Deduplicator(1.0, topic.embed, 0.9)
    resumed.seed(text for admitted, _ in before for text in admitted)
    resumed.seed(text for _, rejected in before for text, _ in rejected)
    resumed_rest = kept_by_text(screen_all(resumed, rest))
    assert resumed._vectors._graphed > 1200
    same = sum(straight_rest[text] == resumed_rest[text] for text in rest)
    assert same >= 0.99 * len(rest)
    assert not all(resumed_rest.values())


def test_an_embedder_changing_its_dimensions_is_an_error_that_says_so():
    async def changing(texts: list[str]) -> list[list[float]]:
        changing.calls += 1
        return [[1.0, float(n)] + [0.0] * changing.calls for n in range(len(texts))]

    changing.calls = 0
    dedup = Deduplicator(0.9, changing, 0.9)
    run(dedup, [["how does the learning rate work"]], 5)
    with pytest.raises(ValueError) as raised:
        run(dedup, [["what is a gradient"]], 5)
    assert str(raised.value) == "the embedder answered 4 dimensions, after 3 before"


def test_the_texts_held_are_nothing_a_full_collection_walks():
    """What a deduplicator keeps a text (its bigrams, its postings) is untracked by the
    garbage collector: at 100,000 texts a topic, tracked objects made every full
    collection a stall of the event loop."""
    import gc

    dedup = Deduplicator(0.8)
    dedup.seed(generated(5, 50))
    run(dedup, [[]], 0)  # seeded texts are indexed at the next batch
    gc.collect()
    before = len(gc.get_objects())
    dedup.seed(f"question {n} asks about item{n} and more" for n in range(3000))
    dedup.seed(generated(6, 3000))
    run(dedup, [["a question none of them asks"]], 1)
    gc.collect()
    assert len(gc.get_objects()) - before < 50


def test_a_seeded_text_rejects_its_duplicate_in_the_first_batch():
    dedup = Deduplicator(0.8)
    dedup.seed(iter(["what is the learning rate", "how big is the batch"]))
    [(admitted, rejected)] = run(dedup, [["what is the learning rate?", "why a GPU"]], 5)
    assert admitted == ["why a GPU"]
    assert rejected == [("what is the learning rate?", "lexical")]
