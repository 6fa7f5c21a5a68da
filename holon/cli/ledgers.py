"""How the commands open a ledger and read it in passes, and the state an import appends onto.

Of the package it imports nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from holon.progress import progress_items

if TYPE_CHECKING:
    import holon.records as r
    from holon.ledger import Ledger
    from holon.projections import ProjectionState
    from holon.replay import Checkpoints, Reader


@contextmanager
def _reading(path: Path) -> Iterator[Ledger]:
    """Open a ledger read-only: no lock, no recovery, nothing written."""
    from holon.ledger import Ledger

    ledger = Ledger.open(path, readonly=True)
    try:
        yield ledger
    finally:
        ledger.close()


@contextmanager
def _writing(path: Path) -> Iterator[Ledger]:
    from holon.ledger import Ledger

    ledger = Ledger.open(path)
    try:
        yield ledger
    finally:
        ledger.close()


def _each_record(ledger: Ledger, label: str = "reading") -> Iterator[r.Record]:
    """The ledger's records one by one, for a pass that keeps only what it needs of each."""
    return progress_items(ledger.read(), length=lambda: ledger.head()[0] + 1, label=label)


def _passes(ledger: Ledger) -> tuple[Reader, Checkpoints]:
    """Read the ledger in passes (the first "reading", then "folding") and resume from a checkpoint.

    Every pass, and the checkpoint's verification, stop at the head the first one saw: a
    writer appending meanwhile changes none of them. The whole-ledger reads (`memory`,
    `render` and `explain` without --at-turn) may need no pass at all: a checkpoint that
    verifies gives what the first would learn (holon.replay.Checkpoints).
    """
    from holon.runtime import checkpoint_resume

    head = ledger.head()
    labels = iter(("reading",))

    def read() -> Iterator[r.Record]:
        label = next(labels, "folding")
        return progress_items(ledger.read(0, head[0] + 1), length=head[0] + 1, label=label)

    return read, checkpoint_resume(ledger, head)


def _records_upto(ledger: Ledger) -> Callable[[int, int], Iterator[r.Record]]:
    """The ledger's records by seq range, up to the head a read command started at."""
    head = ledger.head()[0]

    def records(from_seq: int, to_seq: int) -> Iterator[r.Record]:
        return ledger.read(from_seq, min(to_seq, head + 1))

    return records


def _state_to_append_to(
    ledger: Ledger, incoming: Sequence[r.Record], *, where: Callable[[int], str]
) -> tuple[ProjectionState, int | None]:
    """The state ``incoming`` evidence is appended onto, and the turn it continues from (`holon import`).

    The state is :func:`state_to_append_to`'s, as for `holon append`: from the newest verified
    checkpoint with no first pass when it states the ledger's projection config. The turn
    a transcript's turns are numbered after is the ledger's last (the state's), the one
    the runtime numbers its next turn after (`Agent.next_turn_index`) and above which
    `append_evidence` takes a turn_started: finding the highest turn any record names took
    a pass over every record, the whole of a 1M-record import's wait. Only when the last
    turn has no number, or there is none, is that pass made, and the highest turn a record
    names taken, so that an imported turn repeats no number there.
    """
    from holon.replay import state_to_append_to

    read, resume = _passes(ledger)
    state = state_to_append_to(read, incoming, resume, where=where)
    turn = state.runtime.turn
    if turn is not None and turn.index is not None:
        return state, turn.index
    if state.seq < 0:
        return state, None
    return state, _highest_turn(read())


def _highest_turn(records: Iterable[r.Record]) -> int | None:
    highest: int | None = None
    for record in records:
        if record.turn is not None and (highest is None or record.turn > highest):
            highest = record.turn
    return highest


def _last_turn_before(ledger: Ledger, seq: int) -> int | None:
    """The turn an import that started at ``seq`` numbered its turns after (a continued import).

    :func:`_state_to_append_to`'s last turn for the ledger's first ``seq`` records: the state's
    turn is the last turn_started's, unless a turn_ended closed no open turn after it, which
    sets its own (``holon.projections.state``: ``_on_turn_started``, ``_on_turn_ended``). So the
    last two turn boundaries before ``seq`` say it, read backwards; with no number there, the
    highest turn a record names.
    """
    import holon.records as r

    boundaries: list[r.Record] = []
    at = seq - 1
    while at >= 0 and len(boundaries) < 2:
        record = ledger.get(at)
        at -= 1
        if isinstance(record.body, r.TurnStarted | r.TurnEnded):
            boundaries.append(record)
            if isinstance(record.body, r.TurnStarted):
                break  # it sets the turn whatever came before
    index: int | None = None
    if boundaries:
        last = boundaries[0]
        opened = next((b for b in boundaries if isinstance(b.body, r.TurnStarted)), None)
        # A turn_ended keeps the number of the turn it closes; one with no turn open, its own.
        index = opened.turn if opened is not None else last.turn
    if index is not None or seq == 0:
        return index
    return _highest_turn(ledger.read(0, seq))
