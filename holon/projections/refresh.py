"""The post-turn refresh: working-memory deltas and episode boundaries, as derived records.

Called right after a turn_ended record has been folded (the RFC's steps 1-7):

1. derive the next snapshot; 2. compare it with the snapshot at the current revision;
3. when it changed, build a :class:`~holon.records.WorkingMemoryDelta`; 4. its
``to_revision`` is the current revision + 1; 5. an unconfirmed pending delta is merged
into it (keeping the original ``from_revision``); 6. the turn's evidence is already
merged into the :class:`~holon.projections.ActiveEpisodeBuilder` record by record;
7. when a boundary is crossed, finalize a :class:`~holon.records.ContextEpisodeRecord`.

The refresh is pure and returns :class:`~holon.records.Record` objects whose ``ts`` and
``turn`` are copied from the turn_ended record and whose ``seq`` is ``-1``; the caller
appends them, in the order returned, right after the turn_ended record, and folds them.
Folding them is what moves the revision, the pending delta, the archive and the epoch.

The delta's lines (what changed, as the model reads it) are :mod:`holon.projections.delta`;
this module re-exports the names of it it always offered.
"""

from __future__ import annotations

from itertools import islice
from typing import Final, Literal, TypeAlias

import msgspec

import holon.records as r
from holon.errors import UsageError
from holon.projections.config import config_field
from holon.projections.delta import (
    DeltaSince,
    changed_fields,
    delta_lines,
    results_not_shown,
    superseded_fields,
)
from holon.projections.evidence import one_line
from holon.projections.memory import ActiveEpisodeBuilder, TurnInterval
from holon.projections.projection import ProjectionState
from holon.projections.snapshot import SNAPSHOT_FIELDS, WorkingMemorySnapshot, derive_snapshot

__all__ = [
    "BOUNDARY_ORDER",
    "DELTA_REASON_PRECEDENCE",
    "DeltaSince",
    "boundary_reasons",
    "changed_fields",
    "delta_lines",
    "owed_refresh",
    "post_turn_refresh",
    "refresh_before_prompt",
    "refresh_episode_memory",
    "refresh_working_memory",
    "results_not_shown",
    "superseded_fields",
]

DeltaReason: TypeAlias = Literal[
    "active_work_changed", "task_rejoined", "wake_resumed", "plan_changed", "superseded", "turn_completed"
]
BoundaryReason: TypeAlias = Literal[
    "active_work_switched", "task_rejoined", "result_checkpoint", "wait_boundary", "turn_cap"
]

#: Delta reasons, highest precedence first: a refresh (and a merge of two deltas)
#: reports the first that applies.
DELTA_REASON_PRECEDENCE: Final[tuple[DeltaReason, ...]] = (
    "active_work_changed",
    "task_rejoined",
    "wake_resumed",
    "plan_changed",
    "superseded",
    "turn_completed",
)

#: Episode boundary reasons, in the order they are checked: when several fire at
#: the same refresh, one episode is finalized, named by the first.
BOUNDARY_ORDER: Final[tuple[BoundaryReason, ...]] = (
    "active_work_switched",
    "task_rejoined",
    "result_checkpoint",
    "wait_boundary",
    "turn_cap",
)

# Carry-forward follow-ups are picked from this many times the cap of the most recently
# updated open ones, so finalizing costs the same however many are open.
_SCAN_FACTOR: Final = 2


def _closed_interval(state: ProjectionState) -> TurnInterval:
    closed = state.memory.closed_interval
    if closed is None or closed.to_seq != state.runtime.seq:
        raise UsageError(
            "the post-turn refresh runs right after a turn_ended record is folded "
            f"(last folded seq is {state.runtime.seq}); fold the turn_ended record first"
        )
    return closed


#: The snapshot fields whose change is a change of the plan itself: its steps, shown or
#: beyond the cap, or whose plan is shown. ``plan_seq`` alone is the plan recorded again
#: as it was (its ref moved), which the delta's line says; "plan changed" above it was false.
_PLAN_CHANGE_FIELDS: Final = frozenset({"plan", "plan_rest", "plan_work_item_id"})


