"""Near-duplicate questions: lexical Jaccard over word bigrams, then embedding cosine.

One deduplicator per topic holds every text the topic already has (stored or rejected) and
admits a batch of candidates at a time. The screening runs on a worker thread, never on the
event loop: at 100,000 questions a topic it is seconds of work a batch.

Lexical matching is exact: an inverted index of bigrams, searched through the rarest
bigrams of a candidate only (a text sharing a Jaccard of ``t`` with it shares at least
``t * len`` of its bigrams, so at least one of its ``len - t * len + 1`` rarest), then the
exact Jaccard of each text found. Embedding vectors are screened by
``overbrainer.pipeline.vectors``: exact cosines, the candidates found by a
nearest-neighbour graph once a topic holds thousands.
"""

from __future__ import annotations

import asyncio
import math
import struct
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from itertools import pairwise
from typing import TYPE_CHECKING

from overbrainer.pipeline.vectors import Vectors

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

Embed = Callable[[list[str]], Awaitable[list[list[float]]]]
"""Vectors for texts, in order."""

LEXICAL = "lexical"
EMBEDDING = "embedding"
_SLACK = 1e-9
"""Keeps the rarest-bigrams bound on the safe side of float rounding."""
SHARDS = 256
"""Dicts the bigram index is spread over (see ``Deduplicator.__init__``)."""
_PACK = struct.Struct("I").pack
"""A text's number in a posting: an unsigned 32-bit integer, native order (``"I"``)."""


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
        # Held as tuples of strings and bytearrays of ids, which the garbage collector
        # does not track (arrays it does): at 100,000 texts, sets, lists and then arrays
        # made each full collection a loop stall of 70-250 ms.
        self._grams: list[tuple[str, ...]] = []
        # The bigram index in SHARDS dicts by hash: a dict grows by rehashing all it holds
        # at once, with the GIL held whichever thread adds; the ~350,000 bigrams of
        # 87,000 questions in one dict made that step tens of ms of the loop's time.
        self._index: list[dict[str, bytearray]] = [defaultdict(bytearray) for _ in range(SHARDS)]
        self._vectors = Vectors()  # of _texts[: _vectors.count]
        self._pending: list[str] = []  # seeded, not yet indexed

    def seed(self, texts: Iterable[str]) -> None:
        """Texts already kept or rejected: candidates like them are rejected. Only listed
        here, which is cheap on the event loop; they are indexed on the worker thread at
        the next ``admit`` (100,000 of them are a second of work)."""
        self._pending.extend(texts)

    def _index_pending(self) -> None:
        pending, self._pending = self._pending, []
        for text in pending:
            grams = bigrams(text)
            if grams:
                self._add(text, grams)

    async def admit(
        self, candidates: list[str], limit: int
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """At most ``limit`` of ``candidates`` to keep, in order, and the rejected ones with
        why (``lexical`` or ``embedding``). Texts with no word are dropped.

        Calls for one deduplicator must not overlap (the questions stage holds a lock a
        topic): the screening reads what the previous call added.
        """
        survivors, rejected = await asyncio.to_thread(self._screen_lexical, candidates)
        units = None
        if self._embed is not None and survivors:
            missing = self._texts[self._vectors.count :]
            if missing:
                held = await self._embed(missing)
                await asyncio.to_thread(lambda: self._vectors.append(Vectors.units(held)))
            while self._vectors.graph_behind:
                await asyncio.to_thread(self._vectors.add_to_graph)
            found = await self._embed([text for text, _ in survivors])
            kept, units = await asyncio.to_thread(self._screen_vectors, found)
            pairs = list(zip(survivors, kept, strict=True))
            rejected += [(text, EMBEDDING) for (text, _), keep in pairs if not keep]
            survivors = [survivor for survivor, keep in pairs if keep]
        admitted = survivors[:limit]
        for text, grams in admitted:
            self._add(text, grams)
        if units is not None and admitted:
            # Growing the matrix copies it: on the worker thread too.
            await asyncio.to_thread(self._vectors.append, units[: len(admitted)])
        return [text for text, _ in admitted], rejected

    def _screen_lexical(
        self, candidates: list[str]
    ) -> tuple[list[tuple[str, frozenset[str]]], list[tuple[str, str]]]:
        self._index_pending()
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
        return survivors, rejected

    def _screen_vectors(
        self, found: list[list[float]]
    ) -> tuple[list[bool], npt.NDArray[np.float32]]:
        """Which vectors are unlike the held ones and the kept ones before them, and the
        kept ones as unit rows, in order."""
        units = Vectors.units(found)
        closest = self._vectors.closest(units)
        kept: list[bool] = []
        rows: list[int] = []
        for number, best in enumerate(closest):
            keep = bool(best < self.embedding_threshold)
            if keep and rows:
                keep = bool((units[rows] @ units[number]).max() < self.embedding_threshold)
            kept.append(keep)
            if keep:
                rows.append(number)
        return kept, units[rows]

    def _lexical_match(self, grams: frozenset[str]) -> bool:
        size = len(grams)
        # A match shares at least `needed` bigrams, so one of the `size - needed + 1`
        # rarest: only the texts holding those are measured.
        needed = max(1, math.ceil(self.threshold * size - _SLACK))
        index = self._index
        postings = sorted((index[hash(gram) % SHARDS].get(gram, b"") for gram in grams), key=len)
        found: set[int] = set()
        for posting in postings[: size - needed + 1]:
            found.update(memoryview(posting).cast("I"))
        for number in found:
            other = self._grams[number]
            shared = len(grams.intersection(other))
            if shared / (size + len(other) - shared) >= self.threshold:
                return True
        return False

    def _add(self, text: str, grams: frozenset[str]) -> None:
        number = len(self._texts)
        self._texts.append(text)
        self._grams.append(tuple(grams))
        index = self._index
        packed = _PACK(number)
        for gram in grams:
            index[hash(gram) % SHARDS][gram] += packed
