"""The delta's text: what changed between two working-memory snapshots, as the model reads it.

:func:`delta_lines` tells ``before → after`` field by field in compact lines (a switch of
the active item summed up in counts, capped lists told apart from ended entries, plans
compared step by step over the whole plan); :func:`changed_fields`,
:func:`superseded_fields` and :func:`results_not_shown` are the comparisons the refresh
(:mod:`holon.projections.refresh`) decides by. Pure: snapshots (and the runtime state the
newer one was derived from) in, lines out.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from typing import Final, NamedTuple, TypeAlias

import msgspec

import holon.records as r
from holon.projections.entries import DecisionEntry, FollowUpEntry, RuntimeState, TaskEntry, WaitEntry
from holon.projections.evidence import one_line
from holon.projections.snapshot import (
    SNAPSHOT_FIELDS,
    SnapshotPlanStep,
    TaskRef,
    WorkingMemorySnapshot,
    failing_line,
    task_activity,
)

__all__ = [
    "DeltaSince",
    "changed_fields",
    "delta_lines",
    "results_not_shown",
    "superseded_fields",
]

_STEP_MARK: Final = {"pending": " ", "in_progress": ">", "done": "x", "blocked": "!", "skipped": "-"}


def changed_fields(before: WorkingMemorySnapshot, after: WorkingMemorySnapshot) -> tuple[str, ...]:
    """Snapshot fields that differ, in :data:`~holon.projections.SNAPSHOT_FIELDS` order."""
    return tuple(f for f in SNAPSHOT_FIELDS if getattr(before, f) != getattr(after, f))


#: A decision, follow-up or wait as a delta compares them: by id, newest first by ``seq``.
_Listed: TypeAlias = DecisionEntry | FollowUpEntry | WaitEntry

#: The snapshot fields that together hold the active item's scope constraints.
_SCOPE_FIELDS: Final = frozenset({"scope_constraints", "scope_omitted", "scope_rest"})


def _scope(snapshot: WorkingMemorySnapshot) -> tuple[str, ...]:
    """Every scope constraint of the snapshot's active item, shown or beyond the cap."""
    if not snapshot.scope_rest:
        return snapshot.scope_constraints
    return (*snapshot.scope_constraints, *snapshot.scope_rest)


def _whole_plan(snapshot: WorkingMemorySnapshot) -> dict[str, SnapshotPlanStep]:
    """Every step of the plan ``snapshot`` shows, by id: shown, then beyond ``plan_cap``."""
    return {s.id: s for s in (*snapshot.plan, *snapshot.plan_rest)}


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
    ended: Mapping[str, str] | None = None,
) -> list[str]:
    # An entry coming into view (one before it closed or moved) is not new: "+" read as added;
    # nor is one the model was shown with another text, which this one supersedes.
    lines = [
        f"{label} {key} (was over the cap, now shown): {text}"
        if key in into_view
        else (f"{label} {key} revised: {text}" if key in before else f"+{label} {key}: {text}")
        for key, text in after.items()
        if before.get(key) != text
    ]
    how = ended or {}
    lines.extend(
        f"{label} {key}: still open, not shown (over the cap)"
        if key in still_open
        else (f"-{label} {key} ({how[key]})" if key in how else f"-{label} {key}")
        for key in before
        if key not in after
    )
    return lines


def _how_ended(label: str, runtime: RuntimeState | None) -> dict[str, str]:
    """How each wait (or follow-up) the runtime's finished window holds ended, by id, in the
    order they ended: ``-waiting on q1`` alone read the same for what arrived, was cancelled or
    timed out, and ``-follow-up F1`` the same for done and dropped."""
    ended: dict[str, str] = {}
    if runtime is None:
        return ended
    if label == "waiting on":
        for w in runtime.resolved_waits:
            how = (w.resolution or "arrived").replace("_", " ")
            ended.pop(w.id, None)
            ended[w.id] = f"{how}: {w.detail}" if w.detail else how
    else:
        for f in runtime.closed_follow_ups:
            ended.pop(f.id, None)
            ended[f.id] = f.status
    return ended


