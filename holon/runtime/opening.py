"""Opening an agent's existing ledger: the state to resume from, the config check, crash recovery.

:func:`fold_ledger` folds the ledger from its newest valid checkpoint (or from seq 0);
:func:`check_projection` refuses a projection config other than the one the ledger's records
state; :func:`restore_index` reads the checkpoint's saved episode index; :func:`recover`
closes, as records, what a crash left open (the refresh a turn_ended still owed, tool intents
without a result, the open turn). :meth:`holon.runtime.Agent.open` composes them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Final, NamedTuple, TypeAlias

import holon.records as r
from holon.context import EpisodeIndex, EpisodeIndexRejected
from holon.context.render import describe_projection, projection_stated
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.projections import (
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    apply,
    initial_state,
    stated_config,
    unstated_config_derives,
)
from holon.runtime.checkpoints import (
    CheckpointChunks,
    ToolIndex,
    UnknownOutcome,
    list_checkpoints,
    load_checkpoint,
    load_episode_index,
)
from holon.runtime.core import AgentCore

__all__ = ["Folded", "check_projection", "floor_ts", "fold_ledger", "recover", "restore_index", "tail_ts"]

log = logging.getLogger("holon.runtime")


# How many records after a derived record's evidence its seq is looked for (a delta stands
# right after it, an episode after the delta of the same refresh).
_DERIVED_SEARCH: Final = 3


def _derived_seq(ledger: Ledger, body: r.WorkingMemoryDelta | r.ContextEpisodeRecord) -> int | None:
    """Where ``body`` (the state's newest delta or episode) stands in the ledger; ``None``: not found.

    The state keeps the record, not its seq: only an error message needs it, so it is read here.
    """
    after = body.evidence_to_seq if isinstance(body, r.WorkingMemoryDelta) else body.to_seq
    for record in ledger.read(after + 1, after + 1 + _DERIVED_SEARCH):
        if record.body == body:
            return record.seq
    return None


# A prompt (its seq) or a derived record that states a projection config.
_Stating: TypeAlias = int | r.WorkingMemoryDelta | r.ContextEpisodeRecord


def _stated_order(item: tuple[ProjectionConfig, _Stating]) -> tuple[int, int]:
    """Where a record stating a config stands: a delta follows its evidence, an episode the delta."""
    record = item[1]
    if isinstance(record, int):
        return record, 0
    if isinstance(record, r.WorkingMemoryDelta):
        return record.evidence_to_seq + 1, 0
    return record.to_seq + 1, 1


def check_projection(ledger: Ledger, state: ProjectionState, config: ProjectionConfig) -> None:
    """Refuse to go on deriving under a projection config other than the ledger's records state.

    The post-turn refresh would append deltas and episodes derived under ``config`` after
    ones derived under the old config, and no single config re-derives both: `holon verify`
    and `replay --check` would report the ledger divergent from then on. The newest delta
    and the newest episode state the config they were derived under (from projection
    version 9 on; also in a ledger whose turns never rendered a prompt), the last prompt
    the one it was rendered under (from render version 7 on); each one that states a config
    must state ``config``. Checked before recovery appends anything, so a refused open
    leaves the ledger as it was.
    """
    # (config, the record stating it): a prompt's seq, or a derived body (found by seq on error).
    stated: list[tuple[ProjectionConfig, _Stating]] = []
    last = state.runtime.last_prompt
    if last is not None:
        prompt = projection_stated(last.prompt.render_config, where=f"seq {last.seq}")
        if prompt is not None:
            stated.append((prompt, last.seq))
    memory = state.memory
    for derived in (memory.latest_delta, *memory.archive.latest(1)):
        if derived is None:
            continue
        found = stated_config(derived)
        if found is not None:
            stated.append((found, derived))
    if not stated:
        _check_unstated(ledger, state, config)
        return
    # Newest first, so the record named is the newest that states another config.
    stated.sort(key=_stated_order, reverse=True)

    def named(record: _Stating) -> str:
        if isinstance(record, int):
            return f"its prompt at seq {record}"
        seq = _derived_seq(ledger, record)
        return f"its {record.KIND} at seq {seq}" if seq is not None else f"its newest {record.KIND}"

    other = next(((c, record) for c, record in stated if c != config), None)
    if other is None:
        return
    have, record = other
    clash = next(((c, second) for c, second in stated if c != have), None)
    if clash is not None:
        # The ledger states two configs already: neither re-derives all of its records.
        raise UsageError(
            f"ledger {ledger.path} states two projection configs: {named(record)} records "
            f"{describe_projection(have)}, {named(clash[1])} records {describe_projection(clash[0])}; its "
            "derived records cannot be verified from seq 0 under either (`holon verify` names where they "
            "part): start a new ledger"
        )
    raise UsageError(
        f"ledger {ledger.path} was derived under {describe_projection(have)} ({named(record)} records it), "
        f"but this agent is configured with {describe_projection(config)}: "
        "records derived under two configs can no longer be verified from seq 0. Open it with "
        f"AgentConfig(projection={describe_projection(have)}), or start a new ledger for the new config"
    )


def _check_unstated(ledger: Ledger, state: ProjectionState, config: ProjectionConfig) -> None:
    """Refuse ``config`` for a ledger that states no config when its turns would derive under it
    what it lacks (:func:`~holon.projections.unstated_config_derives`): recovery would append the
    last turn's records under it, and `holon verify` report the ledger divergent for good."""
    lacking = unstated_config_derives(state, config, lambda: ledger.read(0, state.seq + 1))
    if lacking is not None:
        raise UsageError(
            f"ledger {ledger.path} holds no derived record, but under {describe_projection(config)} "
            f"{lacking}: it was written under another projection config, or without the post-turn "
            "refresh, and records derived under this one would not verify from seq 0. Open it with "
            "the AgentConfig.projection it was written under, or start a new ledger"
        )


def floor_ts(floor: int, record: r.Record, path: Path) -> int:
    """The floor of later timestamps after ``record``: its ts, unless it is out of range.

    A ledger written before the ledger checked ``ts`` may hold a nanosecond reading; as
    the floor it would make every later append fail (the ledger refuses it now), so it
    is skipped, with a warning naming it (``holon verify`` lists such records too).
    """
    if r.MIN_TS <= record.ts <= r.MAX_TS:
        return record.ts
    log.warning(
        "ledger %s: seq %d has ts %d, outside %d..%d (milliseconds since the epoch); later "
        "timestamps do not follow it",
        path,
        record.seq,
        record.ts,
        r.MIN_TS,
        r.MAX_TS,
    )
    return floor


class Folded(NamedTuple):
    """A ledger folded on open (:func:`fold_ledger`)."""

    state: ProjectionState
    tools: ToolIndex
    #: The chunk files the checkpoint resumed from names (the next checkpoint names them too).
    chunks: CheckpointChunks
    #: Checkpoints not trusted, newest first: (file name, why).
    rejected: tuple[tuple[str, CheckpointRejected], ...]
    #: The checkpoint resumed from, the seq and the head hash it was written at (None: a full fold).
    checkpoint: tuple[Path, int, str] | None
    #: How many records were folded (the tail after the checkpoint, or all).
    folded: int
    #: The floor of later timestamps after the records folded (see :func:`floor_ts`).
    last_ts: int


def fold_ledger(ledger: Ledger, config: ProjectionConfig) -> Folded:
    """The ledger folded from its newest checkpoint that loads, or from seq 0 when none does."""
    head = ledger.head()
    rejected: list[tuple[str, CheckpointRejected]] = []
    chunks = CheckpointChunks()

    def tail(seq: int) -> list[r.Record]:
        return list(ledger.read(seq + 1))

    for _seq, path in list_checkpoints(ledger.path):
        loaded = load_checkpoint(path, head=head, tail=tail, config=config, chunks=chunks)
        if isinstance(loaded, CheckpointRejected):
            rejected.append((path.name, loaded))
            log.warning(
                "ledger %s: checkpoint %s rejected (%s: %s); trying an older one",
                ledger.path,
                path.name,
                loaded.reason,
                loaded.detail,
            )
            continue
        state, tools, records = loaded
        checkpoint = (path, state.seq, tools.head_hash)
        state, folded, last_ts = _fold(ledger, state, tools, records)
        return Folded(state, tools, chunks, tuple(rejected), checkpoint, folded, last_ts)
    if rejected:
        log.warning("ledger %s: no valid checkpoint; folding all records", ledger.path)
    tools = ToolIndex()
    state, folded, last_ts = _fold(ledger, initial_state(config), tools, ledger.read(0))
    return Folded(state, tools, chunks, tuple(rejected), None, folded, last_ts)


def _fold(
    ledger: Ledger, state: ProjectionState, tools: ToolIndex, records: Iterable[r.Record]
) -> tuple[ProjectionState, int, int]:
    """``records`` folded into ``state`` and ``tools``: the state, how many, and the floor of later ts."""
    folded = last_ts = 0
    for record in records:
        state = apply(state, record)
        tools.apply(record)
        last_ts = floor_ts(last_ts, record, ledger.path)
        folded += 1
    return state, folded, last_ts


def tail_ts(ledger: Ledger, folded: Folded) -> int:
    """The ts of the ledger's newest record, as the floor of the timestamps after it."""
    if folded.folded:
        return folded.last_ts
    # Nothing after the checkpoint: the record at its seq is the newest.
    seq = folded.state.seq
    return floor_ts(0, ledger.get(seq), ledger.path) if seq >= 0 else 0


def restore_index(ledger: Ledger, folded: Folded) -> EpisodeIndex | EpisodeIndexRejected | None:
    """The episode index the checkpoint resumed from saved (None: no checkpoint was used)."""
    if folded.checkpoint is None:
        return None
    path, seq, head_hash = folded.checkpoint
    archive = folded.state.memory.archive
    restored = load_episode_index(path, seq=seq, head_hash=head_hash, episodes=archive, chunks=folded.chunks)
    if isinstance(restored, EpisodeIndexRejected):
        log.warning(
            "ledger %s: saved episode index not used (%s: %s); it is rebuilt from %d episodes",
            ledger.path,
            restored.reason,
            restored.detail,
            archive.count,
        )
    return restored


def recover(core: AgentCore, owed: tuple[r.Record, ...]) -> tuple[int | None, tuple[UnknownOutcome, ...]]:
    """Close what a crash left open, as records (recorded, not guessed): the open turn and its calls.

    ``owed`` is the refresh the ledger still owes (:func:`holon.projections.derived_before`),
    appended first. Returns the turn closed as interrupted and the calls recorded ``unknown``.
    """
    if owed:
        # The process died after a turn_ended reached the disk and before (all of)
        # its derived records did: append the rest, exactly as the refresh derives them.
        core.append_derived(owed)
        log.warning(
            "ledger %s: the post-turn refresh of the last turn was cut short; appended its %d "
            "missing derived record(s)",
            core.ledger.path,
            len(owed),
        )
        core.flush()
    turn = core.state.runtime.turn
    open_turn = turn.index if turn is not None and turn.open and turn.started_seq is not None else None
    pending = list(core.tools.pending.values())
    if open_turn is None and not pending:
        return None, ()
    # What recovery records happened when the process died, not when it was restarted:
    # stamped with the last record's time (the latest moment the ledger knows of), so
    # the dead turn's duration and a call's result time do not include the downtime.
    crashed_at = core.tail_ts
    unknown: list[UnknownOutcome] = []
    for intent in pending:
        # Recorded in the open turn (the one that died), or outside any turn.
        stored = core.append(
            r.ToolResult(
                call_id=intent.call_id,
                tool=intent.tool,
                status="unknown",
                output=(
                    "outcome unknown: the process ended after this call's intent was recorded and "
                    "before its result was; check its effects before retrying"
                ),
            ),
            open_turn,
            ts=crashed_at,
        )
        unknown.append(core.tools.unknown[-1])
        assert core.tools.unknown[-1].recorded_seq == stored.seq
    if open_turn is not None:
        ended = core.append(
            r.TurnEnded(
                outcome="interrupted",
                error="the process ended while this turn was open; closed when the ledger was reopened",
            ),
            open_turn,
            ts=crashed_at,
        )
        core.refresh(ended)
        log.warning(
            "ledger %s: turn %d was left open, closed as interrupted; %d tool call(s) of unknown outcome",
            core.ledger.path,
            open_turn,
            len(unknown),
        )
    core.flush()
    return open_turn, tuple(unknown)