def _delta_reason(
    before: WorkingMemorySnapshot,
    after: WorkingMemorySnapshot,
    interval: TurnInterval,
    *,
    mid_turn: bool = False,
) -> DeltaReason:
    fields = changed_fields(before, after)
    if "active_work_item_id" in fields:
        return "active_work_changed"
    if interval.task_results:
        return "task_rejoined"
    if interval.waits_resolved or interval.after_outcome == "waiting":
        return "wake_resumed"
    # A first plan with no steps (or the plan gone) moves plan_seq alone, and is a change.
    if not _PLAN_CHANGE_FIELDS.isdisjoint(fields) or (before.plan_seq is None) != (after.plan_seq is None):
        return "plan_changed"
    return "superseded" if mid_turn else "turn_completed"


#: The reasons a merged delta keeps from the pending one: events that happened whatever the
#: snapshot looks like now. The others are read off the snapshots, and a merged delta's are
#: read off the one the model last read (``active work changed`` over a switch that came
#: back, ``plan changed`` over a plan as it was).
_EVENT_REASONS: Final = frozenset({"task_rejoined", "wake_resumed", "superseded"})


def _delta(
    state: ProjectionState,
    snapshot: WorkingMemorySnapshot,
    interval: TurnInterval,
    *,
    mid_turn: bool = False,
    evidence_from: int,
    evidence_to: int,
) -> r.WorkingMemoryDelta:
    """The delta from the current revision to ``snapshot``, merged into an unconfirmed one."""
    memory = state.memory
    previous = memory.snapshot
    turn_fields = changed_fields(previous, snapshot)
    pending = memory.pending
    interim: WorkingMemorySnapshot | None = None
    if pending is None:
        base = previous
        fields = turn_fields
        from_revision = memory.revision
        reason = _delta_reason(base, snapshot, interval, mid_turn=mid_turn)
    else:
        base = memory.pending_base if memory.pending_base is not None else previous
        interim = previous
        merged = set(pending.changed_fields) | set(turn_fields)
        fields = tuple(f for f in SNAPSHOT_FIELDS if f in merged)
        from_revision = pending.from_revision
        evidence_from = pending.evidence_from_seq
        kept: DeltaReason = pending.reason if pending.reason in _EVENT_REASONS else "turn_completed"
        now = _delta_reason(base, snapshot, interval, mid_turn=mid_turn)
        reason = min(kept, now, key=DELTA_REASON_PRECEDENCE.index)
    lines = delta_lines(
        base,
        snapshot,
        fields,
        state.config.delta_lines_cap,
        runtime=state.runtime,
        since=DeltaSince(revision=from_revision, seq=evidence_from, interim=interim),
    )
    return r.WorkingMemoryDelta(
        from_revision=from_revision,
        to_revision=memory.revision + 1,
        reason=reason,
        changed_fields=fields,
        lines=lines,
        evidence_from_seq=evidence_from,
        evidence_to_seq=evidence_to,
        projection_version=state.projection_version,
        projection=config_field(state.config),
    )


def refresh_before_prompt(state: ProjectionState, *, ts: int) -> tuple[r.Record, ...]:
    """Before a prompt is rendered inside a turn: refresh working memory if it states something untrue.

    Working memory is refreshed at turn end; but when the turn's own evidence has made
    a statement of the current snapshot untrue (:func:`superseded_fields` — a decision
    revised, a plan step reworded, the active work switched, a wait resolved), a prompt
    rendered now would show the model both the old and the new statement. So it does,
    before the turn's first prompt, when a task result arrived that working memory does
    not show (:func:`results_not_shown`): a result must reach the prompt of the turn it
    arrives in, and one recorded before that prompt is no round after it (one recorded
    after it is). So the
    runtime calls this right before it renders a prompt in an open turn and appends
    what it returns: ``()``, or one ``working_memory_delta`` (``seq`` ``-1``, ``ts`` the
    given one — the timestamp of the last record folded — and the open turn's index).
    Outside an open turn it returns ``()``.
    """
    turn = state.runtime.turn
    if turn is None or not turn.open:
        return ()
    snapshot = derive_snapshot(state.runtime, state.config)
    before = state.memory.snapshot
    # After the turn's first prompt, a result is a round of the turn (shown after the prompt).
    prompt = state.runtime.last_prompt
    prompted = prompt is not None and turn.started_seq is not None and prompt.seq > turn.started_seq
    if not superseded_fields(before, snapshot, runtime=state.runtime) and (
        prompted or not results_not_shown(before, snapshot)
    ):
        return ()
    interval = state.memory.interval
    evidence_from = interval.from_seq if interval.from_seq is not None else state.seq
    delta = _delta(
        state, snapshot, interval, mid_turn=True, evidence_from=evidence_from, evidence_to=state.seq
    )
    return (r.Record(body=delta, ts=ts, turn=turn.index),)


