"""Working memory at one point of a ledger: snapshot, pending delta and active episode builder."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

import holon.records as r
from holon.projections import (
    ActiveEpisodeBuilder,
    ProjectionConfig,
    ProjectionState,
    WorkingMemorySnapshot,
    WorkingMemoryState,
    fold,
    snapshot_lines,
)
from holon.replay.config import ConfigScan
from holon.replay.reading import Reader, first_pass, fold_first
from holon.replay.resume import Checkpoints, Resume, fold_all, from_checkpoint
from holon.replay.turns import TurnScan

__all__ = ["MemoryView", "memory_at", "memory_of"]


class MemoryView(msgspec.Struct, frozen=True, kw_only=True):
    """Working memory at one point: snapshot, its lines, pending delta, episode builder.

    ``latest_delta`` is the delta that made the current revision once a prompt has
    confirmed it (``pending_delta`` is then ``None``): the renderer may still show it,
    unpinned, while the revision holds.
    """

    turn: int | None
    after_seq: int
    revision: int
    compression_epoch: int
    confirmed_revision: int | None
    archived_episodes: int
    snapshot: WorkingMemorySnapshot
    lines: tuple[str, ...]
    pending_delta: r.WorkingMemoryDelta | None
    latest_delta: r.WorkingMemoryDelta | None
    builder: ActiveEpisodeBuilder


def _confirmed_delta(memory: WorkingMemoryState) -> r.WorkingMemoryDelta | None:
    latest = memory.latest_delta
    if memory.pending is not None or latest is None or latest.to_revision != memory.revision:
        return None
    return latest


def memory_at(
    records: Sequence[r.Record], turn: int | None = None, *, projection: ProjectionConfig | None = None
) -> MemoryView:
    """Working memory after turn ``turn``'s post-turn refresh (or after the whole ledger).

    Folded under ``projection``, or (by default) the projection config the ledger's prompts record.
    """
    return memory_of(lambda: records, turn, projection=projection)


def _memory_view(turn: int | None, state: ProjectionState) -> MemoryView:
    memory = state.memory
    return MemoryView(
        turn=turn,
        after_seq=state.seq,
        revision=memory.revision,
        compression_epoch=memory.compression_epoch,
        confirmed_revision=memory.confirmed_revision,
        archived_episodes=memory.archived_episodes,
        snapshot=memory.snapshot,
        lines=snapshot_lines(memory.snapshot),
        pending_delta=memory.pending,
        latest_delta=_confirmed_delta(memory),
        builder=memory.builder,
    )


def memory_of(
    read: Reader,
    turn: int | None = None,
    *,
    projection: ProjectionConfig | None = None,
    resume: Resume | Checkpoints | None = None,
) -> MemoryView:
    """:func:`memory_at` of the records ``read()`` gives, read in passes rather than held.

    Without ``turn`` the fold may start from ``resume``'s verified state (a checkpoint);
    the result is the same. Given :class:`Checkpoints` whose newest checkpoint states
    the ledger's config, there is no first pass: only the records after the checkpoint
    are read (the records up to it are trusted, as the checkpoint verified; `holon
    verify` reads them all).
    """
    if turn is None:
        resumed = from_checkpoint(resume, projection, settings=False)
        if resumed is not None:
            return _memory_view(turn, fold(resumed.rest, resumed.state))
        if projection is not None:
            return _memory_view(turn, fold_all(read, projection, resume))  # nothing to learn first
    scan = ConfigScan() if projection is None else None
    turns = TurnScan(turn) if turn is not None else None
    seen = first_pass(read, scan, turns)
    if scan is not None:
        projection = scan.result()
    assert projection is not None
    if turns is None:
        return _memory_view(turn, fold_all(read, projection, resume))
    return _memory_view(turn, fold_first(read, turns.finish(seen.count).end, projection)[0])
