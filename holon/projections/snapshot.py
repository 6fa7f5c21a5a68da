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
from typing import Final, Literal

import msgspec

from holon.projections.config import DEFAULT_CONFIG, ProjectionConfig
from holon.projections.state import RuntimeState

__all__ = [
    "SNAPSHOT_FIELDS",
    "DecisionRef",
    "FileRef",
    "FollowUpRef",
    "SnapshotPlanStep",
    "WaitRef",
    "WorkingMemorySnapshot",
    "derive_snapshot",
    "snapshot_lines",
]

# How many of the most recently updated open follow-ups / waits are ranked for the
# snapshot, as a multiple of the cap: bounds derivation cost when many are open.
_SCAN_FACTOR: Final = 8


class SnapshotPlanStep(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One step of the current plan, as shown in working memory."""

    id: str
    text: str
    status: Literal["pending", "in_progress", "done", "blocked", "skipped"]


class FileRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A working-set file and the seq of the touch that brought it into the set."""

    path: str
    seq: int


class DecisionRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A relevant decision and the seq that declared it."""

    id: str
    text: str
    rationale: str | None = None
    seq: int


class FollowUpRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A pending (open) follow-up and the seqs that opened and last changed it."""

    id: str
    text: str
    work_item_id: str | None = None
    seqs: tuple[int, ...]


class WaitRef(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Something the agent is waiting on, and the seq of the waiting intent."""

    id: str
    waiting_on: str
    work_item_id: str | None = None
    resume_hint: str | None = None
    seq: int


class WorkingMemorySnapshot(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Structured working memory at one point of the ledger.

    Fields (caps from :class:`~holon.projections.ProjectionConfig`):

    - ``active_work_item_id``, ``work_state``, ``objective``, ``delivery_target``,
      ``work_summary``: the active work item; ``work_item_seqs`` its declaration and
      last state change.
    - ``scope_constraints``: declaration order, first ``scope_cap``.
    - ``plan``: the active item's plan (else the unscoped plan) in plan order; beyond
      ``plan_cap`` steps, done/skipped steps are dropped first (oldest first), then the
      tail; ``plan_omitted`` counts what was dropped; ``plan_seq`` wrote the plan.
    - ``files``: the ``files_cap`` most recently used files of the active item,
      ordered by the seq that brought them into the set (newest first), then path.
    - ``decisions``: the active item's and unscoped decisions, newest first, then id.
    - ``follow_ups``: open follow-ups, the active item's first, then unscoped, then
      others; within a group newest update first, then id.
    - ``waiting_on``: open waits, newest first, then id.
    """

    active_work_item_id: str | None = None
    work_state: str | None = None
    objective: str | None = None
    delivery_target: str | None = None
    work_summary: str | None = None
    work_item_seqs: tuple[int, ...] = ()
    scope_constraints: tuple[str, ...] = ()
    plan: tuple[SnapshotPlanStep, ...] = ()
    plan_seq: int | None = None
    plan_omitted: int = 0
    files: tuple[FileRef, ...] = ()
    decisions: tuple[DecisionRef, ...] = ()
    follow_ups: tuple[FollowUpRef, ...] = ()
    waiting_on: tuple[WaitRef, ...] = ()

    @property
    def empty(self) -> bool:
        """True when there is no structured working memory at all (render the legacy summary)."""
        return self == _EMPTY


_EMPTY: Final = WorkingMemorySnapshot()

#: Snapshot field names in canonical order (the order of ``changed_fields`` in deltas).
SNAPSHOT_FIELDS: Final[tuple[str, ...]] = WorkingMemorySnapshot.__struct_fields__


def _plan_steps(steps: tuple[SnapshotPlanStep, ...], cap: int) -> tuple[tuple[SnapshotPlanStep, ...], int]:
    if len(steps) <= cap:
        return steps, 0
    excess = len(steps) - cap
    kept: list[SnapshotPlanStep] = []
    for step in steps:
        if excess and step.status in ("done", "skipped"):
            excess -= 1
            continue
        kept.append(step)
    shown = tuple(kept[:cap])
    return shown, len(steps) - len(shown)


def derive_snapshot(state: RuntimeState, config: ProjectionConfig = DEFAULT_CONFIG) -> WorkingMemorySnapshot:
    """Derive working memory from runtime state (pure, bounded cost)."""
    active = state.active_work_item_id
    item = state.work_items[active] if active is not None else None

    plan_entry = state.plans.get(active) if active is not None else None
    if plan_entry is None:
        plan_entry = state.unscoped_plan
    plan: tuple[SnapshotPlanStep, ...] = ()
    plan_omitted = 0
    if plan_entry is not None:
        plan, plan_omitted = _plan_steps(
            tuple(SnapshotPlanStep(id=s.id, text=s.text, status=s.status) for s in plan_entry.steps),
            config.plan_cap,
        )

    # Membership: most recently used; order: when the file entered the set. A file that
    # keeps being used therefore does not reorder working memory (and bump the revision).
    recent_files = islice(
        (f for f in reversed(state.files.values()) if f.work_item_id == active), config.files_cap
    )
    files = tuple(
        FileRef(path=f.path, seq=f.first_seq)
        for f in sorted(recent_files, key=lambda f: (-f.first_seq, f.path))
    )

    relevant = islice(
        (d for d in reversed(state.decisions) if d.work_item_id is None or d.work_item_id == active),
        config.decisions_cap,
    )
    decisions = tuple(
        DecisionRef(id=d.id, text=d.text, rationale=d.rationale, seq=d.seq)
        for d in sorted(relevant, key=lambda d: (-d.seq, d.id))
    )

    candidates = list(islice(reversed(state.follow_ups.values()), config.follow_ups_cap * _SCAN_FACTOR))
    candidates.sort(
        key=lambda f: (
            0 if f.work_item_id == active and active is not None else 1 if f.work_item_id is None else 2,
            -f.seq,
            f.id,
        )
    )
    follow_ups = tuple(
        FollowUpRef(id=f.id, text=f.text, work_item_id=f.work_item_id, seqs=f.seqs)
        for f in candidates[: config.follow_ups_cap]
    )

    waits = sorted(
        islice(reversed(state.waits.values()), config.waiting_cap * _SCAN_FACTOR),
        key=lambda w: (-w.seq, w.id),
    )
    waiting_on = tuple(
        WaitRef(
            id=w.id,
            waiting_on=w.waiting_on,
            work_item_id=w.work_item_id,
            resume_hint=w.resume_hint,
            seq=w.seq,
        )
        for w in waits[: config.waiting_cap]
    )

    return WorkingMemorySnapshot(
        active_work_item_id=active,
        work_state=item.state if item is not None else None,
        objective=item.objective if item is not None else None,
        delivery_target=item.delivery_target if item is not None else None,
        work_summary=item.summary if item is not None else None,
        work_item_seqs=item.seqs if item is not None else (),
        scope_constraints=item.scope_constraints[: config.scope_cap] if item is not None else (),
        plan=plan,
        plan_seq=plan_entry.seq if plan_entry is not None else None,
        plan_omitted=plan_omitted,
        files=files,
        decisions=decisions,
        follow_ups=follow_ups,
        waiting_on=waiting_on,
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
    lines.extend(f"follow-up {f.id}: {f.text} {_ref(*f.seqs)}" for f in snapshot.follow_ups)
    lines.extend(
        f"waiting on {w.id}: {w.waiting_on}"
        + (f" (resume: {w.resume_hint})" if w.resume_hint else "")
        + f" {_ref(w.seq)}"
        for w in snapshot.waiting_on
    )
    return tuple(lines)