def _open_lines(
    label: str,
    texts: tuple[dict[str, str], dict[str, str]],
    shown: tuple[Sequence[_Listed], Sequence[_Listed]],
    omitted_before: int,
    runtime: RuntimeState | None,
) -> list[str]:
    """The lines of a capped list of open entries (follow-ups, waits) from ``before`` to
    ``after`` (``texts`` by id, ``shown`` the lists): added, ended (and how, when ``runtime``
    knows), pushed over the cap (still open in ``runtime``) or come into view."""
    into_view = _into_view(shown[0], shown[1], omitted_before)
    still_open: Container[str] = ()
    if runtime is not None:
        still_open = runtime.waits if label == "waiting on" else runtime.follow_ups
    ended = _how_ended(label, runtime) if any(key not in texts[1] for key in texts[0]) else None
    return _ids_diff(label, texts[0], texts[1], still_open=still_open, into_view=into_view, ended=ended)


def _count_line(
    noun: str, before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, field: str
) -> list[str]:
    """The line for a change only a list's count of entries not shown makes (e.g. one of
    them closed): say what working memory shows."""
    was, now = getattr(before, field), getattr(after, field)
    return [f"older {noun} not shown: {was} → {now}"] if was != now else []


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _parts(counts: dict[str, int]) -> str:
    return ", ".join(_plural(n, noun) for noun, n in counts.items() if n)


def _item_lines(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, counts: dict[str, dict[str, int]]
) -> list[str]:
    """At a switch, one line for what the new active item brings and one for what the
    previous one takes with it (``counts``: ``"arrived"`` and ``"left"``, noun -> count).

    Working memory shows the new item in full: one ``+`` line per rule, step, file and
    decision restated it at every switch and buried what changed. The previous item's
    rules were not lifted nor its decisions withdrawn: one ``-`` line each read so.
    """
    lines: list[str] = []
    previous, active = before.active_work_item_id, after.active_work_item_id
    if arrived := _parts(counts["arrived"]):
        whose = f"{active}'s" if active is not None else "with no active item,"
        lines.append(f"{whose} {arrived}: see working memory")
    if left := _parts(counts["left"]):
        if previous is None:
            lines.append(f"{left} of no work item not shown ({active} is the active item)")
        else:
            lines.append(f"{previous}'s {left} not shown ({previous} is not the active item)")
    return lines


def _switch_line(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, runtime: RuntimeState | None
) -> str:
    """The switch, and what became of the previous item (the model last read it as active)."""
    previous, active = before.active_work_item_id, after.active_work_item_id
    line = f"active work: {previous} → {active}"
    if after.derived:
        line += (
            f" (no work item declared: what the operator's request [ledger:{after.work_item_seqs[0]}] asks)"
        )
    entry = runtime.find_work_item(previous) if runtime is not None and previous is not None else None
    if entry is None:
        return line
    if entry.state == "active":
        return f"{line} ({previous} is still active; {active} was activated after it)"
    return f"{line} ({previous} is now {entry.state})"


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
) -> tuple[list[str], int, int]:
    """Decisions added or revised, and for each one no longer shown, why: a decision the cap
    only pushed out still holds (``-decision`` read as withdrawn, as a redeclaration for
    another item is), and the previous active item's are that item's, not withdrawn.

    Also returns how many of a newly active item's decisions came with it, and how many of
    the previous item's left with it: counted, not listed (working memory shows the first;
    one that revises a decision shown before is listed).
    """
    previous, active = before.active_work_item_id, after.active_work_item_id
    switched = previous not in (None, active)
    was = {d.id: d.text for d in before.decisions}
    arrived = (
        {d.id for d in after.decisions if d.work_item_id == active and d.id not in was}
        if previous != active and active is not None
        else set()
    )
    # The floor test holds for the rest: the new item's own, older than what was shown, are left out.
    into_view = _into_view(before.decisions, after.decisions, before.decisions_omitted)
    lines = _ids_diff(
        "decision",
        was,
        {d.id: d.text for d in after.decisions if d.id not in arrived},
        into_view=into_view,
    )
    lines = [line for line in lines if not line.startswith("-")]  # told below, with why
    shown = {d.id for d in after.decisions}
    gone = [d for d in before.decisions if d.id not in shown]
    theirs: list[DecisionEntry] = []
    if switched:
        # The previous item's decisions leave with it: counted, not one "-" per decision.
        theirs = [d for d in gone if d.work_item_id is not None and d.work_item_id == previous]
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
    if not lines and not arrived and not theirs:
        lines.extend(_count_line("decisions", before, after, "decisions_omitted"))
    return lines, len(arrived), len(theirs)


