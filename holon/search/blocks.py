"""Block-max ranking for memory search: score only the blocks of documents that can rank.

Memory search scores a query by adding up its terms' BM25 weights over their postings
(:func:`holon.search.bm25.add_bm25`), one posting at a time in Python. A term in most of a
ledger's documents (a path every tool result prints, a frequent command) has hundreds of
thousands of postings, and a query of such terms took 55-700 ms on the 1M-record benchmark
ledger (docs/benchmarks.md), however few hits it shows.

Documents are grouped into blocks of :data:`BLOCK` consecutive documents. For each
*frequent* term (one in :data:`FREQUENT` documents or more) the index keeps, per block it
occurs in, where its postings for the block start, its highest frequency there and the
shortest length of a document holding it (:class:`TermBlocks`, kept up to date as
documents are added). A query then bounds each block's best score from above: the sum of
its terms' weights at that frequency and length, times the block's highest field weight
and recency prior. It scores whole blocks in the order of their bounds, and stops once the
next block's bound is below the score a window of hits needs (:class:`BlockRanking`).

The hits are exactly those of scoring every posting: a block is left unscored only when no
document in it can reach the window, and a scored block's documents are scored by the same
additions, in the same term order, as a full pass makes, so each score is the same float.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from holon.search.bm25 import bm25_norm

__all__ = [
    "BLOCK",
    "BLOCK_SHIFT",
    "FREQUENT",
    "BlockRanking",
    "Ranking",
    "Scored",
    "TermBlocks",
    "block_bounds",
]

#: Documents per block, as a shift: a block is ``doc >> BLOCK_SHIFT``. Smaller blocks bound
#: tighter and cost more bounds to compute per query; 512 measured best on the 1M ledger.
BLOCK_SHIFT: Final = 9
BLOCK: Final = 1 << BLOCK_SHIFT
#: A term gets block tables once it is in this many documents: a rarer term's postings are
#: read whole per query, which costs less than keeping its tables.
FREQUENT: Final = 1024


class TermBlocks:
    """One frequent term's blocks: for each block it occurs in, ``block, start, max_tf, min_length``.

    ``start`` is the offset in the term's flat postings (``doc, tf, ...``) of its first
    posting in the block; the block's postings end where the next entry's start.
    """

    __slots__ = ("table",)

    def __init__(self, postings: array[int], lengths: array[int]) -> None:
        self.table = array("q")
        for offset in range(0, len(postings), 2):
            doc = postings[offset]
            self.add(doc, postings[offset + 1], lengths[doc], offset)

    def add(self, doc: int, tf: int, length: int, offset: int) -> None:
        """Record the posting of ``doc`` (``tf`` times, ``length`` terms long) at ``offset``."""
        table = self.table
        block = doc >> BLOCK_SHIFT
        if table and table[-4] == block:
            table[-2] = max(table[-2], tf)
            table[-1] = min(table[-1], length)
        else:
            table.extend((block, offset, tf, length))


#: Scores the given postings slices of one block: ``(block, [(term, start, end), ...])`` in
#: the query's term order; returns its documents' ``(index, score)`` items.
BlockScorer = Callable[[int, Sequence[tuple[int, int, int]]], list[tuple[int, float]]]


class Ranking(Protocol):
    """A query's scored documents, as many as a window of the best needs."""

    @property
    def complete(self) -> bool:
        """Whether every document holding a query term is scored."""
        ...

    def scored(self, window: int) -> list[tuple[int, float]]:
        """``(index, score)`` items holding every document among the best ``window``."""
        ...


class Scored:
    """Every document scored at once (no term of the query is frequent)."""

    complete = True

    def __init__(self, items: list[tuple[int, float]]) -> None:
        self.items = items

    def scored(self, window: int) -> list[tuple[int, float]]:
        return self.items


class BlockRanking:
    """A query's documents scored block by block, in the order of the blocks' bounds.

    ``ranked(window)`` scores as many blocks as the best ``window`` documents need: it stops
    when the next block's bound is below the ``window``-th best score so far (ties at that
    score included), so its items hold every document that scores at least as well as that.
    """

    def __init__(
        self, bounds: dict[int, float], slices: dict[int, list[tuple[int, int, int]]], score: BlockScorer
    ) -> None:
        self._heap = [(-bound, block) for block, bound in bounds.items()]
        heapq.heapify(self._heap)
        self._slices = slices
        self._score = score
        #: Every scored document's ``(index, score)``, in the order scored.
        self.items: list[tuple[int, float]] = []
        self._best: list[float] = []  # a min-heap of the best scores, as many as the window
        self._window = 0

    @property
    def complete(self) -> bool:
        """Whether every block holding one of the query's terms is scored."""
        return not self._heap

    def scored(self, window: int) -> list[tuple[int, float]]:
        """The items, scored far enough that every document among the best ``window`` is in them."""
        if window != self._window:
            self._window = window
            self._best = heapq.nlargest(window, (score for _, score in self.items))
            heapq.heapify(self._best)
        heap, best = self._heap, self._best
        while heap:
            floor = best[0] if len(best) >= window else float("-inf")
            if -heap[0][0] < floor:
                break
            _, block = heapq.heappop(heap)
            found = self._score(block, self._slices[block])
            self.items.extend(found)
            for _, score in found:
                if len(best) < window:
                    heapq.heappush(best, score)
                elif score > best[0]:
                    heapq.heapreplace(best, score)
        return self.items


def block_bounds(
    terms: Sequence[tuple[array[int], TermBlocks | None]],
    idfs: Sequence[float],
    lengths: array[int],
    avg: float,
) -> tuple[dict[int, float], dict[int, list[tuple[int, int, int]]]]:
    """Each block's BM25 bound for a query, and the slices of each term's postings in it.

    ``terms`` are the query's terms in its term order: each one's postings and, for a
    frequent term, its blocks. A frequent term's bound in a block is its weight at the
    block's highest frequency and shortest length; a rarer term's postings are read whole
    for the highest weight they give each block. A block's bounds are added in term order,
    as its documents' weights are, so the bound is at least any document's sum.
    """
    bounds: dict[int, float] = {}
    slices: dict[int, list[tuple[int, int, int]]] = {}
    get = bounds.get
    for term, ((postings, blocks), idf) in enumerate(zip(terms, idfs, strict=True)):
        if blocks is not None:
            table, end = blocks.table, len(postings)
            for entry in range(0, len(table), 4):
                block = table[entry]
                stop = table[entry + 5] if entry + 4 < len(table) else end
                bounds[block] = get(block, 0.0) + idf * bm25_norm(table[entry + 2], table[entry + 3], avg)
                slices.setdefault(block, []).append((term, table[entry + 1], stop))
            continue
        best: dict[int, float] = {}
        starts: dict[int, int] = {}
        for offset in range(0, len(postings), 2):
            doc = postings[offset]
            block = doc >> BLOCK_SHIFT
            weight = idf * bm25_norm(postings[offset + 1], lengths[doc], avg)
            if block not in starts:
                starts[block] = offset
                best[block] = weight
            elif weight > best[block]:
                best[block] = weight
        ends = [*list(starts.values())[1:], len(postings)]
        for (block, start), stop in zip(starts.items(), ends, strict=True):
            bounds[block] = get(block, 0.0) + best[block]
            slices.setdefault(block, []).append((term, start, stop))
    return bounds, slices
