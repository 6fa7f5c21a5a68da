"""Episode index and selection: deterministic BM25, recency tie-break, no zero-relevance picks, refs shown."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.context.render as render_module
import holon.records as r
from holon.context import (
    Budget,
    ContextInputs,
    CurrentInput,
    EpisodeIndex,
    RenderConfig,
    build_context,
    prompt_rendered,
    select_episodes,
)
from holon.context.evidence import window_view
from holon.context.inputs import inputs_from_state
from holon.context.prompt import Prompt
from holon.context.search import terms
from holon.projections import FileRef, MessageEntry, WorkingMemorySnapshot
from holon.search import MemorySearch
from holon.testing import AGENT, run_session
from tests.context_inputs import inputs


def _episode(
    i: int, objective: str, *, files: tuple[str, ...] = (), work: str | None = None
) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=i,
        boundary_reason="turn_cap",
        work_item_id=work,
        first_turn=i * 10,
        last_turn=i * 10 + 9,
        from_seq=i * 100,
        to_seq=i * 100 + 99,
        objective=objective,
        touched_files=files,
        projection_version=1,
    )


EPISODES = [
    _episode(0, "tune the postgres vacuum settings"),
    _episode(1, "write the release notes for version two"),
    _episode(2, "postgres replica lag alerting", files=("ops/alerts.yml",)),
    _episode(3, "postgres replica lag alerting", files=("ops/alerts.yml",)),
    _episode(4, "rename the css classes of the zebra table", work="w-ui"),
]


def test_search_is_bm25_with_recency_then_id_tie_break() -> None:
    index = EpisodeIndex(EPISODES)
    hits = index.search("postgres replica lag")
    assert [h.episode.episode_id for h in hits] == [3, 2, 0]
    assert hits[0].score == hits[1].score  # identical text: the more recent wins the tie
    assert hits[0].matched == ("lag", "postgres", "replica")
    assert index.search("kangaroo") == []


def test_incremental_index_equals_batch_index() -> None:
    batch = EpisodeIndex(EPISODES)
    incremental = EpisodeIndex()
    for e in EPISODES:
        incremental.add(e)
        incremental.add(e)  # re-adding is a no-op
    assert len(incremental) == len(EPISODES)
    assert incremental.scores(["postgres", "lag"]) == batch.scores(["postgres", "lag"])


def test_zero_relevance_episodes_are_never_selected() -> None:
    index = EpisodeIndex(EPISODES)
    snap = WorkingMemorySnapshot(
        active_work_item_id="w9", work_state="active", objective="bake sourdough bread"
    )
    assert select_episodes(inputs(snapshot=snap, current_input=None), index, limit=5) == []


def test_structural_matches_and_window_overlap() -> None:
    index = EpisodeIndex(EPISODES)
    snap = WorkingMemorySnapshot(
        active_work_item_id="w-ui",
        work_state="active",
        objective="fix the dashboard",
        files=(FileRef(path="ops/alerts.yml", seq=1),),
    )
    chosen = select_episodes(inputs(snapshot=snap, current_input=None), index, limit=5)
    assert {e.episode_id for e in chosen} == {2, 3, 4}
    # Episode 4 ends at seq 499: a recent window starting there overlaps it.
    window = (MessageEntry(seq=450, ts=1, turn=1, message=r.Message(role="user", text="hi")),)
    chosen = select_episodes(inputs(snapshot=snap, current_input=None, messages=window), index, limit=5)
    assert 4 not in {e.episode_id for e in chosen}


def test_rendered_episodes_show_their_ref_and_fit_their_sub_budget() -> None:
    snap = WorkingMemorySnapshot(
        active_work_item_id="w1", work_state="active", objective="postgres replica lag"
    )
    budget = Budget(context_window=20_000, episode_share=0.05)
    prompt = build_context(inputs(snapshot=snap, episodes=tuple(EPISODES)), budget)
    section = prompt.section("episodes")
    assert section is not None and section.stability == "agent"
    assert "episode:3 " in section.text and "episode:2 " in section.text
    assert "episode:1 " not in section.text
    assert section.tokens <= int(budget.available * budget.episode_share)
    assert prompt.plan.episodes[:2] == (3, 2)


def _selected(**fields: object) -> tuple[tuple[int, ...], r.PromptRendered]:
    """The episode ids a render selects, and its record (the next render's ``previous``)."""
    # The RFC's layout, where the episodes follow working memory (the recitation layout
    # keeps them until the history moves: tests/test_context_properties.py).
    config = RenderConfig(layout="rfc")
    record = prompt_rendered(build_context(inputs(**fields), _BUDGET, config, index=EpisodeIndex(EPISODES)))
    return record.episodes, record


_BUDGET = Budget(context_window=32_000)
_SNAP = WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="fix the alerting")