def _plan_lines(before: WorkingMemorySnapshot, after: WorkingMemorySnapshot) -> list[str]:
    """Steps added, removed, reworded or with a new status, over the whole plan (shown or
    beyond ``plan_cap``), and steps coming into view or leaving it: a step the window of
    shown steps slid onto is not new, and a step finished as it left the view was finished."""
    was_shown = {s.id: s for s in before.plan}
    was_rest = {s.id: s for s in before.plan_rest}
    now_shown = {s.id for s in after.plan}
    lines: list[str] = []
    seen: set[str] = set()  # membership only: a plan may repeat an id
    for step in (*after.plan, *after.plan_rest):
        if step.id in seen:
            continue
        seen.add(step.id)
        shown = step.id in now_shown
        prev = was_shown.get(step.id)
        came = False  # into view: it was there, over the cap
        if prev is None and (prev := was_rest.get(step.id)) is not None:
            came = shown
        if prev is None:
            hidden = "" if shown else " (not shown: over the plan cap)"
            lines.append(f"+plan step {step.id} [{_STEP_MARK[step.status]}]: {step.text}{hidden}")
            continue
        changes = [f"{prev.status} → {step.status}"] if prev.status != step.status else []
        if prev.text != step.text:
            changes.append(f"reworded: {step.text}" if changes else step.text)
        change = ", ".join(changes)
        if came:
            lines.append(f"plan step {step.id} (was over the cap, now shown): {change or step.text}")
        elif step.id in was_shown and not shown:
            done = f"{change}, " if change else ""
            lines.append(f"plan step {step.id}: {done}not shown (over the plan cap)")
        elif change:
            lines.append(f"plan step {step.id}: {change}{'' if shown else ' (not shown: over the plan cap)'}")
    lines.extend(
        f"-plan step {key}"
        for key in (*was_shown, *(k for k in was_rest if k not in was_shown))
        if key not in seen
    )
    return lines


#: What a field names when only its records were re-recorded, unchanged.
_RERECORDED: Final = {
    "files": "files",
    "decisions": "decisions",
    "follow_ups": "follow-ups",
    "waiting_on": "waits",
    "tasks": "tasks",
}


def _rerecorded(after: WorkingMemorySnapshot, fields: tuple[str, ...]) -> str:
    """The line of a delta whose changes have no line: records re-recorded as they were
    (a work item or plan declared again, a decision repeated), which only moved working
    memory's refs. Without it the prompt said ``changed: work_item_seqs, plan_seq``."""
    what: list[str] = []
    for field in fields:
        if field == "work_item_seqs" and after.work_item_seqs:
            what.append(f"{after.active_work_item_id} [ledger:{after.work_item_seqs[-1]}]")
        elif field == "plan_seq" and after.plan_seq is not None:
            what.append(f"the plan [ledger:{after.plan_seq}]")
        elif field in _RERECORDED:
            what.append(_RERECORDED[field])
    return f"re-recorded as they were, only their refs changed: {', '.join(what) or ', '.join(fields)}"


