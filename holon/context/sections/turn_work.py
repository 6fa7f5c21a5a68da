"""The TurnScoped sections of the work's live state: the working-memory delta, the active
work item with its current plan, and the queue of other work and open waits.

They can change within a revision (a plan edited, a decision made this turn), so they
come after the cacheable prefix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.budget import Candidate, Form
from holon.context.inputs import ContextInputs
from holon.context.refs import ledger_ref
from holon.context.rounds import step_line
from holon.context.sections.bounds import (
    PINNED_DECISIONS,
    PINNED_ENV_CHARS,
    PINNED_ID_CHARS,
    PINNED_SCOPE,
    PINNED_TEXT_CHARS,
    bound_text,
    cite,
    clip_line,
    clipped_line,
    ref_list,
    shrunk,
)
from holon.context.sections.layout import Counter, section_candidate, section_form
from holon.context.sections.work import (
    OPEN_RANK,
    RECENT_FINISHED_STEPS,
    clip_open_steps,
    plan_step_lines,
    work_item_lines,
)
from holon.projections import PlanEntry, WorkingMemorySnapshot, WorkItemEntry
from holon.projections.snapshot import failing_line

__all__ = ["TRUNCATED_OPEN_STEPS", "active_work_candidate", "pending_delta_candidate", "queue_candidate"]

# What the delta's compact form keeps: its first lines. The rest is named by ref.
_COMPACT_DELTA_LINES: Final = 3


def _delta_ref(delta: r.WorkingMemoryDelta) -> str:
    """The ref of a delta record: the post-turn refresh (or the refresh before a prompt)
    appends it right after its evidence, the delta first (replay verification checks it)."""
    return ledger_ref(delta.evidence_to_seq + 1)


def _keeps_confirmed_delta(inputs: ContextInputs) -> bool:
    """Whether a confirmed delta is shown again: the previous prompt showed it.

    Dropping it at the next turn would change the prompt before the history and re-send
    all of it, so it stays while the revision holds — until a render whose history moves
    anyway gives its room back to the history (``build_context``); later prompts then
    leave it out too.
    """
    prev = inputs.previous
    if prev is None or prev.working_memory_revision != inputs.working_memory_revision:
        return False
    return any(s.section == "pending_delta" and s.form != "omitted" for s in prev.sections)


def pending_delta_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """What changed in working memory to make the current revision.

    Pinned until a prompt confirmed it was shown. After that it is shown again, in the
    same bytes, while that saves a cache break (:func:`_keeps_confirmed_delta`), but no
    longer pinned — working memory already states the current values — so it never
    makes a render fail, and it gives its room to a history that has to move; its ref
    restores it.
    """
    delta = inputs.pending_delta
    pinned = True
    if delta is None:
        delta, pinned = inputs.latest_delta, False
        if delta is None or delta.to_revision != inputs.working_memory_revision:
            return None
        if not _keeps_confirmed_delta(inputs):
            return None
    header = (
        f"## Working memory changes (revision {delta.from_revision} → {delta.to_revision}, "
        f"{delta.reason.replace('_', ' ')})"
    )
    full = [header, *(f"- {line}" for line in delta.lines)]
    if not delta.lines:
        full.append("- changed: " + ", ".join(delta.changed_fields))
    forms = [section_form("full", full, count)]
    ref = _delta_ref(delta)
    kept = [bound_text(line, 120, count) for line in delta.lines[:_COMPACT_DELTA_LINES]]
    clipped = sum(1 for _, cut in kept if cut)
    if len(delta.lines) > _COMPACT_DELTA_LINES or clipped:
        # Also for a few lines, when one is long: the delta is pinned until a prompt
        # confirmed it, and three lines of emoji made a minimum of over a thousand tokens.
        rest = delta.lines[_COMPACT_DELTA_LINES:]
        compact = [header, *(f"- {line}" for line, _ in kept)]
        if rest:
            more = f"+{len(rest)} more changes; current values are in working memory"
            compact.append(f"- ({more} — restore with ref {ref})")
            reason = f"{len(rest)} of {len(delta.lines)} delta lines not shown" + (
                f", {clipped} clipped" if clipped else ""
            )
            tokens = count("\n".join(rest))
        else:
            compact.append(f"- ({clipped} long changes clipped — restore with ref {ref})")
            reason = f"{clipped} delta lines clipped"
            shown = count("\n".join(line for line, _ in kept))
            tokens = max(0, count("\n".join(delta.lines)) - shown)
        omission = r.Omission(section="pending_delta", ref=ref, reason=reason, tokens=tokens)
        forms.append(section_form("compact", compact, count, [omission]))
    contents = [
        r.Omission(section="pending_delta", ref=ref, reason="working-memory delta", tokens=forms[0].tokens)
    ]
    return section_candidate("pending_delta", forms, contents, pinned=pinned)


def _live_matches_snapshot(inputs: ContextInputs) -> bool:
    """Whether the live active item and plan are what working memory shows (then the
    active-work section only points there)."""
    s, work, plan = inputs.snapshot, inputs.active_work, inputs.plan
    if work is None:
        # No active item: working memory shows the unscoped plan, which this section
        # repeated in full at every turn.
        if s.active_work_item_id is not None or plan is None or plan.seq != s.plan_seq:
            return False
    elif not _item_matches(s, work):
        return False
    if s.plan_omitted:
        return False
    live = plan.steps if plan is not None else ()
    return len(live) == len(s.plan) and all(
        (a.id, a.text, a.status) == (b.id, b.text, b.status) for a, b in zip(live, s.plan, strict=True)
    )


def _item_matches(s: WorkingMemorySnapshot, work: WorkItemEntry) -> bool:
    if s.active_work_item_id != work.id:
        return False
    if (s.objective, s.delivery_target, s.work_state) != (work.objective, work.delivery_target, work.state):
        return False
    # The whole rule set: the snapshot's first ``scope_cap`` and the rest it keeps. Compared
    # on the first ones alone, an item with one rule more than the cap never matched, and
    # this section repeated every rule and the plan working memory had just shown.
    n = len(s.scope_constraints)
    return (
        len(work.scope_constraints) == n + len(s.scope_rest)
        and work.scope_constraints[:n] == s.scope_constraints
        and work.scope_constraints[n:] == s.scope_rest
    )


def _scope_rest(
    work: WorkItemEntry, rest: Sequence[str], count: Counter
) -> tuple[list[str], list[str], list[r.Omission]]:
    """The scope constraints beyond working memory's cap, which only the active-work section
    shows when it points at working memory: all of them (full form), and at most
    :data:`PINNED_SCOPE`, each clipped, with a placeholder naming the declaration for the
    rest (the minimum: a list of pages of rules must not make it larger than a window);
    and what the minimum cut."""
    full = [f"scope: {c}" for c in rest]
    kept = [bound_text(c, PINNED_TEXT_CHARS, count) for c in rest[:PINNED_SCOPE]]
    short = [f"scope: {c}" for c, _ in kept]
    clipped = sum(cut for _, cut in kept)
    hidden = len(rest) - len(kept)
    if not clipped and not hidden:
        return full, full, []
    what = [f"{clipped} scope constraint{'' if clipped == 1 else 's'} clipped"] if clipped else []
    if hidden:
        what.append(f"+{hidden} more scope constraint{'' if hidden == 1 else 's'} not shown")
    ref = ledger_ref(work.declared_seq)
    short.append(f"  ({'; '.join(what)} — restore with ref {ref})")
    reason = f"work item {clip_line(work.id, PINNED_ID_CHARS)}: {'; '.join(what)}"
    return full, short, [shrunk("active_work", ref, reason, full, short, count=count)]


def _environment_line(env: r.ExecutionEnvironment | None) -> list[str]:
    if env is None:
        return []
    parts = [
        f"{k}={v}" for k, v in (("workspace", env.workspace), ("cwd", env.cwd), ("branch", env.branch)) if v
    ]
    parts.extend(f"{k}={env.extra[k]}" for k in sorted(env.extra))
    return ["environment: " + ", ".join(parts)] if parts else []


def _environment_bounded(inputs: ContextInputs, count: Counter) -> tuple[list[str], list[r.Omission]]:
    """The environment line clipped to :data:`PINNED_ENV_CHARS`, citing its record when it is."""
    full = _environment_line(inputs.environment)
    if not full or inputs.environment_seq is None:
        return full, []
    shown, cut = bound_text(full[0], PINNED_ENV_CHARS, count)
    if not cut:
        return full, []
    line = f"{shown} {cite(inputs.environment_seq)}"
    ref = ledger_ref(inputs.environment_seq)
    return [line], [shrunk("active_work", ref, "environment clipped", full, [line], count=count)]


def _decided_lines(
    inputs: ContextInputs, count: Counter, *, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    """Decisions made this turn, each citing its record; ``bounded``, the newest
    :data:`PINNED_DECISIONS`, each clipped to one line, and a placeholder for the rest."""
    revision = inputs.working_memory_revision
    decisions = inputs.new_decisions
    if bounded:
        decisions = decisions[-PINNED_DECISIONS:]
    lines: list[str] = []
    omissions: list[r.Omission] = []
    for d in decisions:
        text = d.text + (f" — because {d.rationale}" if d.rationale else "")
        ident, id_cut = bound_text(d.id, PINNED_ID_CHARS, count) if bounded else (d.id, False)
        shown, text_cut = bound_text(text, PINNED_TEXT_CHARS, count) if bounded else (text, False)
        lead = f"decision {ident} (made this turn, after working memory revision {revision}): "
        lines.append(f"{lead}{shown} {cite(d.seq)}")
        if id_cut or text_cut:
            full = f"decision {d.id} (made this turn, after working memory revision {revision}): {text}"
            omissions.append(
                shrunk(
                    "active_work",
                    ledger_ref(d.seq),
                    f"decision {ident} clipped",
                    [full],
                    [lines[-1]],
                    count=count,
                )
            )
    dropped = inputs.new_decisions[: len(inputs.new_decisions) - len(decisions)]
    if dropped:
        refs = [ledger_ref(d.seq) for d in dropped]
        n = len(dropped)
        lines.append(
            f"(+{n} earlier decision{'' if n == 1 else 's'} made this turn not shown — "
            f"restore with ref {ref_list(refs)})"
        )
        omissions.extend(
            r.Omission(
                section="active_work",
                ref=ledger_ref(d.seq),
                reason=f"decision {clip_line(d.id, PINNED_ID_CHARS)} made this turn not shown",
                tokens=count(d.text + (d.rationale or "")),
            )
            for d in dropped
        )
    return lines, omissions


def _failed_lines(inputs: ContextInputs, *, bounded: bool = False) -> list[str]:
    """Checks that failed this turn, each citing its run, with the end of its output
    (``bounded``: clipped to one line, as working memory's compact form shows it)."""
    lead = f"failing this turn (after working memory revision {inputs.working_memory_revision}): "
    lines = []
    for f in inputs.new_failing:
        check = failing_line(f, tail=False).removeprefix("failing: ")
        tail = clip_line(f.tail, 120) if bounded else f.tail
        lines.append(f"{lead}{check} {cite(f.seq)}" + (f": {tail}" if tail else ""))
    return lines


_ACTIVE_WORK_HEADER: Final = "## Active work item"


class _Tail(msgspec.Struct, frozen=True, kw_only=True):
    """What every active-work form ends with: what this turn changed that working memory
    shows only after it (decisions made, checks that failed), then the environment; as the
    fuller forms show it and as the pinned minimum does, with what the minimum cut."""

    full: list[str]
    bounded: list[str]
    cut: list[r.Omission]


def _tail(inputs: ContextInputs, count: Counter) -> _Tail:
    env = _environment_line(inputs.environment)
    env_min, env_cut = _environment_bounded(inputs, count)
    decided, _ = _decided_lines(inputs, count)
    decided += _failed_lines(inputs)
    decided_min, decided_cut = _decided_lines(inputs, count, bounded=True)
    decided_min += _failed_lines(inputs, bounded=True)
    return _Tail(full=[*decided, *env], bounded=[*decided_min, *env_min], cut=[*decided_cut, *env_cut])


def _pointer_forms(line: str, tail: _Tail, count: Counter) -> list[Form]:
    """The forms of a section that says in one ``line`` that there is no work item, or that
    working memory shows the plan: only the tail differs between them."""
    return [
        section_form("full", [_ACTIVE_WORK_HEADER, line, *tail.full], count),
        section_form("truncated", [_ACTIVE_WORK_HEADER, line, *tail.bounded], count, tail.cut),
    ]


def _unchanged_item_forms(
    inputs: ContextInputs, work: WorkItemEntry, tail: _Tail, count: Counter
) -> list[Form]:
    """The forms of a section pointing at working memory, which shows the live item and plan
    as they are: the item's id and the scope constraints beyond working memory's cap."""
    rest = inputs.snapshot.scope_rest
    shown_there = (
        f"objective, plan and the first {len(inputs.snapshot.scope_constraints)} scope constraints"
        if rest
        else "objective, scope and plan"
    )
    pointer = (
        f": unchanged since working memory revision {inputs.working_memory_revision} "
        f"({shown_there} are shown there)."
    )
    rest_full, rest_min, rest_cut = _scope_rest(work, rest, count)
    full = [_ACTIVE_WORK_HEADER, f"{work.id}{pointer}", *rest_full, *tail.full]
    ident, id_cut = bound_text(work.id, PINNED_ID_CHARS, count)
    short = [
        _ACTIVE_WORK_HEADER,
        f"{ident}{pointer} {cite(work.declared_seq)}" if id_cut else f"{work.id}{pointer}",
        *rest_min,
    ]
    cut = (
        [
            shrunk(
                "active_work",
                ledger_ref(work.declared_seq),
                "work item id clipped",
                full[1:2],
                short[1:2],
                count=count,
            )
        ]
        if id_cut
        else []
    )
    return [
        section_form("full", full, count),
        section_form("truncated", [*short, *tail.bounded], count, [*cut, *rest_cut, *tail.cut]),
    ]


def _live_lines(
    inputs: ContextInputs, tail: _Tail, count: Counter, *, keep_finished: int, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    """The live item and its current plan, the last ``keep_finished`` finished steps listed;
    ``bounded``, the pinned minimum's (:func:`_open_steps_bounded`)."""
    work, plan = inputs.active_work, inputs.plan
    out = [_ACTIVE_WORK_HEADER]
    omissions: list[r.Omission] = []
    if work is not None:
        item = (work.id, work.state, work.objective, work.delivery_target, work.scope_constraints)
        work_lines, cut = work_item_lines(
            "",
            item,
            cite(*work.seqs),
            [ledger_ref(work.declared_seq)],
            section="active_work",
            count=count,
            bounded=bounded,
        )
        out.extend(work_lines)
        omissions.extend(cut)
    else:
        out.append("No active work item.")
    if plan is not None:
        out.append(f"current plan: [{ledger_ref(plan.seq)}]")
        steps, note, cut = _open_steps_bounded(plan, count) if bounded else (list(plan.steps), [], [])
        step_lines, collapsed = plan_step_lines(
            steps, plan.seq, "active_work", count, keep_finished=keep_finished
        )
        out.extend(step_lines)
        out.extend(note)
        omissions.extend(collapsed)
        omissions.extend(cut)
    out.extend(tail.bounded if bounded else tail.full)
    if bounded:
        omissions.extend(tail.cut)
    return out, omissions


def active_work_candidate(inputs: ContextInputs, count: Counter) -> Candidate:
    """The live active work item and its current plan (pinned).

    When they equal working memory's, a one-line pointer avoids paying for them twice;
    a mid-revision change (a plan edited, a decision made this turn) is shown here in full
    at once. The truncated form (the pinned minimum) keeps at most
    :data:`TRUNCATED_OPEN_STEPS` open steps, clipped, so a huge plan still fits; it clips
    the objective, delivery target, scope constraints (at most :data:`PINNED_SCOPE`),
    this turn's decisions (the newest :data:`PINNED_DECISIONS`) and the environment too,
    so no single record makes it larger than every window.
    """
    work, plan = inputs.active_work, inputs.plan
    tail = _tail(inputs, count)
    if work is None and plan is None:
        forms = _pointer_forms("No active work item.", tail, count)
    elif work is None and _live_matches_snapshot(inputs):
        pointer = (
            f"No active work item; the plan is unchanged since working memory revision "
            f"{inputs.working_memory_revision} (shown there)."
        )
        forms = _pointer_forms(pointer, tail, count)
    elif work is not None and _live_matches_snapshot(inputs):
        forms = _unchanged_item_forms(inputs, work, tail, count)
    else:
        full, collapsed_full = _live_lines(inputs, tail, count, keep_finished=RECENT_FINISHED_STEPS)
        compact, collapsed = _live_lines(inputs, tail, count, keep_finished=0)
        truncated, cut = _live_lines(inputs, tail, count, keep_finished=0, bounded=True)
        forms = [
            section_form("full", full, count, collapsed_full),
            section_form("compact", compact, count, collapsed),
            section_form("truncated", truncated, count, cut),
        ]
    return section_candidate("active_work", forms)


#: Open plan steps the pinned minimum of the active-work section lists. The live plan is
#: not capped like working memory's copy: without a bound, a plan of a few thousand open
#: steps made every prompt fail with BudgetExceeded, and the agent could not take a single
#: turn to work through it.
TRUNCATED_OPEN_STEPS: Final = 24


def _open_steps_bounded(
    plan: PlanEntry, count: Counter
) -> tuple[list[r.PlanStep], list[str], list[r.Omission]]:
    """The plan with at most :data:`TRUNCATED_OPEN_STEPS` open steps (in progress first, then
    blocked, then the earliest pending; shown in plan order), their texts clipped to one
    line of :data:`TRUNCATED_STEP_CHARS`; the placeholder line and omission for the rest."""
    open_steps = [(i, s) for i, s in enumerate(plan.steps) if s.status in OPEN_RANK]
    ranked = sorted(open_steps, key=lambda item: (OPEN_RANK[item[1].status], item[0]))
    kept = {i for i, _ in ranked[:TRUNCATED_OPEN_STEPS]}
    hidden = [step_line(s) for i, s in open_steps if i not in kept]
    steps, clipped = clip_open_steps(
        [s for i, s in enumerate(plan.steps) if s.status not in OPEN_RANK or i in kept], count
    )
    if not hidden and not clipped:
        return steps, [], []
    ref = ledger_ref(plan.seq)
    shown = [f"+{len(hidden)} more open steps not shown"] if hidden else []
    reason = [f"{len(hidden)} open plan steps not shown"] if hidden else []
    if clipped:
        shown.append(f"{clipped} long steps clipped")
        reason.append(f"{clipped} plan steps clipped")
    omission = r.Omission(
        section="active_work",
        ref=ref,
        reason=", ".join(reason),
        tokens=count("\n".join(hidden)) if hidden else 0,
    )
    return steps, [f"  ({', '.join(shown)} — restore with ref {ref})"], [omission]


def queue_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """Queued and waiting work items and open waits.

    The compact form clips objectives and waits to one short line and drops scope lines
    and resume hints; a line that lost something keeps the ref that restores it.
    """
    if not (inputs.suspended or inputs.queued or inputs.waiting or inputs.open_waits):
        return None
    section = "queue"
    header = "## Queued and waiting work"
    full, compact = [header], [header]
    shortened: list[r.Omission] = []
    contents: list[r.Omission] = []

    def entry(label: str, full_lines: list[str], short: str, cut: bool, seq: int) -> None:
        # ``seq`` is the record that holds what the compact line leaves out.
        ref = ledger_ref(seq)
        full.extend(full_lines)
        tokens = count("\n".join(full_lines))
        contents.append(r.Omission(section=section, ref=ref, reason=label, tokens=tokens))
        if cut:
            compact.append(f"{short} [{ref}]")
            shortened.append(
                r.Omission(
                    section=section,
                    ref=ref,
                    reason=f"{label} shortened",
                    tokens=max(0, tokens - count(compact[-1])),
                )
            )
        else:
            compact.append(short)

    for item in inputs.suspended:
        objective, cut = clipped_line(item.objective, 60)
        entry(
            f"suspended work item {item.id}",
            [
                f"suspended {item.id}: {item.objective} {cite(*item.seqs)}",
                *(f"  scope: {c}" for c in item.scope_constraints),
            ],
            f"suspended {item.id}: {objective}",
            cut or bool(item.scope_constraints),
            item.declared_seq,
        )
    for label, items in (("queued", inputs.queued), ("waiting", inputs.waiting)):
        for item in items:
            objective, cut = clipped_line(item.objective, 60)
            entry(
                f"{label} work item {item.id}",
                [f"{label} {item.id}: {item.objective} {cite(*item.seqs)}"],
                f"{label} {item.id}: {objective}",
                cut,
                item.declared_seq,
            )
    for wait in inputs.open_waits:
        hint = f" (resume: {wait.resume_hint})" if wait.resume_hint else ""
        work = f" for {wait.work_item_id}" if wait.work_item_id else ""
        waiting_on, cut = clipped_line(wait.waiting_on, 60)
        entry(
            f"open wait {wait.id}",
            [f"open wait {wait.id}{work}: {wait.waiting_on}{hint} {cite(wait.seq)}"],
            f"open wait {wait.id}: {waiting_on}",
            cut or bool(hint or work),
            wait.seq,
        )
    return section_candidate(
        section,
        [section_form("full", full, count), section_form("compact", compact, count, shortened)],
        contents,
    )