def test_selection_is_kept_across_an_epoch_bump_until_the_revision_changes() -> None:
    # An episode finalized (epoch 5 -> 6) and a new input asks about other work: the
    # selection stays, so the prefix up to the history stays byte-identical ...
    lag = CurrentInput(text="replica lag")
    ids, first = _selected(snapshot=_SNAP, compression_epoch=5, current_input=lag)
    assert ids == (3, 2)
    vacuum = CurrentInput(text="now the postgres vacuum settings")
    kept, _ = _selected(snapshot=_SNAP, compression_epoch=6, current_input=vacuum, previous=first)
    assert kept == (3, 2)
    # ... until working memory changes, which changes the prefix before the episodes anyway.
    fresh, _ = _selected(
        snapshot=_SNAP, compression_epoch=6, working_memory_revision=3, current_input=vacuum, previous=first
    )
    assert fresh[0] == 0


def test_an_epoch_bump_reselects_when_a_kept_episode_was_abandoned() -> None:
    zebra = CurrentInput(text="the zebra table css classes")
    ids, first = _selected(snapshot=_SNAP, compression_epoch=5, current_input=zebra)
    assert 4 in ids
    later = CurrentInput(text="carry on with the table")
    kept, _ = _selected(snapshot=_SNAP, compression_epoch=6, current_input=later, previous=first)
    assert 4 in kept
    dropped, _ = _selected(
        snapshot=_SNAP,
        compression_epoch=6,
        current_input=later,
        previous=first,
        abandoned_work=frozenset({"w-ui"}),
    )
    assert 4 not in dropped


def test_a_history_that_must_move_is_planned_once_with_the_episodes_selected_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Rendered from the state alone, the history is read from its own windows, which have
    # slid past where the previous prompt's history started: it moves, so the episodes are
    # selected again (the input's words now pick others). That was planned with the kept
    # selection first, then again with the new one, each pass twice for the requests'
    # fixed point: four passes where one gives the same prompt.
    budget = Budget(context_window=32_000, output_reserve=4_000)
    config = RenderConfig(prompt_cache_key="once")
    session = run_session(200, budget, config, seed=11, render_from=199)
    state, index = session.live.state, session.index
    given = inputs_from_state(state, agent_id=AGENT, include_episodes=False)
    assert given.previous is not None and given.previous.history is not None
    assert given.previous.history.from_seq < window_view(given).first_seq
    fresh = select_episodes(given, index, limit=config.episode_limit, max_postings=config.max_postings)
    assert [e.episode_id for e in fresh] != list(given.previous.episodes)
    passes: list[int] = []
    planned = render_module._assemble

    def counted(*args: Any, **kwargs: Any) -> Prompt:
        passes.append(1)
        return planned(*args, **kwargs)

    monkeypatch.setattr(render_module, "_assemble", counted)
    prompt = build_context(state, budget, config, agent_id=AGENT, index=index)
    assert len(passes) == 1
    assert prompt.plan.episodes == tuple(e.episode_id for e in fresh)


# ---------------------------------------------------------------- bounded selection


def _shared(i: int, words: str) -> r.ContextEpisodeRecord:
    return _episode(i, f"postgres billing {words}", files=("billing/schema.sql",), work="w-db")


def test_a_query_reads_at_most_max_postings_postings_in_all_rarest_terms_first() -> None:
    # Ten episodes share "postgres" and "billing"; the two oldest also say "kangaroo". With
    # one budget for the whole query, the rare term is read whole and the common ones get
    # what is left, newest first: 2 of kangaroo, then 3 of billing (the next rarest, by
    # term: both have ten documents), none of postgres.
    index = EpisodeIndex([_shared(i, "kangaroo" if i < 2 else f"step{i}") for i in range(10)])
    query = ["postgres", "billing", "kangaroo"]
    capped = index.scores(query, max_postings=5)
    assert sorted(capped) == [0, 1, 7, 8, 9]
    whole = index.scores(query)
    for doc in (0, 1):  # billing and postgres were not read for these
        assert capped[doc] < whole[doc]
    # A query whose postings fit the budget scores exactly as an unbounded one.
    assert index.scores(query, max_postings=22) == whole
    assert index.scores(query, max_postings=0) == {}