#: The snapshot fields that together hold the plan shown.
_PLAN_FIELDS: Final = frozenset({"plan", "plan_seq", "plan_work_item_id", "plan_omitted", "plan_rest"})


def _plan_owner(snapshot: WorkingMemorySnapshot) -> tuple[bool, str | None]:
    """Whose plan ``snapshot`` shows: (whether it shows one, its item or ``None`` for unscoped)."""
    return snapshot.plan_seq is not None, snapshot.plan_work_item_id


def _unscoped_hidden(n: int, after: WorkingMemorySnapshot) -> str:
    # Not withdrawn: the unscoped plan is shown again when no item with a plan is active.
    steps = _plural(n, "step")
    return f"the unscoped plan's {steps} not shown ({after.active_work_item_id} has its own plan)"


def _plan_switch(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, counts: dict[str, dict[str, int]]
) -> list[str]:
    """At a switch that shows another plan: the items' own plans are counted with the rest
    of what each item brings or takes; the unscoped plan, no item's, gets a line of its own."""
    lines: list[str] = []
    was, now = len(before.plan) + len(before.plan_rest), len(after.plan) + len(after.plan_rest)
    if was and before.plan_work_item_id is None:
        lines.append(_unscoped_hidden(was, after))
    elif was:
        counts["left"]["plan step"] = was
    if now and after.plan_work_item_id is None:
        lines.append(f"the unscoped plan's {_plural(now, 'step')}: see working memory")
    elif now:
        counts["arrived"]["plan step"] = now
    return lines


class DeltaSince(NamedTuple):
    """Where a delta starts: the revision the model last read (``revision``), the first seq of
    its evidence (``seq``) and, for a delta merged into an unconfirmed one, the snapshot of the
    revision in between (``interim``: the model never read it)."""

    revision: int
    seq: int
    interim: WorkingMemorySnapshot | None = None


def _came_back(before: WorkingMemorySnapshot, since: DeltaSince | None, runtime: RuntimeState | None) -> str:
    """The line of a merged delta whose active item is the one the model last read, after
    another was active in between (a switch and back, or an item activated and finished)."""
    active = before.active_work_item_id or "none"
    interim = since.interim if since is not None else None
    other = interim.active_work_item_id if interim is not None else before.active_work_item_id
    when = f"since revision {since.revision}" if since is not None else "in between"
    if other == before.active_work_item_id:
        return f"active work: {active} again (another item was active {when})"
    if other is None:
        return f"active work: {active} again (no item was active {when})"
    entry = runtime.find_work_item(other) if runtime is not None else None
    now = f"; {other} is now {entry.state}" if entry is not None else ""
    return f"active work: {active} again ({other} was active {when}{now})"


def _opened_and_ended(label: str, runtime: RuntimeState | None, since: DeltaSince | None) -> list[str]:
    """Waits (or follow-ups) opened and ended since the revision the model last read: no
    snapshot it read holds them, so comparing snapshots says nothing, and a merged delta over a
    wake read ``changed: waiting_on`` (the wait it woke for, opened at the previous turn's end)."""
    if runtime is None or since is None:
        return []
    if label == "waiting on":
        fresh = {w.id for w in runtime.resolved_waits if w.seq >= since.seq and w.id not in runtime.waits}
    else:
        # One declared closed straight away (first_seq == seq) was never open.
        fresh = {
            f.id
            for f in runtime.closed_follow_ups
            if since.seq <= f.first_seq < f.seq and f.id not in runtime.follow_ups
        }
    when = f"opened since revision {since.revision}"
    ended = _how_ended(label, runtime)
    return [f"-{label} {key} ({when}, {how})" for key, how in ended.items() if key in fresh]


def _task_progress(task: TaskRef) -> str:
    """What a running task did so far, for a delta line: its activity and plan progress."""
    parts = [task_activity(task) or "no tool calls yet"]
    if task.plan_seq is not None:
        done = sum(1 for step in task.plan if step.status in ("done", "skipped")) + task.plan_omitted
        parts.append(f"plan {done}/{len(task.plan) + task.plan_omitted} steps done")
    return "; ".join(parts)


