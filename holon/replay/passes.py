"""Replaying a ledger turn by turn: what happened to memory and the prompts at each turn.

:func:`replay_turns` folds records held or streamed; :func:`replay_of` reads a ledger in
passes (a first for the projection config and where the replay ends, a second to fold)
and holds one turn's facts at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

import msgspec

import holon.records as r
from holon.projections import ProjectionConfig, ProjectionState, fold, initial_state
from holon.replay.config import ConfigScan, projection_of
from holon.replay.reading import Reader
from holon.replay.turns import INPUT_ROLES, SpanScan, no_turn

__all__ = ["PromptSummary", "Replay", "TurnReplay", "replay_of", "replay_turns"]


class PromptSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A recorded ``PromptRendered``, as replay shows it.

    ``previous_cache_key`` is the key of the prompt before it (``None`` for the first):
    when it differs, the provider had to write a new cache prefix.
    """

    seq: int
    cache_key: str
    previous_cache_key: str | None
    working_memory_revision: int
    compression_epoch: int
    total_tokens: int
    budget: int
    sections: tuple[r.SectionTokens, ...]
    omitted: int


class TurnReplay(msgspec.Struct, frozen=True, kw_only=True):
    """One turn after its post-turn refresh: what happened to memory and the prompts.

    ``input`` is the turn's input, or (when ``turn_started`` carries none) the text of
    its first user, operator, channel or system message.
    """

    turn: int
    started_seq: int
    ended_seq: int | None
    trigger: str
    input: str | None
    outcome: str | None
    records: int
    tool_calls: int
    revision: int
    compression_epoch: int
    pending_delta: bool
    delta: r.WorkingMemoryDelta | None
    episodes: tuple[r.ContextEpisodeRecord, ...]
    prompts: tuple[PromptSummary, ...]


class _TurnBuilder:
    """Collects one turn's facts while its records are folded."""

    def __init__(self, record: r.Record, body: r.TurnStarted, turn: int) -> None:
        self.turn = turn
        self.started_seq = record.seq
        self.ended_seq: int | None = None
        self.trigger = body.trigger
        self.input = body.input
        self.outcome: str | None = None
        self.records = 0
        self.tool_calls = 0
        self.delta: r.WorkingMemoryDelta | None = None
        self.episodes: list[r.ContextEpisodeRecord] = []
        self.prompts: list[PromptSummary] = []

    def finish(self, state: ProjectionState) -> TurnReplay:
        memory = state.memory
        return TurnReplay(
            turn=self.turn,
            started_seq=self.started_seq,
            ended_seq=self.ended_seq,
            trigger=self.trigger,
            input=self.input,
            outcome=self.outcome,
            records=self.records,
            tool_calls=self.tool_calls,
            revision=memory.revision,
            compression_epoch=memory.compression_epoch,
            pending_delta=memory.pending is not None,
            delta=self.delta,
            episodes=tuple(self.episodes),
            prompts=tuple(self.prompts),
        )


def replay_turns(
    records: Iterable[r.Record],
    *,
    until_turn: int | None = None,
    config: ProjectionConfig | None = None,
) -> Iterator[TurnReplay]:
    """Fold ``records`` and yield one :class:`TurnReplay` per turn, after its refresh.

    A turn is reported once its derived records have been folded (revision and epoch
    are the values after the refresh). With ``until_turn``, stops after the first turn
    numbered ``until_turn`` or more. Folds under ``config``, or (by default) the config
    the records' prompts record; given ``config``, ``records`` are read once, as they
    come (:func:`replay_of` reads a ledger in passes and stops at turn ``until_turn``).
    """
    records, config = projection_of(records, config)
    yield from _TurnFold(config).turns(records, until_turn)


