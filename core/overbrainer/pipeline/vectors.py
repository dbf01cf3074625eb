"""The embedding vectors a topic holds, and the highest cosine of a new one to them.

Vectors are the unit rows of one float32 matrix: every cosine that decides anything is an
exact product of two of its rows. Up to ``EXACT_UP_TO`` rows a batch is one matrix product
against all of them (cheapest there, and exact). Past that, the all-pairs product grows with
the square of the topic (25 min of CPU at 100,000 questions), so an approximate
nearest-neighbour graph (usearch's HNSW, over int8 copies of the rows) proposes
``CANDIDATES`` rows per vector and the exact cosine is taken with those only. The graph can
miss a close row, never invent one: a vector is only ever judged close on an exact cosine.
Rows not yet in the graph are compared exactly as well, so the graph may lag behind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

EXACT_UP_TO = 1000
"""Rows held before the graph is built: under it one matrix product with every row costs
at most a few ms a batch and is exact (benchmarks/dedup.py measures the crossover)."""
CANDIDATES = 16
"""Rows the graph proposes per vector, each then checked exactly."""
CHUNK = 256
"""Rows added to the graph in one step (one worker-thread call: the loop runs between).
usearch holds the GIL while it adds: 256 rows are a few ms of it, 2,048 were 30 ms and
more of the loop's time once the machine is loaded."""
CONNECTIVITY = 8
EXPANSION_ADD = 32
EXPANSION_SEARCH = 48
"""The graph's shape, measured in benchmarks/dedup.py: agreement with the exact screen on
its labelled set against CPU at 100,000 questions."""
GRAPH_DIMS = 256
"""The graph holds a sketch of the rows in about this many dimensions: each of a row's
components, its sign flipped at random, is added into one of them (a random projection
that is sums only: no matrix product, whose BLAS threads would spin on every small one)."""
_CLIP_QUANTILE = 0.999
"""int8 copies scale this quantile of the components' magnitudes to 127 (the rest clip)."""


class Vectors:
    """Unit vectors as the rows of one growing float32 matrix, with a graph over them once
    there are many."""

    def __init__(self) -> None:
        self.count = 0
        self._rows: npt.NDArray[np.float32] | None = None
        self._graph: Any = None  # usearch.index.Index over rows [: self._graphed]
        self._graphed = 0
        self._scale = 1.0
        self._sketch: tuple[npt.NDArray[np.intp], npt.NDArray[np.float32], int] | None = None

    @staticmethod
    def units(vectors: Any) -> npt.NDArray[np.float32]:
        """``vectors`` as unit rows (a zero vector stays zero: it is like nothing)."""
        import numpy as np

        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2:
            matrix = matrix.reshape(len(vectors), -1)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        norms[norms == 0] = 1
        return matrix / norms

    def append(self, units: npt.NDArray[np.float32]) -> None:
        import numpy as np

        if not len(units):
            return
        self._check(units)
        if self._rows is None or self._rows.shape[1] != units.shape[1]:
            self._rows = np.empty((max(64, len(units)), units.shape[1]), dtype=np.float32)
        needed = self.count + len(units)
        if needed > len(self._rows):
            grown = np.empty((max(needed, 2 * len(self._rows)), self._rows.shape[1]), np.float32)
            grown[: self.count] = self._rows[: self.count]
            self._rows = grown
        self._rows[self.count : needed] = units
        self.count = needed

    @property
    def graph_behind(self) -> bool:
        """Whether rows are due in the graph (there are enough rows to want one)."""
        return self.count >= EXACT_UP_TO and self._graphed < self.count

    def add_to_graph(self) -> None:
        """Adds up to ``CHUNK`` rows to the graph; makes the graph first, in a step of its
        own, if there is none (loading usearch holds the GIL for tens of ms: not on top of
        a chunk)."""
        import numpy as np

        assert self._rows is not None
        if self._graph is None:
            from usearch.index import Index

            dims = self._rows.shape[1]
            group = dims // GRAPH_DIMS
            if group > 1:
                # Seeded: the same rows make the same graph on every run.
                rng = np.random.default_rng(0)
                order = rng.permutation(dims)[: group * (dims // group)]
                signs = rng.choice(np.array([-1, 1], dtype=np.float32), len(order))
                self._sketch = (order, signs, group)
            sample = np.abs(self._projected(self._rows[: min(self.count, 4096)]))
            self._scale = 127 / max(float(np.quantile(sample, _CLIP_QUANTILE)), 1e-12)
            self._graph = Index(
                ndim=sample.shape[1],
                metric="ip",
                dtype="i8",
                connectivity=CONNECTIVITY,
                expansion_add=EXPANSION_ADD,
                expansion_search=EXPANSION_SEARCH,
            )
            return
        end = min(self.count, self._graphed + CHUNK)
        keys = np.arange(self._graphed, end, dtype=np.uint64)
        self._graph.add(keys, self._int8(self._rows[self._graphed : end]), threads=1)
        self._graphed = end

    def closest(self, units: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """The highest cosine of each of ``units`` to a held vector the screen finds (-inf
        with none): every held row while the graph is not built, else the graph's
        candidates and the rows it does not hold yet."""
        import numpy as np

        best = np.full(len(units), -np.inf, dtype=np.float32)
        if self._rows is None or not self.count or not len(units):
            return best
        self._check(units)
        if self._graphed:
            best = self._closest_candidates(units)
        if self._graphed < self.count:
            tail = self._rows[self._graphed : self.count] @ units.T
            best = np.maximum(best, tail.max(axis=0))
        return best

    def _check(self, units: npt.NDArray[np.float32]) -> None:
        if self._rows is not None and self.count and self._rows.shape[1] != units.shape[1]:
            raise ValueError(
                f"the embedder answered {units.shape[1]} dimensions, "
                f"after {self._rows.shape[1]} before"
            )

    def _closest_candidates(self, units: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        import numpy as np

        assert self._rows is not None
        found = self._graph.search(self._int8(units), CANDIDATES, threads=1)
        keys = np.asarray(found.keys, dtype=np.int64).reshape(len(units), -1)
        counts = np.asarray(getattr(found, "counts", [len(found.keys)])).reshape(-1, 1)
        valid = np.arange(keys.shape[1]) < counts
        if not keys.shape[1]:
            return np.full(len(units), -np.inf, dtype=np.float32)
        keys = np.where(valid, keys, 0)
        cosines = np.einsum("nkd,nd->nk", self._rows[keys], units)
        result: npt.NDArray[np.float32] = np.where(valid, cosines, -np.inf).max(axis=1)
        return result

    def _projected(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        if self._sketch is None:
            return rows
        order, signs, group = self._sketch
        signed = rows[:, order] * signs
        sketch: npt.NDArray[np.float32] = signed.reshape(len(rows), -1, group).sum(axis=2)
        return sketch

    def _int8(self, rows: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
        import numpy as np

        scaled = self._projected(rows) * self._scale
        return np.ascontiguousarray(np.clip(np.rint(scaled), -127, 127), dtype=np.int8)
