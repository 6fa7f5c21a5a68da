"""A work item's and a plan's lines, as working memory and the active-work section both show them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.refs import ledger_ref
from holon.context.rounds import step_line
from holon.context.sections.bounds import (
    PINNED_ID_CHARS,
    PINNED_OBJECTIVE_CHARS,
    PINNED_SCOPE,
    PINNED_TEXT_CHARS,
    bound_text,
    clip_line,
    ref_list,
    shrunk,
)
from holon.context.sections.layout import Counter
from holon.projections.state import DERIVED_WORK_PREFIX

__all__ = [
    "DERIVED_OBJECTIVE",
    "OPEN_RANK",
    "RECENT_FINISHED_STEPS",
    "TRUNCATED_STEP_CHARS",
    "clip_open_steps",
    "plan_step_lines",
    "work_item_lines",
]

#: The objective a derived work item shows (its request's text is shown where requests are).
DERIVED_OBJECTIVE: Final = (
    "no work item declared: what the session's first request asks (shown under \"Operator's requests\", "
    "or in the history where it was sent)"
)


def work_item_lines(
    lead: str,
    item: tuple[str, str | None, str | None, str | None, Sequence[str]],
    refs: str,
    declaration: Sequence[str],
    *,
    section: str,
    count: Counter,
    bounded: bool,
    omitted: int = 0,
) -> tuple[list[str], list[r.Omission]]:
    """A work item's lines — ``<lead><id> (<state>) — <objective> <refs>``, its delivery
    target and scope constraints — and, ``bounded``, each clipped and at most
    :data:`PINNED_SCOPE` constraints, with a placeholder naming the declaration
    (``declaration``: its ref, or the item's refs when it is not known which one it is).
    ``omitted`` constraints beyond ``scope`` (working memory's cap) are named in every form."""
    work_id, state, objective, target, scope = item
    if work_id.startswith(DERIVED_WORK_PREFIX):
        # Work derived from the session's first request: that request is its objective, and
        # the prompt shows it whole: under the operator's requests, in the history, or as the
        # current input.
        objective = DERIVED_OBJECTIVE
    full = [f"{lead}{work_id} ({state}) — {objective} {refs}"]
    if target:
        full.append(f"delivery target: {target}")
    full.extend(f"scope: {c}" for c in scope)
    full_omitted: list[r.Omission] = []
    if omitted:
        # Rules of the work item the snapshot does not hold: say so, and where they are.
        note = f"+{omitted} more scope constraint{'' if omitted == 1 else 's'} not shown"
        where = f" — restore with ref {ref_list(declaration)}" if declaration else ""
        full.append(f"  ({note}{where})")
        reason = f"work item {clip_line(work_id, PINNED_ID_CHARS)}: {note} (over the working-memory cap)"
        full_omitted = [r.Omission(section=section, ref=ref, reason=reason) for ref in declaration]
    if not bounded:
        return full, full_omitted
    ident, id_cut = bound_text(work_id, PINNED_ID_CHARS, count)
    goal, goal_cut = bound_text(f"{objective}", PINNED_OBJECTIVE_CHARS, count)
    lines = [f"{lead}{ident} ({state}) — {goal} {refs}"]
    target_cut = False
    if target:
        shown_target, target_cut = bound_text(target, PINNED_TEXT_CHARS, count)
        lines.append(f"delivery target: {shown_target}")
    kept = [bound_text(c, PINNED_TEXT_CHARS, count) for c in scope[:PINNED_SCOPE]]
    lines.extend(f"scope: {c}" for c, _ in kept)
    clipped = [
        name
        for name, cut in (("id", id_cut), ("objective", goal_cut), ("delivery target", target_cut))
        if cut
    ]
    scope_cut = sum(cut for _, cut in kept)
    if scope_cut:
        clipped.append(f"{scope_cut} scope constraint{'' if scope_cut == 1 else 's'}")
    hidden = len(scope) - len(kept) + omitted
    if not clipped and not hidden:
        return full, full_omitted
    what = [f"{', '.join(clipped)} clipped"] if clipped else []
    if hidden:
        what.append(f"+{hidden} more scope constraint{'' if hidden == 1 else 's'} not shown")
    # Safety content: every constraint kept is shown from its start, and the note says
    # that more exists and where, so the model can restore it before acting.
    lines.append(f"  ({'; '.join(what)} — restore with ref {ref_list(declaration)})")
    reason = f"work item {clip_line(work_id, PINNED_ID_CHARS)}: {'; '.join(what)}"
    omission = shrunk(section, declaration[0], reason, full, lines, count=count)
    return lines, [msgspec.structs.replace(omission, ref=ref) for ref in declaration]


#: Finished plan steps a full form still lists (the most recent ones, in plan order);
#: older ones are collapsed into one line with the plan's ref. A long-running plan would
#: otherwise fill the prompt with work that is done.
RECENT_FINISHED_STEPS: Final = 3


def plan_step_lines(
    steps: Sequence[r.PlanStep], plan_seq: int, section: str, count: Counter, *, keep_finished: int
) -> tuple[list[str], list[r.Omission]]:
    """A plan's step lines, all but the last ``keep_finished`` finished steps collapsed into one."""
    ref = ledger_ref(plan_seq)
    finished = [i for i, step in enumerate(steps) if step.status in ("done", "skipped")]
    collapsed = set(finished[: len(finished) - keep_finished] if keep_finished else finished)
    lines: list[str] = []
    hidden: list[str] = []
    for i, step in enumerate(steps):
        line = step_line(step)
        (hidden if i in collapsed else lines).append(line)
    omissions: list[r.Omission] = []
    if hidden:
        lines.append(f"  ({len(hidden)} finished steps not shown — restore with ref {ref})")
        omissions.append(
            r.Omission(
                section=section,
                ref=ref,
                reason=f"{len(hidden)} finished plan steps collapsed",
                tokens=count("\n".join(hidden)),
            )
        )
    return lines, omissions


#: Characters of an open plan step's text the pinned minimums (working memory's and active
#: work's truncated forms) keep, on one line: a step of pasted pages was in every form in
#: full, and a plan of a few such steps raised BudgetExceeded at every render.
TRUNCATED_STEP_CHARS: Final = 200
OPEN_RANK: Final = {"in_progress": 0, "blocked": 1, "pending": 2}


def clip_open_steps(steps: Sequence[r.PlanStep], count: Counter) -> tuple[list[r.PlanStep], int]:
    """``steps`` with each open step's text clipped to :data:`TRUNCATED_STEP_CHARS` (and its
    id to :data:`PINNED_ID_CHARS`); how many were."""
    out: list[r.PlanStep] = []
    clipped = 0
    for step in steps:
        if step.status not in OPEN_RANK:
            out.append(step)
            continue
        # Over the limit in characters, not only once on one line: a step of blank lines
        # was kept whole.
        text, text_cut = bound_text(step.text, TRUNCATED_STEP_CHARS, count)
        ident, id_cut = bound_text(step.id, PINNED_ID_CHARS, count)
        clipped += text_cut or id_cut
        out.append(msgspec.structs.replace(step, id=ident, text=text) if text_cut or id_cut else step)
    return out, clipped