def _finished_line(task: TaskRef | TaskEntry, why: str = "") -> str:
    status = task.status if task.status is not None else "running"
    return f"task {task.id} finished ({status}): {task.summary or ''}{why}"


def _task_lines(
    before: WorkingMemorySnapshot,
    after: WorkingMemorySnapshot,
    runtime: RuntimeState | None,
    since: DeltaSince | None,
    counts: dict[str, dict[str, int]],
    *,
    entered: bool,
    switched: bool,
) -> list[str]:
    """Tasks started, progressing, finished (with their result) or leaving working memory.

    A result is told once, when it arrives, whether or not working memory can show it:
    ``tasks_cap`` newer results of the active scope in one stretch push the oldest out, and
    the pending delta is then what shows it. At a switch, what the new item's tasks bring and
    the previous item's take with them are counted (as its other lists are)."""
    previous, active = before.active_work_item_id, after.active_work_item_id
    was = {(t.id, t.started_seq): t for t in before.tasks}
    now = {(t.id, t.started_seq): t for t in after.tasks}
    lines: list[str] = []
    for key, task in now.items():
        prev = was.get(key)
        if task.status != "running":
            if prev is None or prev.result_seq != task.result_seq:
                older = since is not None and task.result_seq is not None and task.result_seq < since.seq
                if prev is None and entered and task.work_item_id is not None and older:
                    counts["arrived"]["task result"] = counts["arrived"].get("task result", 0) + 1
                else:
                    lines.append(_finished_line(task))
        elif prev is None:
            if entered and task.work_item_id is not None:
                counts["arrived"]["running task"] = counts["arrived"].get("running task", 0) + 1
            else:
                lines.append(f"+task {task.id} (running): {task.description}")
        elif _task_progress(prev) != _task_progress(task):
            lines.append(f"task {task.id} (running): {_task_progress(task)}")
        elif prev != task:
            lines.append(f"task {task.id} (running): plan revised [ledger:{task.plan_seq}]")
    finished = {(t.id, t.started_seq): t for t in runtime.finished_tasks} if runtime is not None else {}
    told = {key for key, task in now.items() if task.status != "running"}
    for key, task in was.items():
        if key in now:
            continue
        theirs = switched and task.work_item_id is not None and task.work_item_id == previous
        if task.status == "running":
            done = finished.get(key)
            if done is not None and done.result_seq is not None:
                told.add(key)
                where = f"{done.work_item_id} is not the active item" if theirs else "newer task results"
                lines.append(_finished_line(done, f" (not shown: {where})"))
            elif theirs:
                counts["left"]["running task"] = counts["left"].get("running task", 0) + 1
            elif runtime is None or task.id in runtime.tasks:
                lines.append(f"task {task.id}: still running, not shown (over the cap)")
            else:
                lines.append(f"-task {task.id}")
        elif theirs:
            counts["left"]["task result"] = counts["left"].get("task result", 0) + 1
        else:
            ref = f"[ledger:{task.result_seq}]"
            lines.append(f"task {task.id}: result no longer shown (newer task results) {ref}")
    if runtime is not None and since is not None:
        # Results of the active scope that came and were pushed out within this stretch:
        # in no snapshot compared, told here or never.
        for key, done in finished.items():
            if key in told or key in was or done.result_seq is None or done.result_seq < since.seq:
                continue
            if done.work_item_id is None or done.work_item_id == active:
                lines.append(_finished_line(done, " (not shown: newer task results)"))
    return lines


def results_not_shown(before: WorkingMemorySnapshot, after: WorkingMemorySnapshot) -> bool:
    """Whether ``after`` shows a task result ``before`` does not (a task rejoined)."""
    shown = {(t.id, t.result_seq) for t in before.tasks if t.status != "running"}
    return any(t.status != "running" and (t.id, t.result_seq) not in shown for t in after.tasks)


