"""Which archived episodes a prompt shows: the relevant ones (:func:`select_episodes`), and
the previous prompt's again while they can be kept (:func:`sticky_selection`).

The selection is part of the cacheable prefix in the ``rfc`` layout, and it comes right
before the history in the ``recitation`` one: it changes only when it must (the rules are
:func:`sticky_selection`'s), and the work of a selection is bounded whatever the size of
the archive (:func:`select_episodes`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Final, TypeAlias

import holon.records as r
from holon.context.inputs import ContextInputs
from holon.context.search import EpisodeIndex, terms

__all__ = ["select_episodes", "sticky_selection"]

# Structural relevance next to BM25: an episode of the active work item, or one that
# touched a working-set file, is relevant even when few words match.
_SAME_WORK_BONUS: Final = 2.0
_SHARED_FILE_BONUS: Final = 1.0
_SHARED_FILE_MAX: Final = 3


def _window_floor(inputs: ContextInputs) -> int | None:
    seqs = [m.seq for m in inputs.messages] + [b.seq for b in inputs.briefs]
    seqs.extend(s for ex in inputs.tools for s in ex.seqs)
    return min(seqs) if seqs else None


def select_episodes(
    inputs: ContextInputs, index: EpisodeIndex, *, limit: int, max_postings: int | None = None
) -> list[r.ContextEpisodeRecord]:
    """Relevant archived episodes, best first.

    Candidates are episodes that end before the recent window starts, except those of
    abandoned work (abandoned when its latest episode was finalized, or among the recently
    finished items) unless the current input names the work item. Score = BM25 of
    the episode's structured text against the current input, the active objective,
    scope and working-set files, plus structural matches (same work item, shared
    files, each counted once). Zero-relevance episodes are never selected; ties go to
    the more recent episode, then the lower id.

    The work is bounded whatever the archive's size: the query reads at most
    ``max_postings`` postings in all, rarest terms first (:meth:`EpisodeIndex.scores`),
    and structural matches are looked up among the newest ``max_postings`` episodes.
    Of those candidates, the ones that cannot reach the best ``limit`` are skipped
    without changing the result.
    """
    if limit <= 0 or len(index) == 0:
        return []
    scores = index.scores(terms(_query(inputs)), max_postings=max_postings)
    ranking = _Ranking(inputs, index)
    kept, top = _by_words(scores, ranking, limit)
    kept.extend(_by_structure(index, scores, ranking, top, limit=limit, max_postings=max_postings))
    kept.sort(key=lambda t: t[:3])
    return [t[3] for t in kept[:limit]]


def _query(inputs: ContextInputs) -> str:
    """What the episodes are scored against: the active objective, delivery target and scope,
    the working-set files and the current input's start."""
    s = inputs.snapshot
    query_parts = [
        s.objective or "",
        s.delivery_target or "",
        *s.scope_constraints,
        *(f.path for f in s.files),
    ]
    if inputs.current_input is not None:
        query_parts.append(inputs.current_input.text[:4000])
    return "\n".join(query_parts)


class _Ranking:
    """How one selection ranks a candidate: whether it is eligible, its score, and the most
    its structural matches can add (the bound that lets the rest be skipped)."""

    def __init__(self, inputs: ContextInputs, index: EpisodeIndex) -> None:
        s = inputs.snapshot
        self._index = index
        self._floor = _window_floor(inputs)
        self.files = {f.path for f in s.files}
        self.active = s.active_work_item_id
        self._abandoned = _abandoned(inputs, index)
        # Asked once per work item, not per episode: most candidates share a few items.
        self._gone: dict[str, bool] = {}

    def ranked(self, doc: int, relevance: float) -> _Ranked | None:
        """A candidate's ranking key, or None when it is not eligible or has no relevance."""
        episode = self._index.episode_at(doc)
        if self._floor is not None and episode.to_seq >= self._floor:
            return None
        work = episode.work_item_id
        if work is not None:
            out = self._gone.get(work)
            if out is None:
                out = self._gone[work] = self._abandoned(work)
            if out:
                return None
        files, active = self.files, self.active
        # Distinct files: an episode lists each file once (the projection dedups them),
        # and the count must stay within len(files) for the bound below.
        shared = len(files.intersection(episode.touched_files)) if files else 0
        score = _with_bonus(relevance, same_work=active is not None and work == active, shared=shared)
        if score <= 0.0:
            return None
        return (-score, -episode.to_seq, episode.episode_id, episode)

    def best(self, relevance: float) -> float:
        """The most any candidate's structural matches can add: what an episode of the active
        work item that touched every working-set file (up to the cap) gets."""
        return _with_bonus(
            relevance, same_work=self.active is not None, shared=min(len(self.files), _SHARED_FILE_MAX)
        )


