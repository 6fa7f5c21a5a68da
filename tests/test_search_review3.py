"""A saved episode index whose bytes decode but whose postings are malformed is rejected on restore.

The runtime's ``.episodes`` file is checksummed, so these are bytes a buggy writer or an
edit produced, not disk damage. Before, an odd or out-of-order offset or a document past
the end was accepted: the restored index raised IndexError (or misread pairs) in a later
search, in the middle of a turn, instead of being rebuilt on open.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import blake3
import msgspec
import pytest

from holon import records as r
from holon.context import EpisodeIndex, EpisodeIndexRejected
from holon.context.search import terms
from holon.runtime import Agent, AgentConfig
from holon.runtime.checkpoints import list_checkpoints
from tests.runtime_support import load_daemon
from tests.test_search_review import _episode

# The layout's fields (holon.context.search._SavedIndex, array-like).
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