class _Switch(NamedTuple):
    """How the active item moved from ``before`` to ``after``, as every list's lines need it."""

    #: Another item (or none) is active than the one ``before`` showed.
    entered: bool
    #: From one item to another (not from none): what the previous item showed left with it.
    switched: bool
    #: At a switch, noun -> count of what the new item brings (``"arrived"``) and the previous
    #: one takes (``"left"``), in the order the fields were told.
    counts: dict[str, dict[str, int]]


def delta_lines(
    before: WorkingMemorySnapshot,
    after: WorkingMemorySnapshot,
    fields: tuple[str, ...],
    cap: int,
    *,
    runtime: RuntimeState | None = None,
    since: DeltaSince | None = None,
) -> tuple[str, ...]:
    """Compact lines describing ``before → after`` for ``fields`` (at most ``cap`` lines).

    ``runtime`` (the state ``after`` was derived from) tells a wait or follow-up that only
    fell out of its capped list from one that ended (the first is said to be not shown, not
    ``-``, which reads as resolved or closed), and what became of the previous active item.
    ``since`` (where the delta starts) tells, with ``runtime``, the waits and follow-ups
    opened and ended after the revision ``before`` is, which no snapshot compared holds, and
    which item was active in between when a merged delta's active item came back.

    When the active item changes, the new item's objective, scope, plan, files and its own
    decisions are summed up in one line of counts: working memory shows them in full, and a
    ``+`` line each restated them at every switch, burying what changed. Only what the model
    read before and is now different is still told line by line.
    """
    # A merged delta names every field either turn changed; one changed and changed back
    # has nothing to tell ("active work: W1 → W1") but that it came back.
    came_back = "active_work_item_id" in fields and before.active_work_item_id == after.active_work_item_id
    named = fields
    fields = tuple(f for f in fields if getattr(before, f) != getattr(after, f))
    lines: list[str] = [_came_back(before, since, runtime)] if came_back else []
    entered = before.active_work_item_id != after.active_work_item_id
    switch = _Switch(
        entered=entered,
        switched=entered and before.active_work_item_id is not None,
        counts={"arrived": {}, "left": {}},
    )
    told: set[str] = set()  # membership only: the lists told together with their counts
    for field in fields:
        lines.extend(
            _field_lines(field, before, after, runtime=runtime, since=since, switch=switch, told=told)
        )
    # Only when the waits (follow-ups) changed: one opened and ended inside a turn that
    # changed nothing else was in no working memory, and the turn's rounds show it.
    if "waiting_on" in named:
        lines.extend(_opened_and_ended("waiting on", runtime, since))
    if "follow_ups" in named:
        lines.extend(_opened_and_ended("follow-up", runtime, since))
    if entered:
        lines[1:1] = _item_lines(before, after, switch.counts)
    elif not lines and fields:
        lines.append(_rerecorded(after, fields))
    elif not lines and named and since is not None:
        # Every change of a merged delta came back; the field names alone read as changes.
        lines.append(f"no change since revision {since.revision}: what changed in between changed back")
    return _clipped(lines, cap)


def _clipped(lines: list[str], cap: int) -> tuple[str, ...]:
    """Each line on one line, at most ``cap`` of them: the last says how many more there were."""
    clipped = [one_line(line) for line in lines]
    if len(clipped) > cap:
        more = len(clipped) - (cap - 1)
        clipped = [*clipped[: cap - 1], f"(+{more} more changes)"]
    return tuple(clipped)


#: The active item's own fields: at a switch, the new item's, which working memory shows.
_WORK_FIELDS: Final = ("work_state", "objective", "delivery_target", "work_summary")


def _once(told: set[str], key: str) -> bool:
    """Whether the list ``key`` is told now: at the first of its fields, not again at the rest."""
    if key in told:
        return False
    told.add(key)
    return True


