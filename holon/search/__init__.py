"""Search over what an agent recorded: one tokenizer, one BM25 scorer, two indexes.

- :mod:`holon.search.terms` — the terms every index is built and queried by:
  :func:`terms` (episode selection's words, any script) and :func:`search_terms` (those
  and identifiers kept whole, for memory search).
- :mod:`holon.search.bm25` — :func:`add_bm25` and :func:`bm25_idf`, the one scorer.
- :mod:`holon.search.episodes` — :class:`EpisodeIndex`, the incremental index over
  archived episodes that episode selection (:mod:`holon.context`) and ``holon episodes
  --search`` rank with, saved and restored as bytes beside the runtime's checkpoints.
- :mod:`holon.search.memory` — :class:`MemorySearch`, ranked search over episodes and
  evidence records for ``holon search``, ``Agent.search`` and the model's
  ``holon_search``, and :func:`search_text`, the hits as that tool tells them.

The package is pure (records in, hits out; no clock, randomness or file system) and sits
below the renderer, which uses the episode index: it may import ``holon.records``,
``holon.errors`` and ``holon.projections`` (memory search folds the work items'
records to know which was active), never ``holon.context`` or anything above it
(tests/test_layers.py). Within it, ``terms`` and ``bm25`` import nothing of the package,
``episodes`` both of them, and ``memory`` the three.
"""

from __future__ import annotations

from holon.search.bm25 import BM25_B, BM25_K1, add_bm25, bm25_idf
from holon.search.episodes import EpisodeHit, EpisodeIndex, EpisodeIndexRejected, episode_text
from holon.search.memory import (
    BLOB_INDEXED_CHARS,
    FIELD_WEIGHTS,
    RECENCY,
    BlobText,
    MemoryHit,
    MemorySearch,
    RecordReader,
    evidence_text,
    search_text,
)
from holon.search.terms import STOP_WORDS, fold_positions, search_terms, terms

__all__ = [
    "BLOB_INDEXED_CHARS",
    "BM25_B",
    "BM25_K1",
    "FIELD_WEIGHTS",
    "RECENCY",
    "STOP_WORDS",
    "BlobText",
    "EpisodeHit",
    "EpisodeIndex",
    "EpisodeIndexRejected",
    "MemoryHit",
    "MemorySearch",
    "RecordReader",
    "add_bm25",
    "bm25_idf",
    "episode_text",
    "evidence_text",
    "fold_positions",
    "search_terms",
    "search_text",
    "terms",
]