def refresh_working_memory(state: ProjectionState) -> tuple[r.Record, ...]:
    """Steps 1-5: the working-memory delta of this turn, if the snapshot changed.

    Returns ``()`` or one ``working_memory_delta`` record (``seq`` ``-1``; ``ts`` and
    ``turn`` from the turn_ended record). Raises :class:`~holon.errors.UsageError`
    unless the last record folded into ``state`` is a turn_ended.
    """
    closed = _closed_interval(state)
    previous = state.memory.snapshot
    snapshot = derive_snapshot(state.runtime, state.config)
    if snapshot == previous:
        return ()
    assert closed.to_seq is not None and closed.ended_ts is not None
    evidence_from = closed.from_seq if closed.from_seq is not None else closed.to_seq
    delta = _delta(state, snapshot, closed, evidence_from=evidence_from, evidence_to=closed.to_seq)
    return (r.Record(body=delta, ts=closed.ended_ts, turn=closed.ended_turn),)


def _opened_wait_still_open(state: ProjectionState, closed: TurnInterval) -> bool:
    """Whether a waiting intent opened in the closed interval is still open.

    Another wait being open is not enough: a wait opened earlier already closed its own
    episode, and one opened and resolved within the turn is no boundary. ``waits`` is in
    the order waits were (re)opened, so only the newest open one needs looking at.
    """
    waits = state.runtime.waits
    if not closed.waits_opened or not waits or closed.from_seq is None:
        return False
    return next(reversed(waits.values())).seq >= closed.from_seq


def boundary_reasons(state: ProjectionState) -> tuple[BoundaryReason, ...]:
    """Every episode boundary crossed by the turn just ended, in :data:`BOUNDARY_ORDER`."""
    closed = _closed_interval(state)
    builder = state.memory.builder
    runtime = state.runtime
    fired: list[BoundaryReason] = []
    current = runtime.current_work
    if (
        builder.work_item_id is not None
        and (current.id if current is not None else None) != builder.work_item_id
    ):
        fired.append("active_work_switched")
    if closed.task_results:
        fired.append("task_rejoined")
    if closed.result_briefs or closed.task_results:
        fired.append("result_checkpoint")
    if closed.outcome == "waiting" or _opened_wait_still_open(state, closed):
        fired.append("wait_boundary")
    if builder.turns >= state.config.turn_cap:
        fired.append("turn_cap")
    return tuple(fired)


def _summary_lines(builder: ActiveEpisodeBuilder, reason: str, cap: int) -> tuple[str, ...]:
    lines: list[str] = []
    work = builder.work
    if work is not None:
        lines.append(one_line(f"work {work.id} ({work.state}): {work.objective}"))
    else:
        lines.append("no active work item")
    lines.append(
        f"turns {builder.first_turn}-{builder.last_turn}: {builder.turns} turns, "
        f"{builder.tool_calls} tool calls, {builder.failed_calls} failed"
    )
    if builder.plan is not None and builder.plan.steps:
        steps = builder.plan.steps
        done = sum(1 for s in steps if s.status in ("done", "skipped"))
        upcoming = next((s for s in steps if s.status not in ("done", "skipped")), None)
        next_part = f"; next: {upcoming.id} {upcoming.text}" if upcoming is not None else ""
        lines.append(one_line(f"plan: {done}/{len(steps)} steps done{next_part}"))
    if builder.files:
        more = f" (+{builder.files_omitted} more)" if builder.files_omitted else ""
        lines.append(f"touched {len(builder.files)} files{more}")
    body = lines[: cap - 1]
    body.extend(islice(builder.results, max(0, cap - 1 - len(body))))
    body.append(f"closed by: {reason}")
    return tuple(body)


def refresh_episode_memory(state: ProjectionState) -> tuple[r.Record, ...]:
    """Steps 6-7: finalize the active episode if the turn just ended crossed a boundary.

    Returns ``()`` or one ``context_episode`` record (``seq`` ``-1``; ``ts`` and
    ``turn`` from the turn_ended record). Reads neither the revision nor a delta of
    the same refresh, so its result does not depend on whether that delta was folded.

    The episode a new session ended (its work ended with it) comes first, alone: the new
    session's episode then goes on to its own next boundary (one refresh finalizes one
    episode, so a writer that died between two derived records owes at most one).
    """
    closed = _closed_interval(state)
    closing = state.memory.closing
    if closing is not None:
        assert closing.last_seq is not None and closed.ended_ts is not None
        return (_episode(state, closing, "active_work_switched", closing.last_seq, carried=False),)
    fired = boundary_reasons(state)
    if not fired:
        return ()
    assert closed.to_seq is not None
    return (_episode(state, state.memory.builder, fired[0], closed.to_seq, carried=True),)