def test_a_rare_word_still_selects_an_old_episode_when_common_words_fill_the_budget() -> None:
    """Selection reads ``max_postings`` postings per query, not per term (render version 15).

    Per term, each of a query's words that every episode shares read its newest
    ``max_postings`` postings, so a selection cost (words x the cap) and grew with the
    archive until the common words had that many episodes (4.1 ms at 1,114 episodes, 0.4 at
    13). One budget, rarest terms first, keeps the informative words: the oldest episode,
    the only one with the input's rare word, is still selected past 300 newer ones that
    share every other word, while the common words' small weight is what goes unread.
    """
    archive = [_shared(0, "kangaroo migration"), *(_shared(i, f"step{i}") for i in range(1, 300))]
    index = EpisodeIndex(archive)
    snap = WorkingMemorySnapshot(
        active_work_item_id="w-db", work_state="active", objective="postgres billing"
    )
    current = CurrentInput(text="what did the kangaroo migration change?", seq=100_000)
    chosen = select_episodes(inputs(snapshot=snap, current_input=current), index, limit=3, max_postings=64)
    assert [e.episode_id for e in chosen] == [0, 299, 298]


def test_an_older_episode_sharing_more_files_wins_the_structural_lookup() -> None:
    # The rare word's six old episodes take the whole budget of postings, so the newest
    # six are matched by structure only, looked at most recent first: the five newest
    # share one working-set file, episode 14 shares both. It ranks first, and the look-up
    # stops only after `limit` episodes with the largest bonus, not after `limit` of any.
    archive = [_episode(i, "kangaroo", work="w-old") for i in range(6)]
    archive += [_episode(i, "filler", files=("a.py",), work="w-db") for i in range(6, 20)]
    archive[14] = _episode(14, "filler", files=("a.py", "b.py"), work="w-db")
    index = EpisodeIndex(archive)
    snap = WorkingMemorySnapshot(
        active_work_item_id="w-db",
        work_state="active",
        objective="",
        files=(FileRef(path="a.py", seq=1), FileRef(path="b.py", seq=1)),
    )
    given = inputs(snapshot=snap, current_input=CurrentInput(text="kangaroo", seq=100_000))
    assert sorted(index.scores(terms("a.py\nb.py\nkangaroo"), max_postings=6)) == list(range(6))
    chosen = select_episodes(given, index, limit=2, max_postings=6)
    assert [e.episode_id for e in chosen] == [14, 19]


# Few words and files, so that many candidates tie, and many match by structure only.
_WORDS = ("postgres", "replica", "lag", "vacuum", "kangaroo", "w2", "notes")
_PATHS = ("a.py", "b.py", "c.py")


@st.composite
def _archives(draw: st.DrawFn) -> tuple[EpisodeIndex, ContextInputs, int, int | None]:
    count = draw(st.integers(0, 40))
    ids = draw(st.permutations(range(count)))
    ordered = draw(st.booleans())
    episodes = []
    for doc, episode_id in enumerate(ids):
        episodes.append(
            r.ContextEpisodeRecord(
                episode_id=episode_id,
                boundary_reason="turn_cap",
                work_item_id=draw(st.sampled_from((None, "w1", "w1", "w2", "w3"))),
                work_state=draw(st.sampled_from((None, "active", "done", "done", "abandoned"))),
                first_turn=doc,
                last_turn=doc,
                from_seq=doc * 10,
                to_seq=doc * 10 + 9 if ordered else draw(st.integers(0, 30)),
                objective=draw(st.sampled_from(("", "", "", *_WORDS))),
                touched_files=draw(st.sampled_from(((), ("a.py",), ("b.py", "a.py"), _PATHS))),
                projection_version=1,
            )
        )
    snap = WorkingMemorySnapshot(
        active_work_item_id=draw(st.sampled_from((None, "w1", "w1", "w2"))),
        work_state="active",
        objective=" ".join(draw(st.lists(st.sampled_from(_WORDS), max_size=3))),
        files=tuple(FileRef(path=p, seq=1) for p in draw(st.lists(st.sampled_from(_PATHS[:2]), unique=True))),
    )
    text = " ".join(draw(st.lists(st.sampled_from(_WORDS), max_size=4)))
    floor = draw(st.sampled_from((None, 5, 150, 300)))
    window = (
        ()
        if floor is None
        else (MessageEntry(seq=floor, ts=1, turn=1, message=r.Message(role="user", text="hi")),)
    )
    given_inputs = inputs(
        snapshot=snap,
        current_input=CurrentInput(text=text, seq=10_000) if text else None,
        messages=window,
        abandoned_work=frozenset(draw(st.lists(st.sampled_from(("w1", "w2", "w3")), max_size=1))),
    )
    return (
        EpisodeIndex(episodes),
        given_inputs,
        draw(st.integers(1, 6)),
        draw(st.sampled_from((None, 0, 1, 3, 8, 500))),
    )


