"""Okapi BM25, the one scorer of every index of holon's search.

Episode selection (:class:`holon.search.EpisodeIndex`) and memory search
(:class:`holon.search.MemorySearch`) keep postings as flat ``doc, tf, doc, tf, ...``
integer pairs (:data:`Postings`) and add up the same per-term weights
(:func:`add_bm25`, :func:`bm25_idf`); they differ only in what they do with the sums.
"""

from __future__ import annotations

import math
from array import array
from typing import Final, TypeAlias

__all__ = ["BM25_B", "BM25_K1", "Postings", "add_bm25", "bm25_idf"]

#: Okapi BM25's parameters: the one pair every index of holon scores with (episode
#: selection and memory search), the usual defaults.
BM25_K1: Final = 1.2
BM25_B: Final = 0.75

Postings: TypeAlias = "array[int] | memoryview"
"""Flat ``doc, tf, doc, tf, ...`` pairs of one term, in document order."""


def bm25_idf(df: int, n: int) -> float:
    """BM25's weight of a term found in ``df`` of ``n`` documents (the non-negative idf)."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def add_bm25(out: dict[int, float], postings: Postings, idf: float, lengths: array[int], avg: float) -> None:
    """Add one term's BM25 weight to the score in ``out`` of each document in its ``postings``.

    The one scorer of every index here: episode selection and memory search add up the
    same per-term weights, in the caller's term order (so floating-point sums are
    reproducible), and differ only in what they do with the sums.
    """
    get = out.get
    scan = iter(postings)
    for doc, tf in zip(scan, scan, strict=True):
        norm = tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * lengths[doc] / avg))
        out[doc] = get(doc, 0.0) + idf * norm
