"""WorkingMemorySnapshot: what the agent must not forget, derived from RuntimeState.

The snapshot is never authored by a model: :func:`derive_snapshot` reads the active
work item, its plan, the working set of files, relevant decisions, open follow-ups and
open waits out of :class:`~holon.projections.RuntimeState`. Every list is capped and
deterministically ordered (see docs/memory-model.md), and every entry keeps the seq(s)
it came from so a renderer can cite ``ledger:<seq>``.

Derivation reads only bounded windows, so its cost does not grow with the ledger.
"""

from __future__ import annotations

from itertools import islice
from operator import attrgetter
from typing import Final, Literal, TypeAlias

import msgspec

import holon.records as r
from holon.projections.config import DEFAULT_CONFIG, ProjectionConfig
from holon.projections.entries import (
    DERIVED_WORK_PREFIX,
    DecisionEntry,
    FailingCheck,
    FollowUpEntry,
    RuntimeState,
    TaskEntry,
    WaitEntry,
)
from holon.projections.evidence import cap_plan, one_line

__all__ = [
    "SNAPSHOT_FIELDS",
    "DecisionRef",
    "FailingRef",
    "FileRef",
    "FollowUpRef",
    "SnapshotPlanStep",
    "TaskRef",
    "WaitRef",
    "WorkingMemorySnapshot",
    "derive_snapshot",
    "failing_line",
    "snapshot_lines",
    "task_activity",
    "task_head",
]

#: A plan step as shown in working memory: the record's own step type, shared rather
#: than copied so deriving a snapshot does not rebuild the plan.
SnapshotPlanStep: TypeAlias = r.PlanStep


class FileRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A working-set file and the seq of the touch that brought it into the set."""

    path: str
    seq: int


# Decisions, follow-ups and waits appear in working memory as the runtime state's own
# entries: each changes only when its record is redeclared, so sharing them keeps the
# snapshot stable and costs nothing to derive. (Files need FileRef: a FileTouch changes
# at every touch.)


class TaskRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """A task as working memory shows it: running, or finished with its result.

    What a :class:`~holon.projections.TaskEntry` holds that a prompt shows: its ``status``
    (``running`` until it rejoined), ``description`` (the prompt it was given), its
    ``result_seq`` and ``summary`` once it rejoined, and what its sub-agent did (the
    entry's counts, files, last commands, plan and last error). Not the entry's newest seq
    nor its calls in flight: a sub-agent's message or a call's start would change working
    memory (and its revision) with nothing to show for it.
    """

    id: str
    status: Literal["running", "ok", "error", "cancelled"]
    description: str
    work_item_id: str | None = None
    started_seq: int | None = None
    result_seq: int | None = None
    summary: str | None = None
    tool_calls: int = 0
    errors: int = 0
    files: tuple[str, ...] = ()
    files_omitted: int = 0
    commands: tuple[str, ...] = ()
    plan: tuple[r.PlanStep, ...] = ()
    plan_seq: int | None = None
    plan_omitted: int = 0
    last_error: str | None = None
    last_error_seq: int | None = None

    @property
    def ref_seq(self) -> int | None:
        """The record a prompt cites for the task: its result, else its start."""
        return self.result_seq if self.result_seq is not None else self.started_seq


def _task_ref(entry: TaskEntry) -> TaskRef:
    return TaskRef(
        id=entry.id,
        status=entry.status if entry.status is not None else "running",
        description=entry.description,
        work_item_id=entry.work_item_id,
        started_seq=entry.started_seq,
        result_seq=entry.result_seq,
        summary=entry.summary,
        tool_calls=entry.tool_calls,
        errors=entry.errors,
        files=entry.files,
        files_omitted=entry.files_omitted,
        commands=entry.commands,
        plan=entry.plan,
        plan_seq=entry.plan_seq,
        plan_omitted=entry.plan_omitted,
        last_error=entry.last_error,
        last_error_seq=entry.last_error_seq,
    )


def task_activity(task: TaskRef) -> str | None:
    """What a task's sub-agent did, in one line: ``14 tool calls, 2 errors, files: a.py, b.py``.

    ``None`` when it recorded no call (a job, or a sub-agent whose steps are not in the
    ledger). Files newest first; ``(and earlier ones)`` when files were pushed out of the
    list (how many is not known: ``files_omitted`` counts the push-outs, and a file can be
    pushed out, touched again and pushed out again).
    """
    if not task.tool_calls and not task.files:
        return None
    calls = f"{task.tool_calls} tool call{'' if task.tool_calls == 1 else 's'}"
    parts = [calls, f"{task.errors} error{'' if task.errors == 1 else 's'}"]
    if task.files:
        more = " (and earlier ones)" if task.files_omitted else ""
        parts.append("files: " + ", ".join(reversed(task.files)) + more)
    return ", ".join(parts)


#: A relevant decision (``id``, ``text``, ``rationale``, ``work_item_id``, ``seq``).
DecisionRef: TypeAlias = DecisionEntry
#: A pending follow-up (``id``, ``text``, ``work_item_id``, ``seqs``: opening and last update).
FollowUpRef: TypeAlias = FollowUpEntry
#: An open wait (``id``, ``waiting_on``, ``work_item_id``, ``resume_hint``, ``seq``).
WaitRef: TypeAlias = WaitEntry
#: A failing verification command (``command``, ``tool``, ``seq``, ``status``, ``exit_code``, ``tail``).
FailingRef: TypeAlias = FailingCheck


class WorkingMemorySnapshot(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, gc=False):
    """Structured working memory at one point of the ledger.

    Fields (caps from :class:`~holon.projections.ProjectionConfig`):

    - ``active_work_item_id``, ``work_state``, ``objective``, ``delivery_target``,
      ``work_summary``: the active work item; ``work_item_seqs`` its declaration and
      last state change. Where the session declares no work item, the work derived from
      the operator's requests (``request:<seq>``, its objective the first request on one
      line, its one seq that request's; see :func:`~holon.projections.derived_work`).
    - ``scope_constraints``: declaration order, first ``scope_cap``; ``scope_omitted``
      counts the rest (shown as a placeholder naming the declaration, never dropped
      without a word: they are the item's rules) and ``scope_rest`` holds them, not to
      be shown but so that replacing or dropping one is a change of working memory.
    - ``plan``: the active item's plan (else the unscoped plan) in plan order; beyond
      ``plan_cap`` steps, done/skipped steps are dropped first (oldest first), then the
      tail; ``plan_omitted`` counts what was dropped and ``plan_rest`` holds it (plan order,
      not shown: so a delta tells a step coming into view from a new one, and a step
      finished as it leaves the view from one only pushed out); ``plan_seq`` wrote the plan,
      of ``plan_work_item_id`` (``None``: the unscoped plan; at a switch, another plan is shown
      only when this changes).
    - ``files``: the ``files_cap`` most recently used files of the active item,
      ordered by the seq that brought them into the set (newest first), then path.
    - ``decisions``: the active item's and unscoped decisions, newest first (one per id);
      ``decisions_omitted`` counts the older ones not shown: kept but over the cap, or
      pushed out of the runtime's buckets by the cap (they still hold).
    - ``follow_ups``: open follow-ups of any work item (each names its item), newest
      update first; ``follow_ups_omitted`` counts the open ones over the cap.
    - ``waiting_on``: open waits, newest first; ``waiting_omitted`` counts the open ones
      over the cap.
    - ``failing``: verification commands of the active work whose latest run failed,
      newest first (at most ``failing_cap``), each with the end of its output.
    - ``tasks``: the tasks of the active item and of no item (as for decisions): the
      running ones (the newest ``tasks_cap`` started, in the order they started), then the
      ``tasks_cap`` newest finished ones, one per job (a newer result of a task of the same
      description replaces it), oldest result first, and beyond the cap the results that
      arrived this turn or the turn before (``TurnState.recent_from``). A finished task
      stays until ``tasks_cap`` newer results of that scope push it out, not before the end
      of the turn after it arrived (or it leaves the runtime's ``finished_window``);
      ``tasks_omitted`` counts the running ones over the cap.

    A count of entries not shown is never left out: a capped list that hid the rest
    without a word read as all there is (an open follow-up, a wait, a decision in force).
    """

    active_work_item_id: str | None = None
    work_state: str | None = None
    objective: str | None = None
    delivery_target: str | None = None
    work_summary: str | None = None
    work_item_seqs: tuple[int, ...] = ()
    scope_constraints: tuple[str, ...] = ()
    scope_omitted: int = 0
    scope_rest: tuple[str, ...] = ()
    plan: tuple[SnapshotPlanStep, ...] = ()
    plan_seq: int | None = None
    plan_work_item_id: str | None = None
    plan_omitted: int = 0
    plan_rest: tuple[SnapshotPlanStep, ...] = ()
    files: tuple[FileRef, ...] = ()
    decisions: tuple[DecisionRef, ...] = ()
    decisions_omitted: int = 0
    follow_ups: tuple[FollowUpRef, ...] = ()
    follow_ups_omitted: int = 0
    waiting_on: tuple[WaitRef, ...] = ()
    waiting_omitted: int = 0
    failing: tuple[FailingRef, ...] = ()

    @property
    def derived(self) -> bool:
        """True when the active work is derived from the operator's requests, not declared."""
        return self.active_work_item_id is not None and self.active_work_item_id.startswith(
            DERIVED_WORK_PREFIX
        )

    tasks: tuple[TaskRef, ...] = ()
    tasks_omitted: int = 0

    @property
    def empty(self) -> bool:
        """True when there is no structured working memory at all (render the legacy summary)."""
        return self == _EMPTY


_EMPTY: Final = WorkingMemorySnapshot()
_by_seq: Final = attrgetter("seq")

#: Snapshot field names in canonical order (the order of ``changed_fields`` in deltas).
SNAPSHOT_FIELDS: Final[tuple[str, ...]] = WorkingMemorySnapshot.__struct_fields__


def _plan_steps(
    steps: tuple[SnapshotPlanStep, ...], cap: int
) -> tuple[tuple[SnapshotPlanStep, ...], tuple[SnapshotPlanStep, ...]]:
    """The steps shown (at most ``cap``) and the rest, each in plan order."""
    return cap_plan(steps, cap)


def _tasks(state: RuntimeState, active: str | None, cap: int) -> tuple[tuple[TaskRef, ...], int]:
    """The tasks working memory shows (see :class:`WorkingMemorySnapshot`) and how many
    running ones the cap leaves out."""
    running = [t for t in state.tasks.values() if t.work_item_id is None or t.work_item_id == active]
    shown = [_task_ref(t) for t in running[-cap:]]
    # The newest results, one per job: a task run again with the same description replaces
    # its older result, which would read as current once the new one is in. While the job
    # runs again its last result stays: it is still the latest known. Shown oldest first,
    # so a later result reads after the one it follows.
    # Beyond the cap, a result that arrived this turn or the turn before stays: a burst of
    # results (a fan-out rejoining) pushed one out of working memory in the turn after it
    # arrived, before the model had worked with it, and no other section held it then.
    recent = state.turn.recent_from if state.turn is not None else None
    seen: set[str] = set()
    newest: list[TaskEntry] = []
    for t in reversed(state.finished_tasks):
        if len(newest) >= cap and (recent is None or t.result_seq is None or t.result_seq < recent):
            break
        if (t.work_item_id is None or t.work_item_id == active) and t.description not in seen:
            if t.description:  # a result whose start is not in the ledger names no job
                seen.add(t.description)
            newest.append(t)
    shown.extend(_task_ref(t) for t in reversed(newest))
    return tuple(shown), max(0, len(running) - cap)


def derive_snapshot(state: RuntimeState, config: ProjectionConfig = DEFAULT_CONFIG) -> WorkingMemorySnapshot:
    """Derive working memory from runtime state (pure, bounded cost)."""
    # Files, plans and decisions belong to the declared item; with none declared (derived
    # work, or none at all) to no item.
    active = state.active_work_item_id
    item = state.current_work

    plan_entry = state.plans.get(active) if active is not None else None
    if plan_entry is None:
        plan_entry = state.unscoped_plan
    plan: tuple[SnapshotPlanStep, ...] = ()
    plan_rest: tuple[SnapshotPlanStep, ...] = ()
    if plan_entry is not None:
        plan, plan_rest = _plan_steps(plan_entry.steps, config.plan_cap)

    # Membership: most recently used; order: when the file entered the set. A file that
    # keeps being used therefore does not reorder working memory (and bump the revision).
    recent_files = islice(
        (f for f in reversed(state.files.values()) if f.work_item_id == active), config.files_cap
    )
    files = tuple(
        FileRef(path=f.path, seq=f.first_seq)
        for f in sorted(recent_files, key=lambda f: (-f.first_seq, f.path))
    )

    # Decision buckets, the follow-ups dict and the waits dict are all kept in the order
    # of their last update (seq order), so reading them backwards is "newest first".
    cap = config.decisions_cap
    own = state.decisions.get(active, ()) if active is not None else ()
    candidates = sorted((*own[-cap:], *state.unscoped_decisions[-cap:]), key=_by_seq, reverse=True)
    seen: set[str] = set()  # membership only: a decision redeclared under another scope
    decisions_list: list[DecisionEntry] = []
    for d in candidates:
        if d.id not in seen and len(decisions_list) < cap:
            seen.add(d.id)
            decisions_list.append(d)
    decisions = tuple(decisions_list)
    unscoped = state.unscoped_decisions
    decisions_omitted = (
        len(own)
        + len(unscoped)
        - len(decisions)
        + state.unscoped_decisions_over_cap
        + (state.decisions_over_cap.get(active, 0) if active is not None else 0)
    )
    follow_ups = tuple(islice(reversed(state.follow_ups.values()), config.follow_ups_cap))
    waiting_on = tuple(islice(reversed(state.waits.values()), config.waiting_cap))
    # The constraints beyond the cap are kept (not shown): compared on the first
    # ``scope_cap`` alone, replacing or dropping the 13th rule changed nothing.
    scope = item.scope_constraints if item is not None else ()
    scope_rest = scope[config.scope_cap :]
    tasks, tasks_omitted = _tasks(state, active, config.tasks_cap)

    current = item.id if item is not None else None
    return WorkingMemorySnapshot(
        active_work_item_id=current,
        work_state=item.state if item is not None else None,
        objective=item.objective if item is not None else None,
        delivery_target=item.delivery_target if item is not None else None,
        work_summary=item.summary if item is not None else None,
        work_item_seqs=item.seqs if item is not None else (),
        scope_constraints=scope[: config.scope_cap],
        scope_omitted=len(scope_rest),
        scope_rest=scope_rest,
        plan=plan,
        plan_seq=plan_entry.seq if plan_entry is not None else None,
        plan_work_item_id=plan_entry.work_item_id if plan_entry is not None else None,
        plan_omitted=len(plan_rest),
        plan_rest=plan_rest,
        files=files,
        decisions=decisions,
        decisions_omitted=decisions_omitted,
        follow_ups=follow_ups,
        follow_ups_omitted=len(state.follow_ups) - len(follow_ups),
        waiting_on=waiting_on,
        waiting_omitted=len(state.waits) - len(waiting_on),
        failing=tuple(f for f in reversed(state.failing) if f.work_item_id == current),
        tasks=tasks,
        tasks_omitted=tasks_omitted,
    )


_STEP_MARKS: Final = {
    "pending": "[ ]",
    "in_progress": "[>]",
    "done": "[x]",
    "blocked": "[!]",
    "skipped": "[-]",
}


def _ref(*seqs: int | None) -> str:
    return " ".join(f"[ledger:{s}]" for s in seqs if s is not None)


def snapshot_lines(snapshot: WorkingMemorySnapshot) -> tuple[str, ...]:
    """A compact, deterministic text rendering of a snapshot (empty for an empty snapshot).

    Each line cites the ledger seq(s) its facts came from as ``[ledger:<seq>]``.
    """
    if snapshot.empty:
        return ()
    lines: list[str] = []
    if snapshot.active_work_item_id is not None:
        lines.append(
            f"active work: {snapshot.active_work_item_id} ({snapshot.work_state}) — {snapshot.objective} "
            + _ref(*snapshot.work_item_seqs)
        )
        if snapshot.delivery_target:
            lines.append(f"delivery target: {snapshot.delivery_target}")
        if snapshot.work_summary:
            lines.append(f"summary: {snapshot.work_summary}")
        lines.extend(f"scope: {c}" for c in snapshot.scope_constraints)
        if snapshot.scope_omitted:
            lines.append(f"(+{snapshot.scope_omitted} scope constraints not shown)")
    else:
        lines.append("active work: none")
    if snapshot.plan_seq is not None:
        lines.append(f"plan: {_ref(snapshot.plan_seq)}")
        lines.extend(f"  {_STEP_MARKS[s.status]} {s.id}: {s.text}" for s in snapshot.plan)
        if snapshot.plan_omitted:
            lines.append(f"  (+{snapshot.plan_omitted} steps not shown)")
    if snapshot.files:
        lines.append("files: " + ", ".join(f"{f.path} {_ref(f.seq)}" for f in snapshot.files))
    lines.extend(
        f"decision {d.id}: {d.text}"
        + (f" — because {d.rationale}" if d.rationale else "")
        + f" {_ref(d.seq)}"
        for d in snapshot.decisions
    )
    if snapshot.decisions_omitted:
        lines.append(f"(+{snapshot.decisions_omitted} older decisions not shown)")
    lines.extend(f"follow-up {f.id}: {f.text} {_ref(*f.seqs)}" for f in snapshot.follow_ups)
    if snapshot.follow_ups_omitted:
        lines.append(f"(+{snapshot.follow_ups_omitted} older open follow-ups not shown)")
    lines.extend(
        f"waiting on {w.id}: {w.waiting_on}"
        + (f" (resume: {w.resume_hint})" if w.resume_hint else "")
        + f" {_ref(w.seq)}"
        for w in snapshot.waiting_on
    )
    if snapshot.waiting_omitted:
        lines.append(f"(+{snapshot.waiting_omitted} older open waits not shown)")
    lines.extend(failing_line(f) + f" {_ref(f.seq)}" for f in snapshot.failing)
    for task in snapshot.tasks:
        lines.extend(task_lines(task))
    if snapshot.tasks_omitted:
        lines.append(f"(+{snapshot.tasks_omitted} older running tasks not shown)")
    return tuple(lines)


def failing_line(check: FailingRef, *, tail: bool = True) -> str:
    """``failing: `pytest -q` (exit 1): FAILED tests/…`` — a failing check on one line."""
    how = f"exit {check.exit_code}" if check.exit_code not in (None, 0) else check.status
    end = f": {check.tail}" if tail and check.tail else ""
    return f"failing: `{check.command}` ({how}){end}"


#: Characters of a task's description and of its result summary a line keeps.
TASK_DESCRIPTION_CHARS: Final = 200
TASK_SUMMARY_CHARS: Final = 300


def task_head(task: TaskRef) -> str:
    """``task t1 (running): <description>`` / ``task t1 finished (ok): <description>``, clipped."""
    state = "(running)" if task.status == "running" else f"finished ({task.status})"
    return f"task {task.id} {state}: {one_line(task.description, TASK_DESCRIPTION_CHARS)}"


def task_lines(task: TaskRef) -> list[str]:
    """A task's lines in :func:`snapshot_lines`: its head and ref, result, activity, last error."""
    lines = [f"{task_head(task)} {_ref(task.ref_seq)}"]
    if task.summary is not None:
        lines.append(f"  result: {one_line(task.summary, TASK_SUMMARY_CHARS)}")
    activity = task_activity(task)
    if activity is not None:
        lines.append(f"  {activity}")
    if task.last_error is not None:
        lines.append(f"  last error: {task.last_error} {_ref(task.last_error_seq)}")
    return lines
