"""Episode index and selection: deterministic BM25, recency tie-break, no zero-relevance picks, refs shown."""

from __future__ import annotations

import holon.records as r
from holon.context import (
    Budget,
    CurrentInput,
    EpisodeIndex,
    RenderConfig,
    build_context,
    prompt_rendered,
    select_episodes,
)
from holon.projections import FileRef, MessageEntry, WorkingMemorySnapshot
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
