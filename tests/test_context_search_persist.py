"""A saved episode index restores to the very index a fresh build gives, or is rejected.

The runtime saves :meth:`EpisodeIndex.export` beside its checkpoints so the first turn
after an open does not re-tokenize the whole archive; that is only sound if a restored
index selects exactly what a rebuilt one would.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.context import Budget, CurrentInput, EpisodeIndex, EpisodeIndexRejected, build_context, search
from holon.projections import WorkingMemorySnapshot
from tests.context_inputs import inputs
from tests.msgspec_styles import STYLES, styled

WORDS = ("postgres", "replica", "lag", "parser", "grammar", "release", "notes", "zebra", "css", "vacuum")
FILES = ("src/parser.py", "ops/alerts.yml", "docs/notes.md", "web/zebra.css")


@st.composite
def _episodes(draw: st.DrawFn) -> list[r.ContextEpisodeRecord]:
    out = []
    for i in range(draw(st.integers(0, 24))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))
        decisions = draw(st.lists(st.sampled_from(("d1", "d2", "d3")), max_size=2, unique=True))
        jobs = draw(st.lists(st.sampled_from(("j1", "j2", "j3")), max_size=3))
        out.append(
            r.ContextEpisodeRecord(
                episode_id=i,
                boundary_reason="turn_cap",
                work_item_id=draw(st.sampled_from((None, "w-db", "w-ui"))),
                first_turn=i * 10,
                last_turn=i * 10 + 9,
                from_seq=i * 100,
                to_seq=i * 100 + 99,
                objective=" ".join(words),
                touched_files=tuple(draw(st.lists(st.sampled_from(FILES), max_size=2, unique=True))),
                decisions=tuple(f"{d}: {words[0]} via {i}" for d in decisions),
                task_runs=tuple(r.TaskRun(id=f"t{i}.{k}", job=job) for k, job in enumerate(jobs)),
                projection_version=1,
            )
        )
    return out


def _same(a: EpisodeIndex, b: EpisodeIndex) -> None:
    assert a.export() == b.export()
    assert len(a) == len(b) and a.episodes == b.episodes and a.decisions == b.decisions
    runs = [run.id for e in a.episodes for run in e.task_runs]
    assert [a.superseded_run(t, {}) for t in runs] == [b.superseded_run(t, {}) for t in runs]
    for query in (["postgres", "lag"], list(WORDS), ["kangaroo"], ["src/parser.py", "parser", "py"]):
        assert a.scores(query) == b.scores(query)
        assert a.scores(query, max_postings=3) == b.scores(query, max_postings=3)
    assert a.search("postgres replica lag zebra") == b.search("postgres replica lag zebra")


@settings(max_examples=60, deadline=None)
@given(episodes=_episodes(), data=st.data())
def test_a_restored_index_equals_a_rebuilt_one(
    episodes: list[r.ContextEpisodeRecord], data: st.DataObject
) -> None:
    saved_at = data.draw(st.integers(0, len(episodes)))
    saved = EpisodeIndex(episodes[:saved_at]).export()
    restored = EpisodeIndex.restore(saved, episodes)  # the archive grew after the save
    assert isinstance(restored, EpisodeIndex)
    rebuilt = EpisodeIndex(episodes)
    _same(restored, rebuilt)
    # Both keep growing alike: adding to a term read in place from the saved bytes.
    more = data.draw(_episodes())
    shifted = [msgspec.structs.replace(e, episode_id=e.episode_id + 100) for e in more]
    restored.extend(shifted)
    rebuilt.extend(shifted)
    _same(restored, rebuilt)
    # And what it renders for the next turn is the same prompt, byte for byte.
    snapshot = WorkingMemorySnapshot(
        active_work_item_id="w-db", work_state="active", objective="postgres replica lag", files=()
    )
    question = CurrentInput(text="why is the replica lagging behind postgres?", seq=10**6)
    ctx = inputs(snapshot=snapshot, current_input=question)
    budget = Budget(context_window=8_000, output_reserve=1_000)
    assert build_context(ctx, budget, index=restored).text == build_context(ctx, budget, index=rebuilt).text



def _fixed() -> list[r.ContextEpisodeRecord]:
    def episode(i: int, objective: str, decisions: tuple[str, ...] = ()) -> r.ContextEpisodeRecord:
        return r.ContextEpisodeRecord(
            episode_id=i,
            boundary_reason="turn_cap",
            work_item_id=None,
            first_turn=i,
            last_turn=i,
            from_seq=i * 10,
            to_seq=i * 10 + 9,
            objective=objective,
            decisions=decisions,
            projection_version=1,
        )

    return [
        episode(0, "tune the postgres vacuum settings", ("d1: vacuum nightly",)),
        episode(1, "write the release notes"),
        episode(2, "postgres replica lag alerting", ("d1: vacuum hourly",)),
    ]


def _rejected(result: EpisodeIndex | EpisodeIndexRejected) -> EpisodeIndexRejected:
    assert isinstance(result, EpisodeIndexRejected), "a bad saved index must be rejected, not used"
    return result


def test_damaged_bytes_are_rejected_as_corrupt() -> None:
    episodes = _fixed()
    saved = EpisodeIndex(episodes).export()
    assert _rejected(EpisodeIndex.restore(saved[: len(saved) // 2], episodes)).reason == "corrupt"
    assert _rejected(EpisodeIndex.restore(b"not an index", episodes)).reason == "corrupt"
    fields = msgspec.msgpack.decode(saved)
    fields[8] = fields[8][:-8]  # postings cut short: offsets no longer match
    assert _rejected(EpisodeIndex.restore(msgspec.msgpack.encode(fields), episodes)).reason == "corrupt"


@pytest.mark.parametrize("style", STYLES)
def test_a_saved_index_holding_text_that_is_not_utf8_is_rejected_as_corrupt_whatever_msgspec_raises(
    monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    # msgspec before 0.23 raised UnicodeDecodeError for it, which escaped restore().
    monkeypatch.setattr(search, "_SAVED_DECODER", styled(search._SAVED_DECODER, style))
    episodes = _fixed()
    saved = EpisodeIndex(episodes).export()
    assert b"postgres" in saved
    rejected = _rejected(EpisodeIndex.restore(saved.replace(b"postgres", b"postgr\xe9s"), episodes))
    assert rejected.reason == "corrupt" and "does not decode" in rejected.detail


def test_an_index_for_other_episodes_or_other_tokenizing_code_is_rejected_as_stale() -> None:
    episodes = _fixed()
    saved = EpisodeIndex(episodes).export()
    fewer = _rejected(EpisodeIndex.restore(saved, episodes[:2]))
    assert fewer.reason == "stale" and "3 episodes" in fewer.detail
    moved = [*episodes[:2], msgspec.structs.replace(episodes[2], to_seq=999)]
    assert _rejected(EpisodeIndex.restore(saved, moved)).reason == "stale"
    # Same ids and seqs, other text: the spot check re-tokenizes the newest episodes.
    retold = [*episodes[:2], msgspec.structs.replace(episodes[2], objective="postgres replica lag paging")]
    assert "episode 2" in _rejected(EpisodeIndex.restore(saved, retold)).detail
    fields = msgspec.msgpack.decode(saved)
    fields[0] = "0|other tokenizer"
    assert _rejected(EpisodeIndex.restore(msgspec.msgpack.encode(fields), episodes)).reason == "stale"


def test_restore_keeps_the_latest_decision_text_and_skips_repeated_ids() -> None:
    episodes = _fixed()
    restored = EpisodeIndex.restore(EpisodeIndex(episodes[:2]).export(), [*episodes, episodes[1]])
    assert isinstance(restored, EpisodeIndex)
    assert restored.decisions == {"d1": "vacuum hourly"}
    assert restored.export() == EpisodeIndex(episodes).export()