def _field_lines(
    field: str,
    before: WorkingMemorySnapshot,
    after: WorkingMemorySnapshot,
    *,
    runtime: RuntimeState | None,
    since: DeltaSince | None,
    switch: _Switch,
    told: set[str],
) -> list[str]:
    """The lines of one changed field (``told``: the lists already told with another field)."""
    entered, counts = switch.entered, switch.counts
    if field == "active_work_item_id":
        return [_switch_line(before, after, runtime)]
    if field in _WORK_FIELDS:
        return [] if entered else [_work_line(field, before, after)]
    if field in _SCOPE_FIELDS:
        return _scope_lines(before, after, switch) if _once(told, "scope") else []
    if field in _PLAN_FIELDS:
        return _plan_field_lines(before, after, switch) if _once(told, "plan") else []
    if field == "files":
        return _file_lines(before, after, switch)
    if field in ("decisions", "decisions_omitted"):
        if not _once(told, "decisions"):
            return []
        lines, counts["arrived"]["decision"], counts["left"]["decision"] = _decision_lines(
            before, after, runtime
        )
        return lines
    if field in ("follow_ups", "follow_ups_omitted"):
        if not _once(told, "follow_ups"):
            return []
        return _open_lines(
            "follow-up",
            ({f.id: f.text for f in before.follow_ups}, {f.id: f.text for f in after.follow_ups}),
            (before.follow_ups, after.follow_ups),
            before.follow_ups_omitted,
            runtime,
        ) or _count_line("open follow-ups", before, after, "follow_ups_omitted")
    if field == "failing":
        return [] if entered else _failing_lines(before, after, runtime)
    if field in ("waiting_on", "waiting_omitted"):
        if not _once(told, "waiting_on"):
            return []
        return _open_lines(
            "waiting on",
            ({w.id: w.waiting_on for w in before.waiting_on}, {w.id: w.waiting_on for w in after.waiting_on}),
            (before.waiting_on, after.waiting_on),
            before.waiting_omitted,
            runtime,
        ) or _count_line("open waits", before, after, "waiting_omitted")
    if field in ("tasks", "tasks_omitted") and _once(told, "tasks"):
        return _task_lines(
            before, after, runtime, since, counts, entered=entered, switched=switch.switched
        ) or _count_line("running tasks", before, after, "tasks_omitted")
    return []


def _work_line(field: str, before: WorkingMemorySnapshot, after: WorkingMemorySnapshot) -> str:
    """The line of a change of the active item's own state, objective, target or summary."""
    if field == "work_state":
        return f"work state: {before.work_state} → {after.work_state}"
    if field == "objective":
        return f"objective: {after.objective}"
    if field == "delivery_target":
        return f"delivery target: {after.delivery_target}"
    return f"summary: {after.work_summary}"


def _scope_lines(before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, switch: _Switch) -> list[str]:
    """Constraints added and dropped, over the whole rule set, shown or not: a constraint
    moving into view is not new, and one replaced beyond the cap is a change the model must
    be told. At a switch they are counted with what each item brings or takes."""
    was, now = _scope(before), _scope(after)
    old, new = set(was), set(now)
    added = [c for c in now if c not in old]
    dropped = [c for c in was if c not in new]
    lines: list[str] = []
    if switch.entered:
        switch.counts["arrived"]["scope constraint"] = len(added)
    else:
        lines.extend(f"+scope: {c}" for c in added)
    if switch.switched:
        switch.counts["left"]["scope constraint"] = len(dropped)
    else:
        lines.extend(f"-scope: {c}" for c in dropped)
    if not lines and not switch.entered and before.scope_omitted != after.scope_omitted:
        # Only a repeated constraint came or went: say what working memory shows.
        lines.append(f"scope constraints not shown: {before.scope_omitted} → {after.scope_omitted}")
    return lines