class _TurnFold:
    """The fold behind :func:`replay_turns` and :meth:`Replay.turns`: one record at a time.

    Each record is folded as it comes and each turn reported as it closes, so nothing
    but the open turn's facts is held; ``state`` is the state after the records folded.
    """

    def __init__(self, config: ProjectionConfig) -> None:
        self.state = initial_state(config)
        self._current: _TurnBuilder | None = None
        self._last_key: str | None = None
        self._started = 0

    def turns(self, records: Iterable[r.Record], until_turn: int | None = None) -> Iterator[TurnReplay]:
        """Fold ``records``, yielding each turn after its refresh; stop after turn ``until_turn`` or more."""
        for record in records:
            done = self._see(record)
            if done is not None:
                yield done
                if until_turn is not None and done.turn >= until_turn:
                    return
        if self._current is not None:
            done, self._current = self._current.finish(self.state), None
            yield done

    def _see(self, record: r.Record) -> TurnReplay | None:
        """Fold ``record``; the turn it closes (finished before it is folded), if it closes one."""
        body = record.body
        current = self._current
        done = None
        if current is not None and (
            isinstance(body, r.TurnStarted)
            or (current.outcome is not None and record.kind not in r.DERIVED_KINDS)
        ):
            done, current = current.finish(self.state), None
        # fold, not apply: records that skip or repeat seqs are refused
        self.state = fold((record,), self.state)
        if isinstance(body, r.TurnStarted):
            self._started += 1
            current = _TurnBuilder(record, body, record.turn if record.turn is not None else self._started)
        self._current = current
        if current is None:
            return done
        current.records += 1
        if isinstance(body, r.TurnEnded):
            current.outcome, current.ended_seq = body.outcome, record.seq
        elif isinstance(body, r.ToolIntent):
            current.tool_calls += 1
        elif isinstance(body, r.Message) and body.role in INPUT_ROLES and current.input is None:
            # A wake-up without explicit input answers the turn's first input message.
            current.input = body.text
        elif isinstance(body, r.WorkingMemoryDelta):
            current.delta = body
        elif isinstance(body, r.ContextEpisodeRecord):
            current.episodes.append(body)
        elif isinstance(body, r.PromptRendered):
            current.prompts.append(
                PromptSummary(
                    seq=record.seq,
                    cache_key=body.cache_key,
                    previous_cache_key=self._last_key,
                    working_memory_revision=body.working_memory_revision,
                    compression_epoch=body.compression_epoch,
                    total_tokens=body.total_tokens,
                    budget=body.budget,
                    sections=body.sections,
                    omitted=len(body.omitted),
                )
            )
            self._last_key = body.cache_key
        return done


class Replay:
    """A replay of the records ``read()`` gives, read in passes rather than held (:func:`replay_of`).

    The first pass, made by :func:`replay_of`, learns what is replayed: ``records``, the
    count through turn ``until_turn``'s post-turn refresh (every record without one),
    the ``turn_count`` turns among them, the ``last_seq`` of the last one (-1: none) and the
    ``projection`` config of the whole ledger. :meth:`turns` folds them, yielding
    each turn as :func:`replay_turns` does; ``state`` is then the state after them.
    """

    def __init__(
        self, read: Reader, *, projection: ProjectionConfig, records: int, turns: int, last_seq: int
    ) -> None:
        self.projection = projection
        self.records = records
        self.turn_count = turns
        self.last_seq = last_seq
        self.state: ProjectionState | None = None
        self._read = read

    def read(self) -> Iterator[r.Record]:
        """The records replayed, read afresh (for a pass of the caller's own, such as a check)."""
        return itertools.islice(self._read(), self.records)

    def turns(self) -> Iterator[TurnReplay]:
        """Fold the records replayed and yield each turn after its refresh; then ``state`` is set."""
        folding = _TurnFold(self.projection)
        yield from folding.turns(self.read())
        self.state = folding.state


def replay_of(
    read: Reader, *, until_turn: int | None = None, projection: ProjectionConfig | None = None
) -> Replay:
    """:func:`replay_turns` of the records ``read()`` gives through turn ``until_turn``, read in passes.

    One pass here learns the projection config (of the whole ledger, also when only a
    prefix is replayed; ``projection`` when given) and where turn ``until_turn`` ends
    (UsageError as :func:`find_turn` when there is no such turn); the returned
    :class:`Replay` folds in another. Nothing is held but one turn's facts.
    """
    scan = ConfigScan() if projection is None else None
    spans = SpanScan()
    found: tuple[int, int, int] | None = None  # records, turns, last seq through until_turn
    count = 0
    last: r.Record | None = None
    for index, record in enumerate(read()):
        if scan is not None:
            scan.see(record)
        closed = spans.see(index, record)
        if found is None and closed is not None and closed.turn == until_turn:
            assert last is not None  # the record before ``record`` ends the span
            found = (closed.end, spans.closed, last.seq)
        last, count = record, index + 1
    closed = spans.finish(count)
    if found is None and closed is not None and closed.turn == until_turn:
        assert last is not None
        found = (closed.end, spans.closed, last.seq)
    if scan is not None:
        projection = scan.result()
    assert projection is not None
    if until_turn is None:
        found = (count, spans.closed, last.seq if last is not None else -1)
    elif found is None:
        raise no_turn(until_turn, spans.held)
    records, turns, last_seq = found
    return Replay(read, projection=projection, records=records, turns=turns, last_seq=last_seq)
