"""A saved episode index restores to the very index a fresh build gives, or is rejected.

The runtime saves :meth:`EpisodeIndex.export` beside its checkpoints so the first turn
after an open does not re-tokenize the whole archive; that is only sound if a restored
index selects exactly what a rebuilt one would.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import blake3
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
import holon.search.episodes as episode_index
from holon.context import Budget, CurrentInput, EpisodeIndex, EpisodeIndexRejected, build_context
from holon.context.search import terms
from holon.projections import WorkingMemorySnapshot
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import list_checkpoints
from tests.context_inputs import inputs
from tests.msgspec_styles import STYLES, styled
from tests.runtime_support import load_daemon

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



def _episode(i: int, objective: str, decisions: tuple[str, ...] = ()) -> r.ContextEpisodeRecord:
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


def _fixed() -> list[r.ContextEpisodeRecord]:
    return [
        _episode(0, "tune the postgres vacuum settings", ("d1: vacuum nightly",)),
        _episode(1, "write the release notes"),
        _episode(2, "postgres replica lag alerting", ("d1: vacuum hourly",)),
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
    monkeypatch.setattr(episode_index, "_SAVED_DECODER", styled(episode_index._SAVED_DECODER, style))
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



# --------------------------------------------------------------------------- malformed postings
# A saved index whose bytes decode but whose postings are malformed (an odd or
# out-of-order offset, a document past the end: what a buggy writer or an edit makes, the
# file being checksummed) is rejected on restore, not an IndexError in a later search.

# The layout's fields (holon.search.episodes._SavedIndex, array-like).
_COUNT, _TERMS, _OFFSETS, _POSTINGS = 1, 6, 7, 8
# How many of the newest episodes restore() re-tokenizes: older ones' postings go unread.
_SPOT = 16


def _archive() -> list[r.ContextEpisodeRecord]:
    """40 episodes; the first's words occur nowhere else, so the spot check never reads them."""
    return [_episode(0, "tune postgres vacuum")] + [_episode(i, f"release notes n{i}") for i in range(1, 40)]


def _u32(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def _pack(values: list[int]) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


def _with(saved: bytes, **fields: object) -> bytes:
    decoded = msgspec.msgpack.decode(saved)
    for name, value in fields.items():
        decoded[{"terms": _TERMS, "offsets": _OFFSETS, "postings": _POSTINGS}[name]] = value
    return msgspec.msgpack.encode(decoded)


def _corrupt(result: EpisodeIndex | EpisodeIndexRejected) -> str:
    assert isinstance(result, EpisodeIndexRejected), "malformed postings must be rejected, not used"
    assert result.reason == "corrupt", result
    return result.detail


def _past_the_end(saved: bytes, term: str) -> bytes:
    """``saved`` with ``term``'s last posting naming a document past the end."""
    decoded = msgspec.msgpack.decode(saved)
    slot = decoded[_TERMS].index(term)
    offsets, flat = _u32(decoded[_OFFSETS]), _u32(decoded[_POSTINGS])
    flat[offsets[slot + 1] - 2] = decoded[_COUNT] + 5
    return _with(saved, postings=_pack(flat))


def test_a_posting_past_the_last_episode_is_rejected_not_an_index_error_later() -> None:
    episodes = _archive()
    bad = _past_the_end(EpisodeIndex(episodes).export(), "vacuum")
    assert "document 45, past its 40 episodes" in _corrupt(EpisodeIndex.restore(bad, episodes))


def test_an_offset_inside_a_pair_or_out_of_order_is_rejected() -> None:
    episodes = _archive()
    saved = EpisodeIndex(episodes).export()
    offsets = _u32(msgspec.msgpack.decode(saved)[_OFFSETS])
    odd = [offsets[0], offsets[1] + 1, *offsets[2:]]
    detail = _corrupt(EpisodeIndex.restore(_with(saved, offsets=_pack(odd)), episodes))
    assert "inside a (doc, tf) pair" in detail
    swapped = [offsets[0], offsets[2], offsets[1], *offsets[3:]]
    detail = _corrupt(EpisodeIndex.restore(_with(saved, offsets=_pack(swapped)), episodes))
    assert "out of order" in detail
    empty = [offsets[0], offsets[0], *offsets[2:]]  # the first term with no postings at all
    assert "no postings" in _corrupt(EpisodeIndex.restore(_with(saved, offsets=_pack(empty)), episodes))


def test_well_formed_indexes_of_every_size_still_restore() -> None:
    for count in (0, 1, _SPOT, 40):
        episodes = _archive()[:count]
        restored = EpisodeIndex.restore(EpisodeIndex(episodes).export(), episodes)
        assert isinstance(restored, EpisodeIndex)
        assert restored.export() == EpisodeIndex(episodes).export()


# ---------------------------------------------------------------- through the runtime

CONFIG = AgentConfig(checkpoint_every=100, checkpoints_kept=1)


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A daemon ledger with more archived episodes than the spot check re-reads."""
    path = tmp_path_factory.mktemp("episodes3") / "l"
    load_daemon().run(path, turns=300, seed=7, quiet=True, config=CONFIG)
    return path


def _found(path: Path, query: str) -> list[int]:
    """What the agent's episode index finds for ``query`` after an open."""
    with Agent.open(path, config=CONFIG) as agent:
        return [hit.episode.episode_id for hit in agent.episodes.search(query)]


@pytest.mark.slow
def test_open_rejects_a_checksummed_index_with_a_posting_past_the_end_and_rebuilds_it(
    ledger: Path, tmp_path: Path
) -> None:
    path = tmp_path / "l"
    shutil.copytree(ledger, path)
    (_, ckpt), *_ = list_checkpoints(path)
    side = ckpt.with_suffix(".episodes")
    magic, payload = side.read_bytes()[:8], side.read_bytes()[8 + 32 :]
    seq, head_hash, *_segments = msgspec.msgpack.decode(payload)
    with Agent.open(path, config=CONFIG) as agent:
        # The index saved whole (as before segments, still read): one buffer to damage.
        saved = EpisodeIndex(agent.memory.archive).export()
    decoded = msgspec.msgpack.decode(saved)
    count, offsets, flat = decoded[_COUNT], _u32(decoded[_OFFSETS]), _u32(decoded[_POSTINGS])
    assert count > _SPOT, "the ledger must archive more episodes than the spot check reads"
    with Agent.open(path, config=CONFIG) as agent:
        first = agent.memory.archive.get(0)
    assert first is not None and first.objective
    objective = first.objective
    # A word of the first episode's objective that no spot-checked episode has: old code
    # never read its postings on restore, so a bad one surfaced in the first search.
    slot = next(
        decoded[_TERMS].index(term)
        for term in terms(objective)
        if flat[offsets[decoded[_TERMS].index(term) + 1] - 2] < count - _SPOT
    )
    flat[offsets[slot + 1] - 2] = count + 5
    bad = _with(saved, postings=_pack(flat))
    payload = msgspec.msgpack.encode([seq, head_hash, bad])
    side.write_bytes(magic + blake3.blake3(payload).digest() + payload)
    with Agent.open(path, config=CONFIG) as agent:
        rejected = agent.report.episode_index_rejected
        assert rejected is not None and rejected.reason == "corrupt" and "past its" in rejected.detail
    good = tmp_path / "good"
    shutil.copytree(ledger, good)
    # Before, the damaged index was used: this search raised IndexError.
    assert _found(path, objective) == _found(good, objective) != []
