"""The deduplicator as it was before numpy (issue 16): the reference new results must equal.

One deduplicator per topic holds every text the topic already has (stored or rejected) and
admits a batch of candidates at a time.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from itertools import pairwise

Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
"""Vectors for texts, in order."""

LEXICAL = "lexical"
EMBEDDING = "embedding"


def bigrams(text: str) -> frozenset[str]:
    """The word bigrams of ``text`` (lowercased, non-alphanumerics as spaces); a text of
    one word is that word."""
    words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
    if len(words) < 2:
        return frozenset(words)
    return frozenset(f"{a} {b}" for a, b in pairwise(words))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared) if a or b else 1.0


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(map(operator.mul, a, b))


class Deduplicator:
    """Admits texts unlike every text it holds: Jaccard below ``threshold`` and, with
    ``embed``, cosine below ``embedding_threshold``."""

    def __init__(
        self, threshold: float, embed: Embed | None = None, embedding_threshold: float = 1.0
    ) -> None:
        self.threshold = threshold
        self.embedding_threshold = embedding_threshold
        self._embed = embed
        self._texts: list[str] = []
        self._grams: list[frozenset[str]] = []
        self._index: dict[str, list[int]] = defaultdict(list)
        self._vectors: list[list[float]] = []  # of _texts[: len(_vectors)], unit length

    def seed(self, texts: Iterable[str]) -> None:
        """Texts already kept or rejected: candidates like them are rejected."""
        for text in texts:
            grams = bigrams(text)
            if grams:
                self._add(text, grams)

    async def admit(
        self, candidates: list[str], limit: int
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """At most ``limit`` of ``candidates`` to keep, in order, and the rejected ones with
        why (``lexical`` or ``embedding``). Texts with no word are dropped."""
        rejected: list[tuple[str, str]] = []
        survivors: list[tuple[str, frozenset[str]]] = []
        for text in candidates:
            grams = bigrams(text)
            if not grams:
                continue
            if self._lexical_match(grams) or any(
                jaccard(grams, other) >= self.threshold for _, other in survivors
            ):
                rejected.append((text, LEXICAL))
            else:
                survivors.append((text, grams))
        vectors: list[list[float] | None] = [None] * len(survivors)
        if self._embed is not None and survivors:
            await self._embed_held()
            found = [_unit(v) for v in await self._embed([text for text, _ in survivors])]
            kept = []
            vectors = []
            for (text, grams), vector in zip(survivors, found, strict=True):
                if any(
                    _cosine(vector, other) >= self.embedding_threshold
                    for other in [*self._vectors, *(v for v in vectors if v is not None)]
                ):
                    rejected.append((text, EMBEDDING))
                else:
                    kept.append((text, grams))
                    vectors.append(vector)
            survivors = kept
        admitted = []
        for (text, grams), held in list(zip(survivors, vectors, strict=True))[:limit]:
            self._add(text, grams, held)
            admitted.append(text)
        return admitted, rejected

    def _lexical_match(self, grams: frozenset[str]) -> bool:
        shared: dict[int, int] = defaultdict(int)
        for gram in grams:
            for held in self._index.get(gram, ()):
                shared[held] += 1
        return any(
            count / (len(grams) + len(self._grams[held]) - count) >= self.threshold
            for held, count in shared.items()
        )

    async def _embed_held(self) -> None:
        missing = self._texts[len(self._vectors) :]
        if missing and self._embed is not None:
            self._vectors += [_unit(v) for v in await self._embed(missing)]

    def _add(self, text: str, grams: frozenset[str], vector: list[float] | None = None) -> None:
        number = len(self._texts)
        self._texts.append(text)
        self._grams.append(grams)
        for gram in grams:
            self._index[gram].append(number)
        if vector is not None and len(self._vectors) == number:
            self._vectors.append(vector)
