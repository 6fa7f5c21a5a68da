"""Where each turn of a record sequence lies: its span, found in a list or one record at a time.

:func:`turn_spans` and :func:`find_turn` give the spans of records held in a list;
:class:`SpanScan` and :class:`TurnScan` find them in one pass over records that are not
held (the ``*_of`` functions of :mod:`holon.replay`, which read a ledger in passes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.errors import UsageError

__all__ = ["TurnSpan", "find_turn", "turn_spans"]


# Roles whose messages are input to a turn (what the first model call of the turn
# answers), as opposed to what the model itself produced.
INPUT_ROLES: Final = frozenset({"user", "operator", "channel", "system"})


class TurnSpan(msgspec.Struct, frozen=True, kw_only=True):
    """Where one turn lies in a record sequence.

    ``start`` is the index of its ``turn_started``; ``end`` the index just past its last
    record, derived records of its post-turn refresh included (``records[start:end]``).
    ``ended_seq`` is the seq of its ``turn_ended``, or ``None`` when the turn is still open.
    """

    turn: int
    start: int
    end: int
    started_seq: int
    ended_seq: int | None


def turn_spans(records: Iterable[r.Record]) -> list[TurnSpan]:
    """Every turn of ``records``, in order.

    A turn runs from its ``turn_started`` through its ``turn_ended`` and the derived
    records that directly follow it; an unterminated turn runs to the next
    ``turn_started`` or the end.
    """
    scan = SpanScan()
    spans: list[TurnSpan] = []
    count = 0
    for count, record in enumerate(records, 1):
        closed = scan.see(count - 1, record)
        if closed is not None:
            spans.append(closed)
    last = scan.finish(count)
    return [*spans, last] if last is not None else spans


class SpanScan:
    """:func:`turn_spans` one record at a time: :meth:`see` returns each span as it closes.

    One rule for the list functions and for the passes of the ``*_of`` functions, which
    do not hold the records.
    """

    def __init__(self) -> None:
        self.open: tuple[int, int, int] | None = None  # start index, turn, started_seq
        self.closed = 0
        self.held: tuple[int, int] | None = None  # the first and last turn closed
        self._ended: int | None = None
        self._tail = False  # past its turn_ended: only derived records still belong to it

    def see(self, index: int, record: r.Record) -> TurnSpan | None:
        """Take record ``index``; the span it ends, if it ends one (it may then start the next)."""
        body = record.body
        closed = None
        if self.open is not None:
            # After its turn_ended only derived records belong to it; before, the next turn_started ends it.
            if record.kind not in r.DERIVED_KINDS if self._tail else isinstance(body, r.TurnStarted):
                closed = self.finish(index)
            elif isinstance(body, r.TurnEnded):
                self._ended, self._tail = record.seq, True
        if self.open is None and isinstance(body, r.TurnStarted):
            turn = record.turn if record.turn is not None else self.closed + 1
            self.open, self._ended, self._tail = (index, turn, record.seq), None, False
        return closed

    def finish(self, end: int) -> TurnSpan | None:
        """Close the open span at index ``end`` (the end of the records); ``None`` if none is open."""
        if self.open is None:
            return None
        start, turn, started = self.open
        self.open = None
        self.closed += 1
        self.held = (self.held[0] if self.held else turn, turn)
        return TurnSpan(turn=turn, start=start, end=end, started_seq=started, ended_seq=self._ended)


def find_turn(spans: Sequence[TurnSpan], turn: int) -> TurnSpan:
    """The span of turn ``turn``; UsageError naming the turns there are when it is absent."""
    for span in spans:
        if span.turn == turn:
            return span
    raise no_turn(turn, (spans[0].turn, spans[-1].turn) if spans else None)


def no_turn(turn: int, held: tuple[int, int] | None) -> UsageError:
    """Turn ``turn`` is absent; ``held`` is the first and last turn there are (``None``: no turns)."""
    if held is None:
        return UsageError(f"turn {turn} is not in this ledger: it has no turns yet")
    return UsageError(f"turn {turn} is not in this ledger: it holds turns {held[0]}..{held[1]}")


class TurnScan:
    """Where turn ``wanted`` lies, found in one pass: what ``find_turn(turn_spans(records))`` gives.

    Also kept for that turn: its recorded prompts (index and record), the end of its
    input — its ``turn_started`` and the input messages right after it — with the record
    before it, and the newest prompt with a ``render_config`` before it (what
    :func:`next_prompt` would render its prefix with).
    """

    def __init__(self, wanted: int) -> None:
        self.wanted = wanted
        self.found: TurnSpan | None = None
        self.prompts: list[tuple[int, r.Record]] = []
        self.input_end = 0
        self.input_last: r.Record | None = None
        self.settings: r.Record | None = None
        self._spans = SpanScan()
        self._inputs = False  # still reading the input messages right after its turn_started
        self._configured: r.Record | None = None

    def see(self, index: int, record: r.Record) -> None:
        body = record.body
        self._take(self._spans.see(index, record))
        opened = self._spans.open
        if self.found is None and opened is not None and opened[1] == self.wanted:
            if opened[0] == index:  # its turn_started
                self._inputs, self.input_end, self.input_last = True, index + 1, record
                self.settings = self._configured
            else:
                if isinstance(body, r.PromptRendered):
                    self.prompts.append((index, record))
                if self._inputs and isinstance(body, r.Message) and body.role in INPUT_ROLES:
                    self.input_end, self.input_last = index + 1, record
                else:
                    self._inputs = False
        if isinstance(body, r.PromptRendered) and body.render_config:
            self._configured = record

    def _take(self, closed: TurnSpan | None) -> None:
        if closed is not None and self.found is None and closed.turn == self.wanted:
            self.found = closed

    def finish(self, count: int) -> TurnSpan:
        """The turn's span once ``count`` records were seen; UsageError as :func:`find_turn` when absent."""
        self._take(self._spans.finish(count))
        if self.found is None:
            raise no_turn(self.wanted, self._spans.held)
        return self.found