def _episode(
    state: ProjectionState,
    builder: ActiveEpisodeBuilder,
    reason: BoundaryReason,
    to_seq: int,
    *,
    carried: bool,
) -> r.Record:
    """``builder``'s episode, ending at ``to_seq``, as the refresh after the last turn_ended
    appends it; ``carried``: with the follow-ups and waits still open (of an episode that
    ends now, not of a session that ended before)."""
    closed = _closed_interval(state)
    assert closed.ended_ts is not None
    config = state.config
    runtime = state.runtime
    work_item_id = builder.work_item_id
    cap = config.episode_list_cap

    # Both dicts are in last-update (seq) order: reading backwards is newest first.
    follow_ups = (
        list(
            islice(
                (
                    f
                    for f in islice(reversed(runtime.follow_ups.values()), cap * _SCAN_FACTOR)
                    if f.work_item_id is None or f.work_item_id == work_item_id
                ),
                cap,
            )
        )
        if carried
        else []
    )
    waits = list(islice(reversed(runtime.waits.values()), cap)) if carried else []

    first_turn = builder.first_turn if builder.first_turn is not None else closed.ended_turn
    last_turn = builder.last_turn if builder.last_turn is not None else closed.ended_turn
    work = builder.work
    episode = r.ContextEpisodeRecord(
        episode_id=state.memory.archive.count,
        boundary_reason=reason,
        work_item_id=work_item_id,
        # -1 only for a ledger that carries no turn index on its turn records.
        first_turn=first_turn if first_turn is not None else -1,
        last_turn=last_turn if last_turn is not None else -1,
        from_seq=builder.from_seq if builder.from_seq is not None else to_seq,
        to_seq=to_seq,
        objective=work.objective if work is not None else None,
        delivery_target=work.delivery_target if work is not None else None,
        summary_lines=_summary_lines(builder, reason, config.episode_summary_cap),
        scope_hints=tuple(one_line(c) for c in work.scope_constraints[:cap]) if work is not None else (),
        touched_files=builder.files,
        commands=builder.commands,
        verification=builder.verification,
        decisions=builder.decisions,
        follow_ups=tuple(one_line(f"{f.id}: {f.text}") for f in follow_ups),
        waiting=tuple(one_line(f"{w.id}: {w.waiting_on}") for w in waits),
        projection_version=state.projection_version,
        projection=config_field(config),
        work_state=work.state if work is not None else None,
        requests=builder.requests,
        task_runs=builder.task_runs,
    )
    return r.Record(body=episode, ts=closed.ended_ts, turn=closed.ended_turn)


def post_turn_refresh(state: ProjectionState) -> tuple[r.Record, ...]:
    """The whole post-turn refresh: the delta (if any), then the episode (if any).

    Append the returned records in this order right after the turn_ended record.
    """
    return refresh_working_memory(state) + refresh_episode_memory(state)


def owed_refresh(state: ProjectionState) -> tuple[r.Record, ...]:
    """The derived records of the last post-turn refresh that ``state`` has not folded yet.

    A ledger (a checkpoint, a folded prefix) may stop right after a turn_ended, owing its
    whole refresh, or between the two records of that refresh: its delta folded, its
    episode not yet (the writer died in between). Anywhere else nothing is owed. Append
    the returned records, in order, before anything else.
    """
    closed = state.memory.closed_interval
    if closed is None or closed.to_seq is None:
        return ()
    if closed.to_seq == state.seq:
        return post_turn_refresh(state)
    latest = state.memory.latest_delta
    if state.seq == closed.to_seq + 1 and latest is not None and latest.evidence_to_seq == closed.to_seq:
        # Only the delta of this refresh has evidence up to its turn_ended, and it stands
        # right after it: the record at ``state.seq`` is that delta. The episode does not
        # depend on whether the delta was folded (see refresh_episode_memory), and a
        # derived record changes runtime state only by its seq, so rewinding the seq
        # gives the state the refresh ran on.
        runtime = msgspec.structs.replace(state.runtime, seq=closed.to_seq, applied=state.runtime.applied - 1)
        return refresh_episode_memory(msgspec.structs.replace(state, runtime=runtime))
    return ()
