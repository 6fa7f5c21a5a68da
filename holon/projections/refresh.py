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
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from itertools import islice
from typing import Final, Literal, TypeAlias

import msgspec

import holon.records as r
from holon.errors import UsageError
from holon.projections.config import config_field
from holon.projections.memory import ActiveEpisodeBuilder, TurnInterval
from holon.projections.projection import ProjectionState
from holon.projections.snapshot import SNAPSHOT_FIELDS, WorkingMemorySnapshot, derive_snapshot
from holon.projections.state import DecisionEntry, FollowUpEntry, PlanEntry, RuntimeState, WaitEntry, one_line

__all__ = [
    "BOUNDARY_ORDER",
    "DELTA_REASON_PRECEDENCE",
    "boundary_reasons",
    "changed_fields",
    "delta_lines",
    "owed_refresh",
    "post_turn_refresh",
    "refresh_before_prompt",
    "refresh_episode_memory",
    "refresh_working_memory",
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

_STEP_MARK: Final = {"pending": " ", "in_progress": ">", "done": "x", "blocked": "!", "skipped": "-"}
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


def changed_fields(before: WorkingMemorySnapshot, after: WorkingMemorySnapshot) -> tuple[str, ...]:
    """Snapshot fields that differ, in :data:`~holon.projections.SNAPSHOT_FIELDS` order."""
    return tuple(f for f in SNAPSHOT_FIELDS if getattr(before, f) != getattr(after, f))


def _delta_reason(fields: tuple[str, ...], interval: TurnInterval, *, mid_turn: bool = False) -> DeltaReason:
    if "active_work_item_id" in fields:
        return "active_work_changed"
    if interval.task_results:
        return "task_rejoined"
    if interval.waits_resolved or interval.after_outcome == "waiting":
        return "wake_resumed"
    if "plan" in fields or "plan_seq" in fields:
        return "plan_changed"
    return "superseded" if mid_turn else "turn_completed"


#: A decision, follow-up or wait as a delta compares them: by id, newest first by ``seq``.
_Listed: TypeAlias = DecisionEntry | FollowUpEntry | WaitEntry

#: The snapshot fields that together hold the active item's scope constraints.
_SCOPE_FIELDS: Final = frozenset({"scope_constraints", "scope_omitted", "scope_rest"})


def _scope(snapshot: WorkingMemorySnapshot) -> tuple[str, ...]:
    """Every scope constraint of the snapshot's active item, shown or beyond the cap."""
    if not snapshot.scope_rest:
        return snapshot.scope_constraints
    return (*snapshot.scope_constraints, *snapshot.scope_rest)


def _live_plan(runtime: RuntimeState, snapshot: WorkingMemorySnapshot) -> PlanEntry | None:
    """The plan ``snapshot`` shows steps of, as ``runtime`` holds it whole (see derive_snapshot)."""
    active = snapshot.active_work_item_id
    plan = runtime.plans.get(active) if active is not None else None
    plan = plan if plan is not None else runtime.unscoped_plan
    return plan if plan is not None and plan.seq == snapshot.plan_seq else None


def _live_step_texts(runtime: RuntimeState | None, snapshot: WorkingMemorySnapshot) -> dict[str, str]:
    """Every step of the plan ``snapshot`` shows, by id: shown or beyond ``plan_cap``."""
    plan = _live_plan(runtime, snapshot) if runtime is not None and snapshot.plan_omitted else None
    if plan is None:
        return {s.id: s.text for s in snapshot.plan}
    return {s.id: s.text for s in plan.steps}


def _into_view(before: Sequence[_Listed], after: Sequence[_Listed], omitted: int) -> set[str]:
    """Ids ``after`` shows that ``before`` held over its cap, not shown: lists are newest
    first by the seq of the last update, so an entry older than every one ``before``
    showed was already there (a new or updated one is newer than all of them)."""
    if not omitted or not before:
        return set()
    floor = min(e.seq for e in before)
    shown = {e.id for e in before}
    return {e.id for e in after if e.id not in shown and e.seq < floor}


def _ids_diff(
    label: str,
    before: dict[str, str],
    after: dict[str, str],
    *,
    still_open: Container[str] = (),
    into_view: Container[str] = (),
) -> list[str]:
    # An entry coming into view (one before it closed or moved) is not new: "+" read as added.
    lines = [
        f"{label} {key} (was over the cap, now shown): {text}"
        if key in into_view
        else f"+{label} {key}: {text}"
        for key, text in after.items()
        if before.get(key) != text
    ]
    lines.extend(
        f"{label} {key}: still open, not shown (over the cap)" if key in still_open else f"-{label} {key}"
        for key in before
        if key not in after
    )
    return lines


def _open_lines(
    label: str,
    texts: tuple[dict[str, str], dict[str, str]],
    shown: tuple[Sequence[_Listed], Sequence[_Listed]],
    omitted_before: int,
    still_open: Container[str],
) -> list[str]:
    """The lines of a capped list of open entries (follow-ups, waits) from ``before`` to
    ``after`` (``texts`` by id, ``shown`` the lists): added, ended, pushed over the cap
    (``still_open``) or come into view."""
    into_view = _into_view(shown[0], shown[1], omitted_before)
    return _ids_diff(label, texts[0], texts[1], still_open=still_open, into_view=into_view)


def _count_line(
    noun: str, before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, field: str
) -> list[str]:
    """The line for a change only a list's count of entries not shown makes (e.g. one of
    them closed): say what working memory shows."""
    was, now = getattr(before, field), getattr(after, field)
    return [f"older {noun} not shown: {was} → {now}"] if was != now else []


def _not_active(n: int, noun: str, before: WorkingMemorySnapshot) -> str:
    """The one line for the ``n`` entries of the previous active item an item switch hides."""
    previous = before.active_work_item_id
    return f"{n} {noun}{'' if n == 1 else 's'} of {previous} not shown ({previous} is not the active item)"


def _decision_home(runtime: RuntimeState, decision_id: str) -> DecisionEntry | None:
    """Where the runtime keeps a decision now: its item's bucket or the unscoped one."""
    for d in runtime.unscoped_decisions:
        if d.id == decision_id:
            return d
    for kept in runtime.decisions.values():
        for d in kept:
            if d.id == decision_id:
                return d
    return None


def _moved_to_closed(runtime: RuntimeState, gone: DecisionEntry) -> str | None:
    """The item a decision was redeclared for after ``gone``, when that item is not open
    (the runtime carried the record rather than keep it in a bucket), else ``None``."""
    for carried in reversed(runtime.carried):
        if carried.seq <= gone.seq:
            break
        body = carried.body
        if carried.kind == r.Decision.KIND and isinstance(body, dict) and body.get("id") == gone.id:
            return str(body.get("work_item_id"))
    return None


def _decision_lines(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, runtime: RuntimeState | None
) -> list[str]:
    """Decisions added or revised, and for each one no longer shown, why: a decision the cap
    only pushed out still holds (``-decision`` read as withdrawn, as a redeclaration for
    another item is), and the previous active item's are that item's, not withdrawn."""
    previous = before.active_work_item_id
    switched = previous not in (None, after.active_work_item_id)
    into_view = () if switched else _into_view(before.decisions, after.decisions, before.decisions_omitted)
    lines = _ids_diff(
        "decision",
        {d.id: d.text for d in before.decisions},
        {d.id: d.text for d in after.decisions},
        into_view=into_view,
    )
    lines = [line for line in lines if not line.startswith("-")]  # told below, with why
    shown = {d.id for d in after.decisions}
    gone = [d for d in before.decisions if d.id not in shown]
    if switched:
        # The previous item's decisions leave with it: one line, not one "-" per decision.
        theirs = [d for d in gone if d.work_item_id is not None and d.work_item_id == previous]
        if theirs:
            lines.append(_not_active(len(theirs), "decision", before))
            gone = [d for d in gone if d not in theirs]
    pushed_out = after.decisions_omitted > before.decisions_omitted
    for d in gone:
        if runtime is None:
            lines.append(f"-decision {d.id}")
            continue
        home = _decision_home(runtime, d.id)
        if home is not None and home.work_item_id not in (None, after.active_work_item_id):
            lines.append(f"-decision {d.id} (moved to {home.work_item_id})")
        elif home is not None:
            # Kept for the active item (or none), only over the snapshot's cap.
            same = home.seq == d.seq
            state = "still holds" if same else f"revised [ledger:{home.seq}]"
            lines.append(f"decision {d.id}: {state}, not shown (over the cap)")
        elif (closed := _moved_to_closed(runtime, d)) is not None:
            lines.append(f"-decision {d.id} (moved to {closed}, which is not open)")
        elif pushed_out and not switched:
            lines.append(f"decision {d.id}: still holds, not shown (over the cap)")
        else:
            lines.append(f"-decision {d.id}")
    if not lines:
        lines.extend(_count_line("decisions", before, after, "decisions_omitted"))
    return lines


def delta_lines(
    before: WorkingMemorySnapshot,
    after: WorkingMemorySnapshot,
    fields: tuple[str, ...],
    cap: int,
    *,
    runtime: RuntimeState | None = None,
) -> tuple[str, ...]:
    """Compact lines describing ``before → after`` for ``fields`` (at most ``cap`` lines).

    ``runtime`` (the state ``after`` was derived from) tells a wait, follow-up or plan
    step that only fell out of its capped list from one that ended: the first is said to
    be not shown, not ``-``, which reads as resolved, closed or withdrawn.
    """
    open_waits = runtime.waits if runtime is not None else {}
    open_follow_ups = runtime.follow_ups if runtime is not None else {}
    lines: list[str] = []
    scope_told = False
    # From one item to another (not from none): what the previous item showed left with it.
    switched = before.active_work_item_id not in (None, after.active_work_item_id)
    told: set[str] = set()  # membership only: the lists told together with their counts
    for field in fields:
        if field == "active_work_item_id":
            lines.append(f"active work: {before.active_work_item_id} → {after.active_work_item_id}")
        elif field == "work_state" and after.active_work_item_id == before.active_work_item_id:
            lines.append(f"work state: {before.work_state} → {after.work_state}")
        elif field == "objective":
            lines.append(f"objective: {after.objective}")
        elif field == "delivery_target":
            lines.append(f"delivery target: {after.delivery_target}")
        elif field == "work_summary":
            lines.append(f"summary: {after.work_summary}")
        elif field in _SCOPE_FIELDS:
            if scope_told:
                continue
            scope_told = True
            # The whole rule set, shown or not: a constraint moving into view is not
            # new, and one replaced beyond the cap is a change the model must be told.
            was, now = _scope(before), _scope(after)
            old, new = set(was), set(now)
            scope_lines = [f"+scope: {c}" for c in now if c not in old]
            dropped = [c for c in was if c not in new]
            if switched and dropped:
                # The previous item's rules were not dropped: they are its own, and one
                # "-scope" line each read as lifted and crowded out the delta's later lines.
                scope_lines.append(_not_active(len(dropped), "scope constraint", before))
            else:
                scope_lines.extend(f"-scope: {c}" for c in dropped)
            if not scope_lines and before.scope_omitted != after.scope_omitted:
                # Only a repeated constraint came or went: say what working memory shows.
                scope_lines.append(
                    f"scope constraints not shown: {before.scope_omitted} → {after.scope_omitted}"
                )
            lines.extend(scope_lines)
        elif field == "plan":
            old_steps = {s.id: s for s in before.plan}
            new_ids = {s.id for s in after.plan}
            for step in after.plan:
                prev = old_steps.get(step.id)
                if prev is None:
                    lines.append(f"+plan step {step.id} [{_STEP_MARK[step.status]}]: {step.text}")
                elif prev.status != step.status:
                    lines.append(f"plan step {step.id}: {prev.status} → {step.status}")
                elif prev.text != step.text:
                    lines.append(f"plan step {step.id}: {step.text}")
            live_steps = _live_step_texts(runtime, after)
            left = [s for s in before.plan if s.id not in new_ids]
            if switched and left and before.plan_seq != after.plan_seq:
                lines.append(_not_active(len(left), "plan step", before))
                left = []
            for s in left:
                gone = "not shown (over the plan cap)" if s.id in live_steps else None
                lines.append(f"plan step {s.id}: {gone}" if gone else f"-plan step {s.id}")
        elif field == "files":
            old_paths = {f.path for f in before.files}
            new_paths = {f.path for f in after.files}
            added = [f.path for f in after.files if f.path not in old_paths]
            removed = [f.path for f in before.files if f.path not in new_paths]
            if added or removed:
                lines.append("files: " + ", ".join([*(f"+{p}" for p in added), *(f"-{p}" for p in removed)]))
        elif field in ("decisions", "decisions_omitted") and "decisions" not in told:
            told.add("decisions")
            lines.extend(_decision_lines(before, after, runtime))
        elif field in ("follow_ups", "follow_ups_omitted") and "follow_ups" not in told:
            told.add("follow_ups")
            lines.extend(
                _open_lines(
                    "follow-up",
                    ({f.id: f.text for f in before.follow_ups}, {f.id: f.text for f in after.follow_ups}),
                    (before.follow_ups, after.follow_ups),
                    before.follow_ups_omitted,
                    open_follow_ups,
                )
                or _count_line("open follow-ups", before, after, "follow_ups_omitted")
            )
        elif field in ("waiting_on", "waiting_omitted") and "waiting_on" not in told:
            told.add("waiting_on")
            lines.extend(
                _open_lines(
                    "waiting on",
                    (
                        {w.id: w.waiting_on for w in before.waiting_on},
                        {w.id: w.waiting_on for w in after.waiting_on},
                    ),
                    (before.waiting_on, after.waiting_on),
                    before.waiting_omitted,
                    open_waits,
                )
                or _count_line("open waits", before, after, "waiting_omitted")
            )
    clipped = [one_line(line) for line in lines]
    if len(clipped) > cap:
        more = len(clipped) - (cap - 1)
        clipped = [*clipped[: cap - 1], f"(+{more} more changes)"]
    return tuple(clipped)


def superseded_fields(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, *, runtime: RuntimeState | None = None
) -> tuple[str, ...]:
    """Fields in which something ``before`` states is no longer true in ``after``.

    Progress and additions are not (a step done, a file touched, a new decision): a
    prompt may show them a turn late. A withdrawn or changed statement is: another
    active work item; its objective changed or a scope constraint dropped; a decision
    with the same id and another text; a plan step reworded, or removed while not
    finished; a wait no longer open. Given ``runtime`` (the state ``after`` was derived
    from), a wait or plan step that only fell out of its capped list (newer waits, steps
    added before it) is known to still hold, and is not superseded.
    """
    out: set[str] = set()
    if before.active_work_item_id is None:
        pass  # nothing was stated about active work: a new item is an addition
    elif before.active_work_item_id != after.active_work_item_id:
        out.add("active_work_item_id")
    else:
        if before.objective is not None and before.objective != after.objective:
            out.add("objective")
        if not set(_scope(before)) <= set(_scope(after)):
            out.add("scope_constraints")
        steps = _live_step_texts(runtime, after)
        for step in before.plan:
            text = steps.get(step.id)
            if (text is None and step.status not in ("done", "skipped")) or text not in (None, step.text):
                out.add("plan")
                break
    texts = {d.id: d.text for d in after.decisions}
    if any(texts.get(d.id, d.text) != d.text for d in before.decisions):
        out.add("decisions")
    listed = {w.id for w in after.waiting_on}
    still_open = runtime.waits if runtime is not None else {}
    if any(w.id not in listed and w.id not in still_open for w in before.waiting_on):
        out.add("waiting_on")
    return tuple(f for f in SNAPSHOT_FIELDS if f in out)


def _delta(
    state: ProjectionState,
    snapshot: WorkingMemorySnapshot,
    reason: DeltaReason,
    *,
    evidence_from: int,
    evidence_to: int,
) -> r.WorkingMemoryDelta:
    """The delta from the current revision to ``snapshot``, merged into an unconfirmed one."""
    memory = state.memory
    previous = memory.snapshot
    turn_fields = changed_fields(previous, snapshot)
    pending = memory.pending
    if pending is None:
        base = previous
        fields = turn_fields
        from_revision = memory.revision
    else:
        base = memory.pending_base if memory.pending_base is not None else previous
        merged = set(pending.changed_fields) | set(turn_fields)
        fields = tuple(f for f in SNAPSHOT_FIELDS if f in merged)
        from_revision = pending.from_revision
        evidence_from = pending.evidence_from_seq
        reason = min(pending.reason, reason, key=DELTA_REASON_PRECEDENCE.index)
    return r.WorkingMemoryDelta(
        from_revision=from_revision,
        to_revision=memory.revision + 1,
        reason=reason,
        changed_fields=fields,
        lines=delta_lines(base, snapshot, fields, state.config.delta_lines_cap, runtime=state.runtime),
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
    rendered now would show the model both the old and the new statement. So the
    runtime calls this right before it renders a prompt in an open turn and appends
    what it returns: ``()``, or one ``working_memory_delta`` (``seq`` ``-1``, ``ts`` the
    given one — the timestamp of the last record folded — and the open turn's index).
    Outside an open turn it returns ``()``.
    """
    turn = state.runtime.turn
    if turn is None or not turn.open:
        return ()
    snapshot = derive_snapshot(state.runtime, state.config)
    if not superseded_fields(state.memory.snapshot, snapshot, runtime=state.runtime):
        return ()
    interval = state.memory.interval
    fields = changed_fields(state.memory.snapshot, snapshot)
    reason = _delta_reason(fields, interval, mid_turn=True)
    evidence_from = interval.from_seq if interval.from_seq is not None else state.seq
    delta = _delta(state, snapshot, reason, evidence_from=evidence_from, evidence_to=state.seq)
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
    reason = _delta_reason(changed_fields(previous, snapshot), closed)
    assert closed.to_seq is not None and closed.ended_ts is not None
    evidence_from = closed.from_seq if closed.from_seq is not None else closed.to_seq
    delta = _delta(state, snapshot, reason, evidence_from=evidence_from, evidence_to=closed.to_seq)
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
    if builder.work_item_id is not None and runtime.active_work_item_id != builder.work_item_id:
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
    """
    fired = boundary_reasons(state)
    if not fired:
        return ()
    closed = _closed_interval(state)
    assert closed.to_seq is not None and closed.ended_ts is not None
    reason = fired[0]
    config = state.config
    builder = state.memory.builder
    runtime = state.runtime
    work_item_id = builder.work_item_id
    cap = config.episode_list_cap

    # Both dicts are in last-update (seq) order: reading backwards is newest first.
    carried = list(
        islice(
            (
                f
                for f in islice(reversed(runtime.follow_ups.values()), cap * _SCAN_FACTOR)
                if f.work_item_id is None or f.work_item_id == work_item_id
            ),
            cap,
        )
    )
    waits = list(islice(reversed(runtime.waits.values()), cap))

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
        from_seq=builder.from_seq if builder.from_seq is not None else closed.to_seq,
        to_seq=closed.to_seq,
        objective=work.objective if work is not None else None,
        delivery_target=work.delivery_target if work is not None else None,
        summary_lines=_summary_lines(builder, reason, config.episode_summary_cap),
        scope_hints=tuple(one_line(c) for c in work.scope_constraints[:cap]) if work is not None else (),
        touched_files=builder.files,
        commands=builder.commands,
        verification=builder.verification,
        decisions=builder.decisions,
        follow_ups=tuple(one_line(f"{f.id}: {f.text}") for f in carried),
        waiting=tuple(one_line(f"{w.id}: {w.waiting_on}") for w in waits),
        projection_version=state.projection_version,
        projection=config_field(config),
        work_state=work.state if work is not None else None,
    )
    return (r.Record(body=episode, ts=closed.ended_ts, turn=closed.ended_turn),)


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
