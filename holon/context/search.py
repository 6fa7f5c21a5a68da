"""An incremental BM25 index over archived episodes, for episode selection and `holon search`.

Episodes are added as they are archived (:meth:`EpisodeIndex.add`, O(terms of the
episode)); a query scores only the postings of its own terms. Everything is
deterministic: terms are de-duplicated and sorted before scoring so floating-point
sums happen in one order, and ties are broken by recency (later ``to_seq`` first) then
by episode id.

For the renderer, a query may cap the postings it reads per term to the most recent
``max_postings`` episodes: frequent terms carry little BM25 weight anyway, and the cap
keeps selection cost flat as the archive grows (rare terms, the informative ones, have
short postings and still reach old episodes).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Final

import msgspec

import holon.records as r

__all__ = ["EpisodeHit", "EpisodeIndex", "episode_text", "terms"]

_TERM: Final = re.compile(r"[0-9a-z]+(?:[_-][0-9a-z]+)*")
_STOP: Final = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "from", "has", "have"),
        *("if", "in", "into", "is", "it", "its", "of", "on", "or", "so", "that", "the", "then"),
        *("this", "to", "was", "were", "will", "with", "ok", "done", "none"),
    )
)
_K1: Final = 1.2
_B: Final = 0.75


def terms(text: str) -> list[str]:
    """Lowercased search terms of a text: words, identifiers and path parts, minus stop words.

    ``src/holon/ledger.py`` yields ``src/holon/ledger.py``'s parts *and* the joined
    identifiers (``ledger``, ``py``), so file paths match both whole and by component.
    """
    out: list[str] = []
    for match in _TERM.findall(text.lower()):
        if len(match) > 1 and match not in _STOP:
            out.append(match)
        if "_" in match or "-" in match:
            out.extend(p for p in re.split(r"[_-]", match) if len(p) > 1 and p not in _STOP)
    return out


def episode_text(episode: r.ContextEpisodeRecord) -> str:
    """The structured text of an episode that search matches against."""
    parts: list[str] = []
    for value in (episode.work_item_id, episode.objective, episode.delivery_target):
        if value:
            parts.append(value)
    for group in (
        episode.summary_lines,
        episode.scope_hints,
        episode.touched_files,
        episode.commands,
        episode.verification,
        episode.decisions,
        episode.follow_ups,
        episode.waiting,
    ):
        parts.extend(group)
    return "\n".join(parts)


class EpisodeHit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result: the episode, its BM25 score, and the terms that matched."""

    episode: r.ContextEpisodeRecord
    score: float
    matched: tuple[str, ...]


class EpisodeIndex:
    """BM25 over episodes, appended to as episodes are archived.

    Not thread-safe; one index belongs to one agent's renderer (or one CLI call).
    """

    def __init__(self, episodes: Iterable[r.ContextEpisodeRecord] = ()) -> None:
        self._episodes: list[r.ContextEpisodeRecord] = []
        self._lengths: list[int] = []
        self._postings: dict[str, list[tuple[int, int]]] = {}
        self._total_length = 0
        self._by_id: dict[int, r.ContextEpisodeRecord] = {}
        # Decision id -> its text as the most recently added episode lists it.
        self._decisions: dict[str, str] = {}
        for episode in episodes:
            self.add(episode)

    def __len__(self) -> int:
        return len(self._episodes)

    @property
    def episodes(self) -> tuple[r.ContextEpisodeRecord, ...]:
        """The indexed episodes, in the order they were added."""
        return tuple(self._episodes)

    def add(self, episode: r.ContextEpisodeRecord) -> None:
        """Index one archived episode (adding the same episode id twice is a no-op)."""
        if episode.episode_id in self._by_id:
            return
        doc = len(self._episodes)
        self._by_id[episode.episode_id] = episode
        self._episodes.append(episode)
        counts: dict[str, int] = {}
        for term in terms(episode_text(episode)):
            counts[term] = counts.get(term, 0) + 1
        for term, tf in counts.items():
            self._postings.setdefault(term, []).append((doc, tf))
        length = sum(counts.values())
        self._lengths.append(length)
        self._total_length += length
        for line in episode.decisions:
            did, _, text = line.partition(": ")
            self._decisions[did] = text

    def extend(self, episodes: Iterable[r.ContextEpisodeRecord]) -> None:
        """Index several episodes in order."""
        for episode in episodes:
            self.add(episode)

    def scores(self, query_terms: Iterable[str], *, max_postings: int | None = None) -> dict[int, float]:
        """BM25 score by document position for the given terms (only documents that match)."""
        n = len(self._episodes)
        if n == 0:
            return {}
        avg = self._total_length / n if self._total_length else 1.0
        out: dict[int, float] = {}
        for term in sorted(set(query_terms)):
            postings = self._postings.get(term)
            if not postings:
                continue
            df = len(postings)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            scan = postings if max_postings is None else postings[-max_postings:]
            for doc, tf in scan:
                norm = tf * (_K1 + 1.0) / (tf + _K1 * (1.0 - _B + _B * self._lengths[doc] / avg))
                out[doc] = out.get(doc, 0.0) + idf * norm
        return out

    @property
    def decisions(self) -> dict[str, str]:
        """Decision id → its text in the latest indexed episode that lists it (a copy)."""
        return dict(self._decisions)

    def get(self, episode_id: int) -> r.ContextEpisodeRecord | None:
        """The indexed episode with this id, if any."""
        return self._by_id.get(episode_id)

    def episode_at(self, doc: int) -> r.ContextEpisodeRecord:
        """The episode at a document position returned by :meth:`scores`."""
        return self._episodes[doc]

    def search(self, query: str, *, limit: int = 10) -> list[EpisodeHit]:
        """The best ``limit`` episodes for a free-text query; ties by recency, then id."""
        wanted = sorted(set(terms(query)))
        scored = self.scores(wanted)
        ranked = sorted(
            scored.items(),
            key=lambda item: (-item[1], -self._episodes[item[0]].to_seq, self._episodes[item[0]].episode_id),
        )
        hits = []
        for doc, score in ranked[:limit]:
            episode = self._episodes[doc]
            have = set(terms(episode_text(episode)))
            hits.append(
                EpisodeHit(episode=episode, score=score, matched=tuple(t for t in wanted if t in have))
            )
        return hits
