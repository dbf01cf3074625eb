"""A labelled topic for the embedding screen: questions in subtopics (siblings at cosines
of 0.64-0.90 to each other) and paraphrases of earlier questions at cosines of 0.84-0.97 to
them, so the 0.9 threshold cuts through both. The exact screen's decisions are the labels;
the screen under test is measured by how many of its decisions agree."""

from __future__ import annotations

import numpy as np


class LabelledTopic:
    """``count`` questions (``q0``, ``q1``...) and the vector of each."""

    def __init__(self, count: int, dims: int, seed: int = 11, family: int = 50) -> None:
        rng = np.random.default_rng(seed)
        centres = unit(rng.standard_normal((max(1, count // family), dims), dtype=np.float32))
        vectors = np.empty((count, dims), dtype=np.float32)
        for n in range(count):
            noise = unit(rng.standard_normal(dims, dtype=np.float32))
            if n and rng.random() < 0.3:
                base, cosine = vectors[rng.integers(n)], rng.uniform(0.84, 0.97)
            else:
                base, cosine = centres[rng.integers(len(centres))], rng.uniform(0.8, 0.95)
            vectors[n] = unit(base + np.sqrt(1 / cosine**2 - 1) * noise)
        self.texts = [f"q{n}" for n in range(count)]
        self.vectors = vectors

    async def embed(self, texts: list[str]) -> np.ndarray:
        return self.vectors[[int(text[1:]) for text in texts]]


def unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
