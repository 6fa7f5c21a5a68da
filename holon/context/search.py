"""The episode index and its terms, as the renderer imports them: their home is :mod:`holon.search`.

Episode selection ranks archived episodes with :class:`~holon.search.EpisodeIndex`, which
shares its tokenizer and BM25 scorer with memory search; the one search package sits
below the renderer (records in, scores out), and this module names what of it the
renderer's modules use, under the path they were first published at.
"""

from __future__ import annotations

from holon.search.bm25 import BM25_B, BM25_K1, Postings, add_bm25, bm25_idf
from holon.search.episodes import (
    INDEX_FORMAT,
    EpisodeHit,
    EpisodeIndex,
    EpisodeIndexRejected,
    episode_text,
)
from holon.search.terms import STOP_WORDS, fold_positions, terms

__all__ = [
    "BM25_B",
    "BM25_K1",
    "INDEX_FORMAT",
    "STOP_WORDS",
    "EpisodeHit",
    "EpisodeIndex",
    "EpisodeIndexRejected",
    "Postings",
    "add_bm25",
    "bm25_idf",
    "episode_text",
    "fold_positions",
    "terms",
]