def _every_candidate_ranked(
    given: ContextInputs, index: EpisodeIndex, limit: int, max_postings: int | None
) -> list[int]:
    """select_episodes as documented, every candidate scored and ranked (no shortcuts)."""
    s = given.snapshot
    parts = [s.objective or "", s.delivery_target or "", *s.scope_constraints, *(f.path for f in s.files)]
    if given.current_input is not None:
        parts.append(given.current_input.text[:4000])
    scores = index.scores(terms("\n".join(parts)), max_postings=max_postings)
    floor = min((m.seq for m in given.messages), default=None)
    files = {f.path for f in s.files}
    named = given.current_input.text if given.current_input is not None else ""
    docs = set(scores)
    if s.active_work_item_id is not None or files:
        n = len(index)
        docs.update(range(max(0, n - (n if max_postings is None else max_postings)), n))
    ranked = []
    for doc in docs:
        e = index.episode_at(doc)
        work = e.work_item_id
        gone = work is not None and (work in given.abandoned_work or index.work_state(work) == "abandoned")
        if (floor is not None and e.to_seq >= floor) or (gone and work not in named):
            continue
        score = scores.get(doc, 0.0)
        if s.active_work_item_id is not None and work == s.active_work_item_id:
            score += 2.0
        score += 1.0 * min(len(files & set(e.touched_files)), 3)
        if score > 0.0:
            ranked.append((-score, -e.to_seq, e.episode_id))
    return [episode_id for _, _, episode_id in sorted(ranked)[:limit]]


@given(_archives())
@settings(max_examples=400, deadline=None)
def test_selection_skips_only_candidates_that_cannot_be_selected(
    case: tuple[EpisodeIndex, ContextInputs, int, int | None],
) -> None:
    # select_episodes stops looking once the remaining candidates cannot reach the best
    # `limit` (by their largest possible bonus, or, structural-only ones, by recency):
    # what it returns is what ranking every candidate returns.
    index, given, limit, max_postings = case
    chosen = select_episodes(given, index, limit=limit, max_postings=max_postings)
    assert [e.episode_id for e in chosen] == _every_candidate_ranked(given, index, limit, max_postings)
    # A restored index knows as well whether its positions are in recency order.
    restored = EpisodeIndex.restore(index.export(), index.episodes)
    assert isinstance(restored, EpisodeIndex)
    assert select_episodes(given, restored, limit=limit, max_postings=max_postings) == chosen


# ---------------------------------------------------------------- search arguments


def _msg(seq: int, text: str, turn: int | None = 1) -> r.Record:
    return r.Record(body=r.Message(role="user", text=text), ts=seq, turn=turn, seq=seq)


def test_a_limit_below_one_or_an_unknown_only_is_refused_not_half_applied() -> None:
    # EpisodeIndex.search(limit=-1) returned all hits but the last (ranked[:-1]); an
    # unknown `only` ("episode") filtered nothing. Both read as a real answer.
    index = EpisodeIndex([_episode(i, f"postgres {w}") for i, w in enumerate(("vacuum", "lag", "dump"))])
    assert len(index.search("postgres", limit=3)) == 3
    for limit in (0, -1):
        with pytest.raises(ValueError, match="limit must be at least 1"):
            index.search("postgres", limit=limit)
    archived = r.Record(body=_episode(0, "postgres vacuum"), ts=0, turn=None, seq=9)
    memory = MemorySearch([archived, _msg(10, "postgres")])
    assert [h.source for h in memory.search("postgres", only="episodes")] == ["episode"]
    with pytest.raises(ValueError, match="only must be None, 'episodes' or 'evidence'"):
        memory.search("postgres", only="episode")  # type: ignore[arg-type]
