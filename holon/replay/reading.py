"""Reading a ledger in passes rather than holding it: the reader, a first pass, folds that keep evidence.

A :data:`Reader` reads a ledger's records afresh at each call. :func:`first_pass` learns in
one pass what a fold needs first (the projection config, where a turn lies, the newest
configured prompt); :func:`fold_seeing` folds while keeping the bounded evidence a
prompt's history is read from; :func:`records_by_scan` reads records by seq range.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Final

import msgspec

import holon.records as r
from holon.context.evidence import EvidenceBuffer
from holon.projections import ProjectionConfig, ProjectionState, fold
from holon.replay.config import ConfigScan
from holon.replay.turns import TurnScan

__all__ = ["Reader", "fold_seeing", "records_by_scan"]


#: Reads a ledger's records from seq 0, in order, afresh at each call (``lambda: ledger.read()``).
#: The ``*_of`` functions of :mod:`holon.replay` read a ledger in passes this way instead of
#: holding its records.
Reader = Callable[[], Iterable[r.Record]]

#: Evidence a read-only fold keeps in memory for the prompt it renders; a history reaching
#: further back is read from the ledger again, so a command's memory stays flat however
#: long the ledger (and a replay's histories are read by range).
_REPLAY_CHARS: Final = 1 << 18


def records_by_scan(read: Reader) -> Callable[[int, int], Iterator[r.Record]]:
    """Records by seq range (``from_seq <= seq < to_seq``), found by reading ``read()`` from its start."""

    def scan(from_seq: int, to_seq: int) -> Iterator[r.Record]:
        for record in read():
            if record.seq >= to_seq:
                return
            if record.seq >= from_seq:
                yield record

    return scan


def fold_first(
    read: Reader,
    count: int,
    projection: ProjectionConfig,
    blobs: Callable[[str], bytes] | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
) -> tuple[ProjectionState, EvidenceBuffer]:
    """The state after the first ``count`` records ``read()`` gives, and their evidence."""
    return fold_seeing(itertools.islice(read(), count), config=projection, older=older, blobs=blobs)


def fold_seeing(
    records: Iterable[r.Record],
    state: ProjectionState | None = None,
    *,
    config: ProjectionConfig | None = None,
    older: Callable[[int, int], Iterable[r.Record]] | None = None,
    blobs: Callable[[str], bytes] | None = None,
) -> tuple[ProjectionState, EvidenceBuffer]:
    """:func:`~holon.projections.fold`, keeping the evidence the history of a prompt is read
    from (:class:`~holon.context.EvidenceBuffer`); ``older`` reads what came before
    ``state`` (a checkpoint's), so a history can reach back past it as the agent's did,
    and ``blobs`` the outputs stored as blobs."""
    evidence = EvidenceBuffer(
        start=state.seq + 1 if state is not None else 0, older=older, blob=blobs, max_chars=_REPLAY_CHARS
    )

    def seen() -> Iterator[r.Record]:
        for record in records:
            evidence.add(record)
            yield record

    return fold(seen(), state, config=config), evidence


class FirstPass(msgspec.Struct, kw_only=True):
    """What a first pass over a ledger learns: its count, last record, newest configured prompt."""

    count: int = 0
    last: r.Record | None = None
    configured: r.Record | None = None


def first_pass(read: Reader, config: ConfigScan | None, turn: TurnScan | None) -> FirstPass:
    """One pass over ``read()``, feeding each record to the ``config`` and ``turn`` scans given."""
    seen = FirstPass()
    for index, record in enumerate(read()):
        if config is not None:
            config.see(record)
        if turn is not None:
            turn.see(index, record)
        body = record.body
        if isinstance(body, r.PromptRendered) and body.render_config:
            seen.configured = record
        seen.last = record
        seen.count = index + 1
    return seen