def _by_words(scores: dict[int, float], ranking: _Ranking, limit: int) -> tuple[list[_Ranked], list[float]]:
    """The candidates whose words match, best first, up to the first that cannot reach the
    best ``limit``; and the best ``limit`` scores among them (a min-heap).

    Every candidate is ranked as if all were, but those that cannot reach the best
    ``limit`` are never looked at (the result is the same; episode_at, the abandoned
    check and the file matches are what a candidate costs).
    """
    kept: list[_Ranked] = []
    # The best ``limit`` scores so far (a min-heap): a candidate whose best possible score
    # is below the lowest of them cannot be selected.
    top: list[float] = []
    # Matching words first, best first: once one cannot beat the ``limit``-th, neither can
    # the rest (its score is at most its relevance plus the largest bonus).
    for doc in sorted(scores, key=scores.__getitem__, reverse=True):
        relevance = scores[doc]
        if len(top) == limit and ranking.best(relevance) < top[0]:
            break
        key = ranking.ranked(doc, relevance)
        if key is None:
            continue
        kept.append(key)
        if len(top) < limit:
            heapq.heappush(top, -key[0])
        else:
            heapq.heappushpop(top, -key[0])
    return kept, top


def _by_structure(
    index: EpisodeIndex,
    scores: dict[int, float],
    ranking: _Ranking,
    top: list[float],
    *,
    limit: int,
    max_postings: int | None,
) -> list[_Ranked]:
    """The candidates no word matches that share the active work item or a file.

    Structural matches for the active item may have no matching words at all: look
    them up among the most recent episodes as well, most recent first, which ranks
    them among themselves: after ``limit`` with the largest bonus, the rest cannot
    be selected.
    """
    kept: list[_Ranked] = []
    most = ranking.best(0.0)
    if (ranking.active is not None or ranking.files) and (len(top) < limit or most >= top[0]):
        n = len(index)
        full = 0
        for doc in index.recent(n if max_postings is None else max_postings):
            if doc in scores:
                continue
            key = ranking.ranked(doc, 0.0)
            if key is None:
                continue
            kept.append(key)
            if -key[0] == most:
                full += 1
                if full == limit:
                    break
    return kept


# How select_episodes orders candidates: higher score, then later to_seq, then lower id.
_Ranked: TypeAlias = tuple[float, int, int, r.ContextEpisodeRecord]


def _with_bonus(relevance: float, *, same_work: bool, shared: int) -> float:
    """An episode's score: its BM25 relevance plus its structural matches.

    Added in this order for every candidate, so a bound computed the same way with the
    largest bonus is never below a candidate's score (rounding is monotone).
    """
    score = relevance
    if same_work:
        score += _SAME_WORK_BONUS
    return score + _SHARED_FILE_BONUS * min(shared, _SHARED_FILE_MAX)


def _abandoned(inputs: ContextInputs, index: EpisodeIndex) -> Callable[[str | None], bool]:
    """Whether a work item's episodes stay out of the prompt: abandoned, and not named by the input.

    Abandoned work's objective is no longer true, unless the operator brings it up again
    by name; `holon search` still finds it. Asked per candidate episode: the set of every
    abandoned item the index knows grows with the ledger, and building it at every
    selection made each render walk every work item the agent ever had.
    """
    named = inputs.current_input.text if inputs.current_input is not None else ""

    def abandoned(work_item_id: str | None) -> bool:
        if work_item_id is None:
            return False
        gone = work_item_id in inputs.abandoned_work or index.work_state(work_item_id) == "abandoned"
        return gone and work_item_id not in named

    return abandoned


def sticky_selection(
    inputs: ContextInputs, index: EpisodeIndex, recorded: dict[str, Any]
) -> list[r.ContextEpisodeRecord] | None:
    """The previous prompt's episodes again, while they can be kept (``None``: select anew).

    In the rfc layout, while the working-memory revision holds. An epoch bump alone (an
    episode finalized) does not re-select: the new episode ends inside the recent window,
    so it is not a candidate yet, and re-selecting would only reshuffle the choice by the
    latest input's words and re-send everything after the section. Re-selection waits for
    the next revision, which changes the prefix before this section anyway — unless a kept
    episode's work was abandoned meanwhile.

    In the recitation layout the episodes come right before the history and working memory
    after it, so a new revision changes nothing before the history: the selection is kept
    across revisions and epochs, and made again when the history moves its start
    (:func:`_history_moved`), which re-sends everything after the episodes anyway — or
    when a kept episode's work was abandoned.
    """
    prev = inputs.previous
    if prev is None or prev.render_config != recorded:
        return None
    recitation = recorded.get("layout") == "recitation"
    if not recitation and prev.working_memory_revision != inputs.working_memory_revision:
        return None
    found = [index.get(i) for i in prev.episodes]
    kept = [e for e in found if e is not None]
    if recitation or prev.compression_epoch != inputs.compression_epoch:
        abandoned = _abandoned(inputs, index)
        if any(abandoned(e.work_item_id) for e in kept):
            return None
    return kept