def _plan_field_lines(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, switch: _Switch
) -> list[str]:
    """The plan's lines: another plan shown at a switch, the active item's first plan of its
    own over the unscoped one, or the same plan's steps compared."""
    if switch.entered and _plan_owner(before) != _plan_owner(after):
        # Another plan is shown: the new item's (or the unscoped one). Compared step
        # by step, two plans sharing ids ("s1") read as the old one edited.
        return _plan_switch(before, after, switch.counts)
    if _plan_owner(before) == _plan_owner(after):
        return _plan_lines(before, after)
    # The active item's first plan of its own replaces the unscoped one shown:
    # every step is new, none is the unscoped plan's step of the same id edited.
    lines = _plan_lines(msgspec.structs.replace(before, plan=(), plan_rest=()), after)
    if hidden := len(before.plan) + len(before.plan_rest):
        lines.append(_unscoped_hidden(hidden, after))
    elif after.plan_seq is not None and not after.plan:
        # No step to tell; not "re-recorded as they were": there was no plan.
        lines.append(f"plan recorded with no steps [ledger:{after.plan_seq}]")
    return lines


def _file_lines(before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, switch: _Switch) -> list[str]:
    """Files come into the working set and gone from it, on one line."""
    old_paths = {f.path for f in before.files}
    new_paths = {f.path for f in after.files}
    added = [f.path for f in after.files if f.path not in old_paths]
    removed = [f.path for f in before.files if f.path not in new_paths]
    if switch.entered:
        # The working set is the active item's: one item's files replace another's.
        switch.counts["arrived"]["file"], switch.counts["left"]["file"] = len(added), len(removed)
        return []
    if added or removed:
        return ["files: " + ", ".join([*(f"+{p}" for p in added), *(f"-{p}" for p in removed)])]
    return []


def _failing_lines(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, runtime: RuntimeState | None
) -> list[str]:
    """A check that started failing, failed again or no longer fails, one line each."""
    was = {f.command: f for f in before.failing}
    now = {f.command: f for f in after.failing}
    lines = [
        "+" + failing_line(f, tail=False) + f" [ledger:{f.seq}]"
        for f in after.failing
        if f.command not in was
    ]
    lines.extend(
        failing_line(f, tail=False) + f" again [ledger:{f.seq}]"
        for f in after.failing
        if f.command in was and was[f.command].seq != f.seq
    )
    for f in before.failing:
        if f.command in now:
            continue
        passed = runtime is not None and any(
            ex.command == f.command and ex.result is not None and ex.result.status == "ok"
            for ex in runtime.tools
            if ex.result_seq is not None and ex.result_seq > f.seq
        )
        how = "passes now" if passed else "no longer shown (newer failures over the cap)"
        lines.append(f"-failing: `{f.command}` {how}")
    return lines


def superseded_fields(
    before: WorkingMemorySnapshot, after: WorkingMemorySnapshot, *, runtime: RuntimeState | None = None
) -> tuple[str, ...]:
    """Fields in which something ``before`` states is no longer true in ``after``.

    Progress and additions are not (a step done, a file touched, a new decision): a
    prompt may show them a turn late. A withdrawn or changed statement is: another
    active work item; its objective changed or a scope constraint dropped; a decision
    with the same id and another text; a plan step reworded, or removed while not
    finished; a wait no longer open; a task shown running that rejoined. Given
    ``runtime`` (the state ``after`` was derived from), a wait or plan step that only fell
    out of its capped list (newer waits, steps added before it) is known to still hold,
    and is not superseded.
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
        steps = _whole_plan(after)
        for step in before.plan:
            now = steps.get(step.id)
            text = now.text if now is not None else None
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
    # A task shown running that rejoined (or was started again) is no longer running.
    running: set[tuple[str, int | None]] = (
        {(t.id, t.started_seq) for t in runtime.tasks.values()}
        if runtime is not None
        else {(t.id, t.started_seq) for t in after.tasks if t.status == "running"}
    )
    if any(t.status == "running" and (t.id, t.started_seq) not in running for t in before.tasks):
        out.add("tasks")
    return tuple(f for f in SNAPSHOT_FIELDS if f in out)
