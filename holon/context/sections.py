"""Section builders: each turns part of :class:`ContextInputs` into a budget candidate.

Sections, in prompt order (see docs/context-rendering.md for the full table):

====  ==================  ===========  ========  ======  ================================
 #    name                stability    priority  pinned  forms
====  ==================  ===========  ========  ======  ================================
 1    system              stable       100       yes     full
 2    tools               stable       100       yes     full
 3    working_memory      agent        90        yes     full, compact, truncated
 3'   context_summary     agent        70        no      full, truncated (only without WM)
 4    episodes            agent        60        no      full, compact, truncated
 5    pending_delta       turn         85        yes(*)  full, compact
 6    active_work         turn         95        yes     full, compact, truncated
 7    queue               turn         50        no      full, compact
 8    mandate             turn         98        yes     full, compact, truncated
 9    history             turn         40        no      filled newest-first
10    recalled            turn         30        no      full (room the history left)
11    current_input       turn         100       yes     full, truncated
====  ==================  ===========  ========  ======  ================================

(*) until a prompt confirmed it; then, unpinned, shown again while its revision holds
and the history keeps its start.

That is the ``rfc`` layout. The ``recitation`` layout (:data:`LAYOUTS`) keeps the same
sections and forms in another order — system, tools, context_summary, episodes, mandate,
history, then working_memory, pending_delta, active_work, queue, recalled, current_input — and
there working memory is TurnScoped: it sits after the history, so a new revision re-sends
only the prompt's tail, not the history (docs/context-rendering.md, *Layouts*).

Only facts fixed by the working-memory revision and the compression epoch are placed in
Stable/AgentScoped sections (the snapshot, the archived episodes); everything that can
change within a revision (the live plan, the environment, queues, history, input) is
TurnScoped. Every shortened or dropped item names the ref that restores it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Final, Literal

import msgspec

import holon.records as r
from holon.context.budget import Candidate, Form, FormKind, Stability
from holon.context.inputs import ContextInputs
from holon.context.refs import episode_ref, ledger_ref
from holon.context.rounds import step_line
from holon.projections import (
    PlanEntry,
    TaskRef,
    ToolExecution,
    WorkingMemorySnapshot,
    WorkItemEntry,
    task_activity,
)
from holon.projections.snapshot import TASK_DESCRIPTION_CHARS, TASK_SUMMARY_CHARS, failing_line
from holon.projections.state import DERIVED_WORK_PREFIX, RequestEntry, one_line

__all__ = [
    "LAYOUTS",
    "MANDATE_HEADER",
    "MANDATE_HEADER_BEFORE_HISTORY",
    "SECTION_ORDER",
    "SECTION_PRIORITY",
    "SECTION_STABILITY",
    "Counter",
    "Layout",
    "active_work_candidate",
    "context_summary_candidate",
    "current_input_candidate",
    "episode_text_forms",
    "episodes_candidate",
    "mandate_candidate",
    "pending_delta_candidate",
    "queue_candidate",
    "section_order",
    "section_stability",
    "system_candidate",
    "tools_candidate",
    "working_memory_candidate",
]

Counter = Callable[[str], int]

SECTION_ORDER: Final = (
    "system",
    "tools",
    "working_memory",
    "context_summary",
    "episodes",
    "pending_delta",
    "active_work",
    "queue",
    "mandate",
    "history",
    "recalled",
    "current_input",
)
SECTION_STABILITY: Final[dict[str, Stability]] = {
    "system": "stable",
    "tools": "stable",
    "working_memory": "agent",
    "context_summary": "agent",
    "episodes": "agent",
    "pending_delta": "turn",
    "active_work": "turn",
    "queue": "turn",
    "history": "turn",
    "mandate": "turn",
    "recalled": "turn",
    "current_input": "turn",
}
SECTION_PRIORITY: Final = {
    "system": 100,
    "tools": 100,
    "current_input": 100,
    "mandate": 98,
    "active_work": 95,
    "working_memory": 90,
    "pending_delta": 85,
    "context_summary": 70,
    "episodes": 60,
    "queue": 50,
    "history": 40,
    "recalled": 30,
}
Layout = Literal["rfc", "recitation"]
#: The section orders a prompt can be laid out in (``RenderConfig.layout``).
LAYOUTS: Final[dict[Layout, tuple[str, ...]]] = {
    # The RFC's order: the sections by stability class, working memory in the prefix.
    "rfc": SECTION_ORDER,
    # The history right after what changes only with the epoch, and everything that
    # changes with the revision or the turn after it, newest last: the history stays a
    # cached prefix across revisions, and what must bind is read last.
    "recitation": (
        "system",
        "tools",
        "context_summary",
        "episodes",
        "mandate",
        "history",
        "working_memory",
        "pending_delta",
        "active_work",
        "queue",
        "recalled",
        "current_input",
    ),
}


def section_order(layout: Layout) -> tuple[str, ...]:
    """The sections in prompt order under ``layout``."""
    return LAYOUTS[layout]


def section_stability(name: str, layout: Layout) -> Stability:
    """The stability class of section ``name`` under ``layout``: the cache block it is in.

    Working memory changes with the revision. In the rfc layout it ends the cacheable
    prefix (AgentScoped); in the recitation layout it follows the history, in the
    TurnScoped tail, so the AgentScoped block is what changes with the epoch alone.
    """
    if layout == "recitation" and name == "working_memory":
        return "turn"
    return SECTION_STABILITY[name]


_PINNED: Final = frozenset(
    {"system", "tools", "working_memory", "pending_delta", "active_work", "mandate", "current_input"}
)

# What the compact forms keep: working memory's first files, decisions and follow-ups,
# and the first lines of a pending delta. The rest is named by ref in a placeholder.
_COMPACT_FILES: Final = 6
_COMPACT_DECISIONS: Final = 4
_COMPACT_FOLLOW_UPS: Final = 3
_COMPACT_DELTA_LINES: Final = 3


def _form(kind: FormKind, lines: Sequence[str], count: Counter, omissions: Sequence[r.Omission] = ()) -> Form:
    text = "\n".join(lines)
    return Form(kind=kind, text=text, tokens=count(text), omissions=tuple(omissions))


def _candidate(
    name: str, forms: Sequence[Form], contents: Sequence[r.Omission] = (), *, pinned: bool | None = None
) -> Candidate:
    # A shorter form is worth offering only when it is smaller: an identical one adds
    # nothing, and one whose placeholders cost more than what it drops never fits where
    # the better form did not (and would inflate a pinned minimum).
    kept: list[Form] = []
    for f in forms:
        if not kept or (f.text != kept[-1].text and f.tokens < kept[-1].tokens):
            kept.append(f)
    return Candidate(
        name=name,
        order=SECTION_ORDER.index(name),
        stability=SECTION_STABILITY[name],
        priority=SECTION_PRIORITY[name],
        pinned=name in _PINNED if pinned is None else pinned,
        forms=tuple(kept),
        contents=tuple(contents),
    )


def _clipped(text: str, limit: int) -> tuple[str, bool]:
    """``text`` on one line, cut to ``limit`` characters; and whether anything was cut."""
    flat = " ".join(text.split())
    return (flat, False) if len(flat) <= limit else (flat[: limit - 1] + "…", True)


def _clip(text: str, limit: int) -> str:
    return _clipped(text, limit)[0]


def _refs(*seqs: int | None) -> str:
    return " ".join(f"[{ledger_ref(s)}]" for s in seqs if s is not None)


# What the pinned minimums (the truncated forms of working memory, active work and the
# current input) keep of each text a record holds. Their size must not depend on the size
# of any one record: a pasted spec as an objective or a scope constraint, a wait or a
# decision of a few pages made the minimum larger than any window, and every render
# raised BudgetExceeded — an agent that could not take a turn. Each clipped text's line
# or a placeholder names the record that restores it.
_PINNED_TEXT_CHARS: Final = 200
_PINNED_OBJECTIVE_CHARS: Final = 400
#: An id (of a work item, step, wait, decision or call) or a trigger: an ordinary one — a
#: UUID counts 43 tokens — is never clipped; one of pasted text is.
_PINNED_ID_CHARS: Final = 128
_PINNED_ID_TOKENS: Final = 48
_PINNED_ENV_CHARS: Final = 400
#: Scope constraints and decisions made this turn the minimums list (the live work item's
#: constraints, unlike working memory's, are not capped by the projection).
_PINNED_SCOPE: Final = 12
_PINNED_DECISIONS: Final = 8
#: Unknown-outcome calls the current input's minimum lists (the newest; the projection's
#: tool window bounds them only by its configured size).
_PINNED_CALLS: Final = 8
#: Refs a placeholder lists at most (the plan's omissions name every one).
_PINNED_REFS: Final = 8


#: A clipped text also keeps to a token bound of a third of its characters: characters
#: alone bound emoji (about 2.7 tokens each) or CJK text at several times the tokens of
#: prose, which is about a quarter of a token per character.
_CHARS_PER_TOKEN: Final = 3


def _bounded(text: str, limit: int, count: Counter) -> tuple[str, bool]:
    """``text`` as it is when it has at most ``limit`` characters and ``limit // 3`` tokens (so
    an ordinary text reads the same in every form), else on one line clipped to fit both;
    and whether it changed. An id keeps to :data:`_PINNED_ID_TOKENS` instead."""
    most = _PINNED_ID_TOKENS if limit == _PINNED_ID_CHARS else limit // _CHARS_PER_TOKEN
    if len(text) <= limit and count(text) <= most:
        return text, False
    # A text over the limit is changed even when its one-line form fits (a run of blank
    # lines): shown as it is, it would cost tokens per character.
    flat = " ".join(text.split())
    n = min(len(flat), limit)
    while True:
        shown = flat if n >= len(flat) else flat[: n - 1] + "…"
        tokens = count(shown)
        if tokens <= most or n <= 1:
            return shown, True
        n = min(n - 1, n * most // tokens)


def _ref_list(refs: Sequence[str]) -> str:
    """``refs`` for a placeholder: at most :data:`_PINNED_REFS` of them, then how many more."""
    unique = list(dict.fromkeys(refs))
    shown = ", ".join(unique[:_PINNED_REFS])
    return shown if len(unique) <= _PINNED_REFS else f"{shown} and {len(unique) - _PINNED_REFS} more"


def _shrunk(
    section: str, ref: str, reason: str, full: Sequence[str], shown: Sequence[str], *, count: Counter
) -> r.Omission:
    """The omission for lines a minimum shortened: what the shortening saved, by ``ref``."""
    tokens = max(0, count("\n".join(full)) - count("\n".join(shown)))
    return r.Omission(section=section, ref=ref, reason=reason, tokens=tokens)


def _work_lines(
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
    :data:`_PINNED_SCOPE` constraints, with a placeholder naming the declaration
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
        where = f" — restore with ref {_ref_list(declaration)}" if declaration else ""
        full.append(f"  ({note}{where})")
        reason = f"work item {_clip(work_id, _PINNED_ID_CHARS)}: {note} (over the working-memory cap)"
        full_omitted = [r.Omission(section=section, ref=ref, reason=reason) for ref in declaration]
    if not bounded:
        return full, full_omitted
    ident, id_cut = _bounded(work_id, _PINNED_ID_CHARS, count)
    goal, goal_cut = _bounded(f"{objective}", _PINNED_OBJECTIVE_CHARS, count)
    lines = [f"{lead}{ident} ({state}) — {goal} {refs}"]
    target_cut = False
    if target:
        shown_target, target_cut = _bounded(target, _PINNED_TEXT_CHARS, count)
        lines.append(f"delivery target: {shown_target}")
    kept = [_bounded(c, _PINNED_TEXT_CHARS, count) for c in scope[:_PINNED_SCOPE]]
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
    lines.append(f"  ({'; '.join(what)} — restore with ref {_ref_list(declaration)})")
    reason = f"work item {_clip(work_id, _PINNED_ID_CHARS)}: {'; '.join(what)}"
    omission = _shrunk(section, declaration[0], reason, full, lines, count=count)
    return lines, [msgspec.structs.replace(omission, ref=ref) for ref in declaration]


# --------------------------------------------------------------------------- Stable


def system_candidate(policy: r.SystemPolicy | None, count: Counter) -> Candidate | None:
    """The system/policy prompt, verbatim (pinned: a model call without it is a different agent)."""
    if policy is None or not policy.text:
        return None
    return _candidate("system", [_form("full", [policy.text], count)])


def tools_candidate(policy: r.SystemPolicy | None, count: Counter) -> Candidate | None:
    """Tool definitions as JSON lines (adapters also pass them structured).

    The parameters keep the order the policy declares them in, which is the order the
    adapters send them in: the section's text is what the cache identity hashes, and
    Anthropic caches the tool definitions as sent, so a policy whose schemas differ only
    in key order is a different cacheable prefix. Sorted, both rendered one cache key
    while the second request missed the first's cache.
    """
    if policy is None or not policy.tools:
        return None
    lines = ["## Tools"]
    for tool in policy.tools:
        # The line's own keys in sorted order, as they always were.
        spec = msgspec.json.encode(
            {"description": tool.description, "name": tool.name, "parameters": tool.parameters}
        ).decode()
        lines.append(spec)
    return _candidate("tools", [_form("full", lines, count)])


# --------------------------------------------------------------------------- AgentScoped


def _not_shown(n: int, noun: str, refs: Sequence[str], *, more: bool) -> str:
    """The placeholder for entries a form leaves out: how many, and the refs that restore them."""
    nouns = noun if n == 1 else f"{noun}s"
    what = f"+{n} more {nouns}" if more else f"{n} {nouns} not shown"
    return f"({what} — restore with ref {', '.join(dict.fromkeys(refs))})"


#: Finished plan steps a full form still lists (the most recent ones, in plan order);
#: older ones are collapsed into one line with the plan's ref. A long-running plan would
#: otherwise fill the prompt with work that is done.
RECENT_FINISHED_STEPS: Final = 3


def _step_lines(
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


def _plan_lines(
    snapshot: WorkingMemorySnapshot, count: Counter, *, keep_finished: int, clip: bool = False
) -> tuple[list[str], list[r.Omission]]:
    if snapshot.plan_seq is None:
        return [], []
    ref = ledger_ref(snapshot.plan_seq)
    plan, clipped = _clip_open_steps(snapshot.plan, count) if clip else (list(snapshot.plan), 0)
    steps, omissions = _step_lines(
        plan, snapshot.plan_seq, "working_memory", count, keep_finished=keep_finished
    )
    lines = [f"plan: [{ref}]", *steps]
    if snapshot.plan_omitted:
        # Dropped by the snapshot's plan cap (every form): the plan record has them all.
        lines.append(f"  (+{snapshot.plan_omitted} steps not shown — restore with ref {ref})")
        omissions.append(
            r.Omission(
                section="working_memory",
                ref=ref,
                reason=f"{snapshot.plan_omitted} plan steps over the working-memory cap",
            )
        )
    if clipped:
        lines.append(f"  ({clipped} long steps clipped — restore with ref {ref})")
        omissions.append(
            r.Omission(section="working_memory", ref=ref, reason=f"{clipped} plan steps clipped")
        )
    return lines, omissions


#: Characters of an open plan step's text the pinned minimums (working memory's and active
#: work's truncated forms) keep, on one line: a step of pasted pages was in every form in
#: full, and a plan of a few such steps raised BudgetExceeded at every render.
_TRUNCATED_STEP_CHARS: Final = 200
_OPEN_RANK: Final = {"in_progress": 0, "blocked": 1, "pending": 2}


def _clip_open_steps(steps: Sequence[r.PlanStep], count: Counter) -> tuple[list[r.PlanStep], int]:
    """``steps`` with each open step's text clipped to :data:`_TRUNCATED_STEP_CHARS` (and its
    id to :data:`_PINNED_ID_CHARS`); how many were."""
    out: list[r.PlanStep] = []
    clipped = 0
    for step in steps:
        if step.status not in _OPEN_RANK:
            out.append(step)
            continue
        # Over the limit in characters, not only once on one line: a step of blank lines
        # was kept whole.
        text, text_cut = _bounded(step.text, _TRUNCATED_STEP_CHARS, count)
        ident, id_cut = _bounded(step.id, _PINNED_ID_CHARS, count)
        clipped += text_cut or id_cut
        out.append(msgspec.structs.replace(step, id=ident, text=text) if text_cut or id_cut else step)
    return out, clipped


def _declaration(inputs: ContextInputs) -> list[str]:
    """The ref of the record that declared working memory's active work item (objective,
    target, scope): the live entry's declaration when it is one of the snapshot's seqs,
    else both of them (a declaration and a state change, in either order)."""
    s = inputs.snapshot
    live = (inputs.active_work, *inputs.suspended, *inputs.queued, *inputs.waiting)
    for item in live:
        if item is not None and item.id == s.active_work_item_id and item.declared_seq in s.work_item_seqs:
            return [ledger_ref(item.declared_seq)]
    return [ledger_ref(seq) for seq in s.work_item_seqs]


def _core_lines(
    inputs: ContextInputs, count: Counter, *, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    s = inputs.snapshot
    if s.active_work_item_id is None:
        return ["active work: none"], []
    declaration = _declaration(inputs)
    if not declaration:
        bounded = False  # hand-made inputs without seqs: nothing could restore a clipped text
    item = (s.active_work_item_id, s.work_state, s.objective, s.delivery_target, s.scope_constraints)
    return _work_lines(
        "active work: ",
        item,
        _refs(*s.work_item_seqs),
        declaration,
        section="working_memory",
        count=count,
        bounded=bounded,
        omitted=s.scope_omitted,
    )


def _wait_lines(
    s: WorkingMemorySnapshot, count: Counter, *, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    """Open waits, one line each citing the wait; ``bounded``, each text clipped (the line
    still cites the record that restores it)."""
    lines: list[str] = []
    omissions: list[r.Omission] = []
    for w in s.waiting_on:
        full = f"waiting on {w.id}: {w.waiting_on}" + (f" (resume: {w.resume_hint})" if w.resume_hint else "")
        if bounded:
            ident, id_cut = _bounded(w.id, _PINNED_ID_CHARS, count)
            on, on_cut = _bounded(w.waiting_on, _PINNED_TEXT_CHARS, count)
            hint, hint_cut = _bounded(w.resume_hint or "", _PINNED_TEXT_CHARS, count)
            if id_cut or on_cut or hint_cut:
                short = f"waiting on {ident}: {on}" + (f" (resume: {hint})" if hint else "")
                omissions.append(
                    _shrunk(
                        "working_memory",
                        ledger_ref(w.seq),
                        f"wait {ident} clipped",
                        [full],
                        [short],
                        count=count,
                    )
                )
                full = short
        lines.append(f"{full} {_refs(w.seq)}")
    return lines, omissions


def _summary_dropped(s: WorkingMemorySnapshot, count: Counter) -> tuple[list[str], list[r.Omission]]:
    """The placeholder and omissions for a work summary a shorter form leaves out."""
    if not s.work_summary:
        return [], []
    # The summary is on the work item's declaration, one of its (at most two) seqs.
    refs = [ledger_ref(seq) for seq in s.work_item_seqs]
    if not refs:
        return ["(work summary not shown — see `holon memory`)"], []
    tokens = count(s.work_summary)
    omissions = [
        r.Omission(section="working_memory", ref=ref, reason="work summary not shown", tokens=tokens)
        for ref in refs
    ]
    return [f"(work summary not shown — restore with ref {', '.join(refs)})"], omissions


def _compact_entry(
    noun: str,
    entry_id: str,
    text: str,
    seq: int,
    full_line: str,
    *,
    count: Counter,
    limit: int,
    dropped: str | None = None,
) -> tuple[str, list[r.Omission]]:
    """A decision's or follow-up's compact line (text clipped to ``limit``, no rationale) and,
    when it lost something (``dropped`` names a part always left out), the omission."""
    shown, clipped = _clipped(text, limit)
    line = f"{noun} {entry_id}: {shown} {_refs(seq)}"
    if not clipped and dropped is None:
        return line, []
    how = "clipped" if clipped else f"{dropped} not shown"
    omission = r.Omission(
        section="working_memory",
        ref=ledger_ref(seq),
        reason=f"{noun} {entry_id} shortened ({how})",
        tokens=max(0, count(full_line) - count(line)),
    )
    return line, [omission]


def _over_cap_lines(s: WorkingMemorySnapshot) -> tuple[list[str], list[str], list[str]]:
    """The placeholders for the decisions, open follow-ups and open waits working memory's
    caps leave out (every form keeps them: a capped list read as all there is)."""

    def line(n: int, noun: str, tail: str = "") -> list[str]:
        if not n:
            return []
        return [f"(+{n} older {noun}{'' if n == 1 else 's'} not shown (over the working-memory cap){tail})"]

    return (
        line(s.decisions_omitted, "decision", ": in force unless revised since"),
        line(s.follow_ups_omitted, "open follow-up"),
        line(s.waiting_omitted, "open wait"),
    )


def _task_text(
    task: TaskRef, part: str, text: str, ref: int | None, count: Counter, *, bounded: bool
) -> tuple[str, list[r.Omission]]:
    """A task's description or result as a form shows it: on one line, clipped (the
    description to :data:`TASK_DESCRIPTION_CHARS`, the result to :data:`TASK_SUMMARY_CHARS`;
    ``bounded``, to the pinned minimum's token bound too); the omission names the record
    that holds it whole."""
    limit = TASK_DESCRIPTION_CHARS if part == "description" else TASK_SUMMARY_CHARS
    shown, cut = _bounded(text, limit, count) if bounded else _clipped(text, limit)
    if not cut or ref is None:
        return shown, []
    reason = f"task {_clip(task.id, _PINNED_ID_CHARS)} {part} clipped"
    return shown, [_shrunk("working_memory", ledger_ref(ref), reason, [text], [shown], count=count)]


def _task_parts(task: TaskRef) -> list[tuple[str, int | None, list[str]]]:
    """What a task's sub-agent did, as (what, the ref restoring it, its lines): one line of
    counts and files, the last error, a running task's plan."""
    parts: list[tuple[str, int | None, list[str]]] = []
    activity = task_activity(task)
    if activity is not None:
        parts.append(("what its sub-agent did", task.ref_seq, [f"  {activity}"]))
    if task.last_error is not None:
        error = f"  last error: {task.last_error} {_refs(task.last_error_seq)}"
        parts.append(("last error", task.last_error_seq, [error]))
    if task.status == "running" and task.plan_seq is not None:
        ref = ledger_ref(task.plan_seq)
        plan = [f"  plan: [{ref}]", *(f"  {step_line(step)}" for step in task.plan)]
        if task.plan_omitted:
            plan.append(f"    (+{task.plan_omitted} steps not shown — restore with ref {ref})")
        parts.append(("plan", task.plan_seq, plan))
    return parts


#: What of a task's parts (:func:`_task_parts`) each working-memory form shows.
_TASK_PARTS_SHOWN: Final[dict[str, frozenset[str]]] = {
    "full": frozenset({"what its sub-agent did", "last error", "plan"}),
    "compact": frozenset({"what its sub-agent did"}),
    "truncated": frozenset({"what its sub-agent did"}),
}


def _task_lines(
    s: WorkingMemorySnapshot, count: Counter, form: FormKind
) -> tuple[list[str], list[r.Omission]]:
    """The tasks working memory holds, each citing its result (else its start).

    Every form shows each task's status, description and result: a result must be read
    before it leaves working memory (docs/memory-model.md), and both are clipped, so the
    tasks' share of the pinned minimum is bounded by ``tasks_cap``. The full form adds what
    the sub-agent did (one line), its last error and a running task's plan; the compact form
    only the first, and the truncated form clips it; whatever a form leaves out is named by
    its ref."""
    bounded = form == "truncated"
    shown_parts = _TASK_PARTS_SHOWN[form]
    lines: list[str] = []
    omissions: list[r.Omission] = []
    for task in s.tasks:
        ident = _bounded(task.id, _PINNED_ID_CHARS, count)[0] if bounded else task.id
        state = "(running)" if task.status == "running" else f"finished ({task.status})"
        what, cut = _task_text(
            task, "description", task.description, task.started_seq, count, bounded=bounded
        )
        omissions.extend(cut)
        lines.append(f"task {ident} {state}: {what} {_refs(task.ref_seq)}".rstrip())
        if task.summary is not None:
            result, cut = _task_text(task, "result", task.summary, task.result_seq, count, bounded=bounded)
            omissions.extend(cut)
            lines.append(f"  result: {result}")
        left_out: list[tuple[str, str]] = []
        for part, ref, part_lines in _task_parts(task):
            if bounded and part == "what its sub-agent did":
                # One line, but of file paths as long as a model wrote them.
                shown, clipped = _bounded(part_lines[0].strip(), _PINNED_TEXT_CHARS, count)
                lines.append(f"  {shown}")
                if clipped and ref is not None:
                    reason = f"task {_clip(task.id, _PINNED_ID_CHARS)}: {part} clipped"
                    omissions.append(
                        _shrunk("working_memory", ledger_ref(ref), reason, part_lines, [shown], count=count)
                    )
                continue
            if part in shown_parts or ref is None:
                lines.extend(part_lines)
                if part == "plan" and task.plan_omitted and ref is not None:
                    # The plan's line naming the steps over the cap is a placeholder too.
                    ident_short = _clip(task.id, _PINNED_ID_CHARS)
                    reason = f"task {ident_short}: {task.plan_omitted} plan steps not shown"
                    omissions.append(r.Omission(section="working_memory", ref=ledger_ref(ref), reason=reason))
                continue
            left_out.append((part, ledger_ref(ref)))
            reason = f"task {_clip(task.id, _PINNED_ID_CHARS)}: {part} not shown"
            tokens = count("\n".join(part_lines))
            omissions.append(
                r.Omission(section="working_memory", ref=ledger_ref(ref), reason=reason, tokens=tokens)
            )
        if left_out:
            what_parts = ", ".join(part for part, _ in left_out)
            lines.append(
                f"  ({what_parts} not shown — restore with ref {_ref_list([ref for _, ref in left_out])})"
            )
    if s.tasks_omitted:
        n = s.tasks_omitted
        lines.append(
            f"(+{n} older running task{'' if n == 1 else 's'} not shown (over the working-memory cap))"
        )
    return lines, omissions


def working_memory_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """Working memory at the current revision; the minimum keeps work, scope, plan and waits.

    The full form lists the last 3 finished plan steps (older ones are collapsed into one
    line); the compact form collapses them all and keeps at most 6 files, 4 decisions
    (clipped, without rationale) and 3 follow-ups (clipped); the truncated form keeps only
    the work item, scope, open plan steps and waits, each text clipped (so no one record
    makes the pinned minimum larger than a window). Whatever a form leaves out is named
    in a placeholder line with the refs that restore it, and reported as its omissions.
    """
    s = inputs.snapshot
    if s.empty:
        return None
    header = f"## Working memory (revision {inputs.working_memory_revision})"
    section = "working_memory"
    core, core_omitted = _core_lines(inputs, count)
    if s.work_summary:
        core.append(f"summary: {s.work_summary}")
    file_lines = [f"{f.path} {_refs(f.seq)}" for f in s.files]
    decision_lines = [
        f"decision {d.id}: {d.text}"
        + (f" — because {d.rationale}" if d.rationale else "")
        + f" {_refs(d.seq)}"
        for d in s.decisions
    ]
    follow_up_lines = [f"follow-up {f.id}: {f.text} {_refs(*f.seqs)}" for f in s.follow_ups]
    plan_full, plan_full_omitted = _plan_lines(s, count, keep_finished=RECENT_FINISHED_STEPS)
    full = [header, *core, *plan_full]
    if file_lines:
        full.append("files: " + ", ".join(file_lines))
    older_decisions, older_follow_ups, older_waits = _over_cap_lines(s)
    full.extend(decision_lines)
    full.extend(older_decisions)
    full.extend(follow_up_lines)
    full.extend(older_follow_ups)
    waits = [*_wait_lines(s, count)[0], *older_waits]
    full.extend(waits)
    # Failing checks: the end of their output in full, clipped in compact, the command alone
    # (and its ref) in the minimum: what is red is state the agent must not lose.
    full.extend(f"{failing_line(f)} {_refs(f.seq)}" for f in s.failing)
    failing_compact = [
        f"{failing_line(f, tail=False)}: {_clip(f.tail, 120)} {_refs(f.seq)}"
        if f.tail
        else f"{failing_line(f)} {_refs(f.seq)}"
        for f in s.failing
    ]
    failing_min = [f"{failing_line(f, tail=False)} {_refs(f.seq)}" for f in s.failing]
    task_full, task_full_omitted = _task_lines(s, count, "full")
    full.extend(task_full)

    # What dropping each entry loses: its ref and the tokens of its full line.
    file_drops = [
        r.Omission(
            section=section, ref=ledger_ref(f.seq), reason=f"file {f.path} not shown", tokens=count(line)
        )
        for f, line in zip(s.files, file_lines, strict=True)
    ]
    decision_drops = [
        r.Omission(
            section=section, ref=ledger_ref(d.seq), reason=f"decision {d.id} not shown", tokens=count(line)
        )
        for d, line in zip(s.decisions, decision_lines, strict=True)
    ]
    follow_up_drops = [
        r.Omission(
            section=section,
            ref=ledger_ref(f.seqs[-1]),
            reason=f"follow-up {f.id} not shown",
            tokens=count(line),
        )
        for f, line in zip(s.follow_ups, follow_up_lines, strict=True)
    ]
    summary_lines, summary_drops = _summary_dropped(s, count)
    plan_short, plan_short_omitted = _plan_lines(s, count, keep_finished=0)
    plan_min, plan_min_omitted = _plan_lines(s, count, keep_finished=0, clip=True)

    compact = [header, *_core_lines(inputs, count)[0], *summary_lines, *plan_short]
    compact_omitted = [*core_omitted, *summary_drops, *plan_short_omitted]
    if s.files:
        line = "files: " + ", ".join(f.path for f in s.files[:_COMPACT_FILES])
        if len(s.files) > _COMPACT_FILES:
            rest = file_drops[_COMPACT_FILES:]
            line += " " + _not_shown(len(rest), "file", [o.ref for o in rest], more=True)
            compact_omitted.extend(rest)
        compact.append(line)
    for d, full_line in zip(s.decisions[:_COMPACT_DECISIONS], decision_lines, strict=False):
        line, shortened = _compact_entry(
            "decision",
            d.id,
            d.text,
            d.seq,
            full_line,
            count=count,
            limit=100,
            dropped="rationale" if d.rationale else None,
        )
        compact.append(line)
        compact_omitted.extend(shortened)
    for f, full_line in zip(s.follow_ups[:_COMPACT_FOLLOW_UPS], follow_up_lines, strict=False):
        line, shortened = _compact_entry(
            "follow-up", f.id, f.text, f.seqs[-1], full_line, count=count, limit=80
        )
        compact.append(line)
        compact_omitted.extend(shortened)
    for noun, drops, kept, older in (
        ("decision", decision_drops, _COMPACT_DECISIONS, older_decisions),
        ("follow-up", follow_up_drops, _COMPACT_FOLLOW_UPS, older_follow_ups),
    ):
        if len(drops) > kept:
            rest = drops[kept:]
            compact.append(_not_shown(len(rest), noun, [o.ref for o in rest], more=True))
            compact_omitted.extend(rest)
        compact.extend(older)
    compact.extend(waits)
    compact.extend(failing_compact)
    task_compact, task_compact_omitted = _task_lines(s, count, "compact")
    compact.extend(task_compact)
    compact_omitted.extend(task_compact_omitted)

    core_min, core_cut = _core_lines(inputs, count, bounded=True)
    waits_min, waits_cut = _wait_lines(s, count, bounded=True)
    tasks_min, tasks_cut = _task_lines(s, count, "truncated")
    truncated = [
        header,
        *core_min,
        *summary_lines,
        *plan_min,
        *waits_min,
        *older_waits,
        *failing_min,
        *tasks_min,
    ]
    truncated_omitted = [*core_cut, *summary_drops, *plan_min_omitted, *waits_cut, *tasks_cut]
    for noun, drops, older in (
        ("decision", decision_drops, older_decisions),
        ("follow-up", follow_up_drops, older_follow_ups),
        ("file", file_drops, []),
    ):
        if drops:
            truncated.append(_not_shown(len(drops), noun, [o.ref for o in drops], more=False))
            truncated_omitted.extend(drops)
        truncated.extend(older)
    return _candidate(
        "working_memory",
        [
            _form("full", full, count, [*core_omitted, *plan_full_omitted, *task_full_omitted]),
            _form("compact", compact, count, compact_omitted),
            _form("truncated", truncated, count, truncated_omitted),
        ],
    )


def context_summary_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """The legacy flat summary — only when there is no structured working memory."""
    summary = inputs.context_summary
    if summary is None or not inputs.snapshot.empty or not summary.text:
        return None
    source = f" from {summary.source}" if summary.source else ""
    header = f"## Earlier context (legacy summary{source})"
    forms = [_form("full", [header, summary.text], count)]
    contents: list[r.Omission] = []
    if inputs.context_summary_seq is not None:
        ref = ledger_ref(inputs.context_summary_seq)
        contents.append(
            r.Omission(section="context_summary", ref=ref, reason="legacy summary", tokens=forms[0].tokens)
        )
        head = summary.text[:1200]
        if len(head) < len(summary.text):
            omission = r.Omission(
                section="context_summary",
                ref=ref,
                reason="legacy summary truncated",
                tokens=count(summary.text[len(head) :]),
            )
            shown = f"{len(head):,} of {len(summary.text):,} chars"
            note = f"[summary truncated at {shown} — restore with ref {ref}]"
            forms.append(_form("truncated", [header, head, note], count, [omission]))
    return _candidate("context_summary", forms, contents)


# Episodes are immutable and selected again turn after turn: their texts are memoized.
@functools.lru_cache(maxsize=1024)
def episode_text_forms(episode: r.ContextEpisodeRecord) -> tuple[str, str]:
    """The full and compact text of one selected episode; both show its ref."""
    item = f", {episode.work_item_id}" if episode.work_item_id else ""
    head = (
        f"{episode_ref(episode.episode_id)} (turns {episode.first_turn}-{episode.last_turn}{item}, "
        f"{episode.boundary_reason}, ledger:{episode.from_seq}..{episode.to_seq})"
    )
    objective = f" {episode.objective}" if episode.objective else ""
    lines = [head + objective]
    if episode.delivery_target:
        lines.append(f"  target: {episode.delivery_target}")
    lines.extend(f"  - {line}" for line in episode.summary_lines)
    for label, values in (
        ("asked", episode.requests),
        ("scope", episode.scope_hints),
        ("files", episode.touched_files),
        ("commands", episode.commands),
        ("verified", episode.verification),
        ("decisions", episode.decisions),
        ("follow-ups", episode.follow_ups),
        ("waited on", episode.waiting),
    ):
        if values:
            lines.append(f"  {label}: " + "; ".join(values))
    compact = head + objective
    if episode.touched_files:
        compact += " — files: " + ", ".join(episode.touched_files[:4])
    return "\n".join(lines), _clip(compact, 240)


def _revised_decisions(episode_text: str, episode: r.ContextEpisodeRecord, current: dict[str, str]) -> str:
    """An episode's text with decisions revised since it was archived marked as such.

    An archived episode lists its decisions as ``<id>: <text>``; when the decision now
    reads differently (in working memory or a later episode), repeating the old text would
    present a reversed decision as valid.
    """
    stale = [
        line
        for line in episode.decisions
        if (did := line.split(": ", 1)[0]) in current and line != one_line(f"{did}: {current[did]}")
    ]
    if not stale:
        return episode_text
    kept = [
        f"{line.split(': ', 1)[0]}: (revised since; see working memory or a later episode)"
        if line in stale
        else line
        for line in episode.decisions
    ]
    return episode_text.replace(
        "  decisions: " + "; ".join(episode.decisions), "  decisions: " + "; ".join(kept)
    )


#: What an archived episode says in place of a task result a later run of the job replaced.
_SUPERSEDED_RUN: Final = "(superseded by a later run of the same job; see working memory or a later episode)"


def _superseded_runs(
    episode_text: str, episode: r.ContextEpisodeRecord, superseded: Callable[[str], bool]
) -> str:
    """An episode's text with the results of task runs a later run of their job replaced
    marked as such.

    An archived episode lists a task's result as ``task <id> <status>...: <summary>``;
    once the same job ran again and its newer result is in, repeating the old summary
    would present an outdated result (the test run that failed before the fix) as the
    latest. The line keeps the task's id and status and says where the newer one is.
    """
    stale = {run.id for run in episode.task_runs if superseded(run.id)}
    if not stale:
        return episode_text
    lines = episode_text.split("\n")
    for at, line in enumerate(lines):
        if not line.startswith("  - task "):
            continue
        head, sep, _ = line.partition(": ")
        task_id = head.removeprefix("  - task ").split(" ", 1)[0]
        if sep and task_id in stale:
            lines[at] = f"{head}: {_SUPERSEDED_RUN}"
    return "\n".join(lines)


def episodes_candidate(
    selected: Sequence[r.ContextEpisodeRecord],
    sub_budget: int,
    count: Counter,
    current_decisions: dict[str, str] | None = None,
    superseded_run: Callable[[str], bool] | None = None,
) -> Candidate | None:
    """Selected episodes, best first, filling their own sub-budget; each shows its ref.

    ``current_decisions`` (decision id → its current text: working memory's, else the
    latest archived) marks decisions an episode lists that were revised since;
    ``superseded_run`` (whether a task id's result was superseded by a later run of its
    job) marks such results. A selected
    episode a form leaves out (it did not fit the sub-budget, or the truncated form keeps
    only the best one) is named in a placeholder line and reported as an omission; when
    none fits at all, the only form is ``omitted``, carrying those omissions.
    """
    if not selected:
        return None
    section = "episodes"
    header = "## Relevant earlier episodes (restore any with `holon get episode:<id>`)"
    header_tokens = count(header) + 1
    texts: list[tuple[r.ContextEpisodeRecord, str, str]] = []
    for episode in selected:
        full, compact = episode_text_forms(episode)
        if current_decisions:
            full = _revised_decisions(full, episode, current_decisions)
        if superseded_run is not None and episode.task_runs:
            full = _superseded_runs(full, episode, superseded_run)
        texts.append((episode, full, compact))
    contents = [
        r.Omission(
            section=section,
            ref=episode_ref(e.episode_id),
            reason=f"episode {e.episode_id}",
            tokens=count(full),
        )
        for e, full, _ in texts
    ]

    def fill(kind: FormKind, limit: int) -> Form | None:
        shown: list[tuple[int, str, int]] = []  # (position in the selection, text, cost)
        used = header_tokens
        for i, (_, full, compact) in enumerate(texts[:limit]):
            text = full if kind == "full" else compact
            cost = count(text) + 1
            if used + cost <= sub_budget:
                shown.append((i, text, cost))
                used += cost
        if not shown:
            return None
        kept = {i for i, _, _ in shown}
        left = [i for i in range(len(texts)) if i not in kept]
        omissions = [
            r.Omission(
                section=section,
                ref=episode_ref(texts[i][0].episode_id),
                reason=f"episode {texts[i][0].episode_id} shortened ({kind} form)",
                tokens=max(0, contents[i].tokens - (cost - 1)),
            )
            for i, _, cost in shown
            if kind != "full"
        ]
        for i in left:
            why = "did not fit the episode budget" if i < limit else "the truncated form shows one"
            omissions.append(
                msgspec.structs.replace(
                    contents[i], reason=f"episode {texts[i][0].episode_id} not shown ({why})"
                )
            )
        lines = [header, *(text for _, text, _ in shown)]
        if left:
            # The line naming what was left out is not charged to the sub-budget (which
            # bounds episode content): paying for it with a whole episode would be worse.
            # The planner still counts it against the prompt's budget.
            refs = [episode_ref(texts[i][0].episode_id) for i in left]
            note = _not_shown(len(left), "selected episode", refs, more=True)
            lines.append(note)
            used += count(note) + 1
        # Tokens as the sum of the parts plus one per line break (an upper bound), so
        # each episode text is counted once.
        return Form(kind=kind, text="\n".join(lines), tokens=used - 1, omissions=tuple(omissions))

    forms = [f for f in (fill("full", len(texts)), fill("compact", len(texts)), fill("truncated", 1)) if f]
    if not forms:
        # Not even the best episode fits the sub-budget: say so, by ref.
        dropped = tuple(
            msgspec.structs.replace(o, reason=f"{o.reason} not shown (did not fit the episode budget)")
            for o in contents
        )
        forms = [Form(kind="omitted", text="", tokens=0, omissions=dropped)]
    return _candidate(section, forms, contents)


# --------------------------------------------------------------------------- TurnScoped


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
    forms = [_form("full", full, count)]
    ref = _delta_ref(delta)
    kept = [_bounded(line, 120, count) for line in delta.lines[:_COMPACT_DELTA_LINES]]
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
        forms.append(_form("compact", compact, count, [omission]))
    contents = [
        r.Omission(section="pending_delta", ref=ref, reason="working-memory delta", tokens=forms[0].tokens)
    ]
    return _candidate("pending_delta", forms, contents, pinned=pinned)


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
    :data:`_PINNED_SCOPE`, each clipped, with a placeholder naming the declaration for the
    rest (the minimum: a list of pages of rules must not make it larger than a window);
    and what the minimum cut."""
    full = [f"scope: {c}" for c in rest]
    kept = [_bounded(c, _PINNED_TEXT_CHARS, count) for c in rest[:_PINNED_SCOPE]]
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
    reason = f"work item {_clip(work.id, _PINNED_ID_CHARS)}: {'; '.join(what)}"
    return full, short, [_shrunk("active_work", ref, reason, full, short, count=count)]


def _environment_line(env: r.ExecutionEnvironment | None) -> list[str]:
    if env is None:
        return []
    parts = [
        f"{k}={v}" for k, v in (("workspace", env.workspace), ("cwd", env.cwd), ("branch", env.branch)) if v
    ]
    parts.extend(f"{k}={env.extra[k]}" for k in sorted(env.extra))
    return ["environment: " + ", ".join(parts)] if parts else []


def _environment_bounded(inputs: ContextInputs, count: Counter) -> tuple[list[str], list[r.Omission]]:
    """The environment line clipped to :data:`_PINNED_ENV_CHARS`, citing its record when it is."""
    full = _environment_line(inputs.environment)
    if not full or inputs.environment_seq is None:
        return full, []
    shown, cut = _bounded(full[0], _PINNED_ENV_CHARS, count)
    if not cut:
        return full, []
    line = f"{shown} {_refs(inputs.environment_seq)}"
    ref = ledger_ref(inputs.environment_seq)
    return [line], [_shrunk("active_work", ref, "environment clipped", full, [line], count=count)]


def _decided_lines(
    inputs: ContextInputs, count: Counter, *, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    """Decisions made this turn, each citing its record; ``bounded``, the newest
    :data:`_PINNED_DECISIONS`, each clipped to one line, and a placeholder for the rest."""
    revision = inputs.working_memory_revision
    decisions = inputs.new_decisions
    if bounded:
        decisions = decisions[-_PINNED_DECISIONS:]
    lines: list[str] = []
    omissions: list[r.Omission] = []
    for d in decisions:
        text = d.text + (f" — because {d.rationale}" if d.rationale else "")
        ident, id_cut = _bounded(d.id, _PINNED_ID_CHARS, count) if bounded else (d.id, False)
        shown, text_cut = _bounded(text, _PINNED_TEXT_CHARS, count) if bounded else (text, False)
        lead = f"decision {ident} (made this turn, after working memory revision {revision}): "
        lines.append(f"{lead}{shown} {_refs(d.seq)}")
        if id_cut or text_cut:
            full = f"decision {d.id} (made this turn, after working memory revision {revision}): {text}"
            omissions.append(
                _shrunk(
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
            f"restore with ref {_ref_list(refs)})"
        )
        omissions.extend(
            r.Omission(
                section="active_work",
                ref=ledger_ref(d.seq),
                reason=f"decision {_clip(d.id, _PINNED_ID_CHARS)} made this turn not shown",
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
        tail = _clip(f.tail, 120) if bounded else f.tail
        lines.append(f"{lead}{check} {_refs(f.seq)}" + (f": {tail}" if tail else ""))
    return lines


def active_work_candidate(inputs: ContextInputs, count: Counter) -> Candidate:
    """The live active work item and its current plan (pinned).

    When they equal working memory's, a one-line pointer avoids paying for them twice;
    a mid-revision change (a plan edited, a decision made this turn) is shown here in full
    at once. The truncated form (the pinned minimum) keeps at most
    :data:`TRUNCATED_OPEN_STEPS` open steps, clipped, so a huge plan still fits; it clips
    the objective, delivery target, scope constraints (at most :data:`_PINNED_SCOPE`),
    this turn's decisions (the newest :data:`_PINNED_DECISIONS`) and the environment too,
    so no single record makes it larger than every window.
    """
    header = "## Active work item"
    work, plan = inputs.active_work, inputs.plan
    env = _environment_line(inputs.environment)
    env_min, env_cut = _environment_bounded(inputs, count)
    # What this turn changed that working memory shows only after it: decisions made and
    # checks that failed.
    decided, _ = _decided_lines(inputs, count)
    decided += _failed_lines(inputs)
    decided_min, decided_cut = _decided_lines(inputs, count, bounded=True)
    decided_min += _failed_lines(inputs, bounded=True)
    if work is None and plan is None:
        return _candidate(
            "active_work",
            [
                _form("full", [header, "No active work item.", *decided, *env], count),
                _form(
                    "truncated",
                    [header, "No active work item.", *decided_min, *env_min],
                    count,
                    [*decided_cut, *env_cut],
                ),
            ],
        )
    if work is None and _live_matches_snapshot(inputs):
        pointer = (
            f"No active work item; the plan is unchanged since working memory revision "
            f"{inputs.working_memory_revision} (shown there)."
        )
        return _candidate(
            "active_work",
            [
                _form("full", [header, pointer, *decided, *env], count),
                _form(
                    "truncated", [header, pointer, *decided_min, *env_min], count, [*decided_cut, *env_cut]
                ),
            ],
        )
    if work is not None and _live_matches_snapshot(inputs):
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
        full = [header, f"{work.id}{pointer}", *rest_full, *decided, *env]
        ident, id_cut = _bounded(work.id, _PINNED_ID_CHARS, count)
        short = [
            header,
            f"{ident}{pointer} {_refs(work.declared_seq)}" if id_cut else f"{work.id}{pointer}",
            *rest_min,
        ]
        cut = (
            [
                _shrunk(
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
        return _candidate(
            "active_work",
            [
                _form("full", full, count),
                _form(
                    "truncated",
                    [*short, *decided_min, *env_min],
                    count,
                    [*cut, *rest_cut, *decided_cut, *env_cut],
                ),
            ],
        )

    def lines(keep_finished: int, *, bounded: bool = False) -> tuple[list[str], list[r.Omission]]:
        out = [header]
        omissions: list[r.Omission] = []
        if work is not None:
            item = (work.id, work.state, work.objective, work.delivery_target, work.scope_constraints)
            work_lines, cut = _work_lines(
                "",
                item,
                _refs(*work.seqs),
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
            step_lines, collapsed = _step_lines(
                steps, plan.seq, "active_work", count, keep_finished=keep_finished
            )
            out.extend(step_lines)
            out.extend(note)
            omissions.extend(collapsed)
            omissions.extend(cut)
        out.extend(decided_min if bounded else decided)
        out.extend(env_min if bounded else env)
        if bounded:
            omissions.extend([*decided_cut, *env_cut])
        return out, omissions

    full, collapsed_full = lines(RECENT_FINISHED_STEPS)
    compact, collapsed = lines(0)
    truncated, cut = lines(0, bounded=True)
    return _candidate(
        "active_work",
        [
            _form("full", full, count, collapsed_full),
            _form("compact", compact, count, collapsed),
            _form("truncated", truncated, count, cut),
        ],
    )


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
    line of :data:`_TRUNCATED_STEP_CHARS`; the placeholder line and omission for the rest."""
    open_steps = [(i, s) for i, s in enumerate(plan.steps) if s.status in _OPEN_RANK]
    ranked = sorted(open_steps, key=lambda item: (_OPEN_RANK[item[1].status], item[0]))
    kept = {i for i, _ in ranked[:TRUNCATED_OPEN_STEPS]}
    hidden = [step_line(s) for i, s in open_steps if i not in kept]
    steps, clipped = _clip_open_steps(
        [s for i, s in enumerate(plan.steps) if s.status not in _OPEN_RANK or i in kept], count
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
        objective, cut = _clipped(item.objective, 60)
        entry(
            f"suspended work item {item.id}",
            [
                f"suspended {item.id}: {item.objective} {_refs(*item.seqs)}",
                *(f"  scope: {c}" for c in item.scope_constraints),
            ],
            f"suspended {item.id}: {objective}",
            cut or bool(item.scope_constraints),
            item.declared_seq,
        )
    for label, items in (("queued", inputs.queued), ("waiting", inputs.waiting)):
        for item in items:
            objective, cut = _clipped(item.objective, 60)
            entry(
                f"{label} work item {item.id}",
                [f"{label} {item.id}: {item.objective} {_refs(*item.seqs)}"],
                f"{label} {item.id}: {objective}",
                cut,
                item.declared_seq,
            )
    for wait in inputs.open_waits:
        hint = f" (resume: {wait.resume_hint})" if wait.resume_hint else ""
        work = f" for {wait.work_item_id}" if wait.work_item_id else ""
        waiting_on, cut = _clipped(wait.waiting_on, 60)
        entry(
            f"open wait {wait.id}",
            [f"open wait {wait.id}{work}: {wait.waiting_on}{hint} {_refs(wait.seq)}"],
            f"open wait {wait.id}: {waiting_on}",
            cut or bool(hint or work),
            wait.seq,
        )
    return _candidate(
        section, [_form("full", full, count), _form("compact", compact, count, shortened)], contents
    )


def _continuation(
    inputs: ContextInputs, count: Counter, *, bounded: bool = False
) -> tuple[list[str], list[r.Omission]]:
    """Continuation context (an interrupted turn, unknown-outcome calls, resolved waits) and
    what it clipped; ``bounded``, ids and texts are clipped too, each line citing its records."""
    continuation: list[str] = []
    clipped: list[r.Omission] = []
    if inputs.previous_outcome in ("interrupted", "failed"):
        # Without this line a turn that died would leave the next prompt unchanged: the
        # model could not tell that its last turn did not finish.
        how = {"interrupted": "was interrupted (the process stopped while it was open)"}.get(
            inputs.previous_outcome, "failed"
        )
        continuation.append(f"- the previous turn {how}: check what it left done before going on")
    unknown_calls = [
        ex
        for ex in inputs.tools
        # No result yet, or the runtime recorded on resume that the outcome was lost in a
        # crash (status "unknown"): either way the model must check before retrying.
        if (ex.result is None or ex.result.status == "unknown") and ex.intent is not None
    ]
    hidden_calls: list[ToolExecution] = []
    if bounded and len(unknown_calls) > _PINNED_CALLS:
        # The newest ones: a crash leaves the last calls open.
        hidden_calls = [ex for ex in unknown_calls[:-_PINNED_CALLS] if ex.intent_seq is not None]
        unknown_calls = [ex for ex in unknown_calls if ex not in hidden_calls]
    for ex in unknown_calls:
        assert ex.intent is not None
        encoded = msgspec.json.encode(ex.intent.args, order="sorted").decode()
        args, cut = _clipped(encoded, 160)
        call_id, tool, named_cut = ex.call_id, ex.tool, False
        if bounded and ex.intent_seq is not None:
            # Arguments of emoji clipped to 160 characters still took over 400 tokens.
            args, cut = _bounded(encoded, 160, count)
            call_id, id_cut = _bounded(ex.call_id, _PINNED_ID_CHARS, count)
            tool, tool_cut = _bounded(ex.tool, _PINNED_ID_CHARS, count)
            named_cut = id_cut or tool_cut
        continuation.append(
            f"- tool call {call_id} ({tool} {args}) was started {_refs(ex.intent_seq)} "
            "and its outcome is unknown: check its effects before retrying"
        )
        if cut and ex.intent_seq is not None:
            clipped.append(
                r.Omission(
                    section="current_input",
                    ref=ledger_ref(ex.intent_seq),
                    reason=f"arguments of {call_id} clipped",
                    tokens=max(0, count(encoded) - count(args)),
                )
            )
        if named_cut and ex.intent_seq is not None:
            full = f"{ex.call_id} ({ex.tool}"
            clipped.append(
                _shrunk(
                    "current_input",
                    ledger_ref(ex.intent_seq),
                    f"id or tool of {call_id} clipped",
                    [full],
                    [f"{call_id} ({tool}"],
                    count=count,
                )
            )
    if hidden_calls:
        call_refs = [ledger_ref(ex.intent_seq) for ex in hidden_calls if ex.intent_seq is not None]
        continuation.append(
            f"- +{len(hidden_calls)} earlier tool calls whose outcome is unknown are not shown: check their "
            f"effects before retrying them — restore with ref {_ref_list(call_refs)}"
        )
        clipped.extend(
            r.Omission(section="current_input", ref=ref, reason="unknown-outcome call not shown")
            for ref in call_refs
        )
    for wait in inputs.resolved_waits:
        ident, waiting_on, detail = wait.id, wait.waiting_on, wait.detail or ""
        refs = _refs(wait.resolved_seq)
        if bounded and wait.resolved_seq is not None:
            ident, id_cut = _bounded(wait.id, _PINNED_ID_CHARS, count)
            waiting_on, on_cut = _bounded(wait.waiting_on, _PINNED_TEXT_CHARS, count)
            detail, detail_cut = _bounded(detail, _PINNED_TEXT_CHARS, count)
            # What the wait was on is on its intent, how it ended on its resolution.
            for seq, cut, what in (
                (wait.seq, id_cut or on_cut, "wait"),
                (wait.resolved_seq, detail_cut, "resolution"),
            ):
                if cut:
                    full = f"{wait.id} ({wait.waiting_on}) {wait.detail}"
                    short = f"{ident} ({waiting_on}) {detail}"
                    reason = f"{what} of wait {ident} clipped"
                    clipped.append(
                        _shrunk("current_input", ledger_ref(seq), reason, [full], [short], count=count)
                    )
            if id_cut or on_cut:
                refs = _refs(wait.seq, wait.resolved_seq)
        continuation.append(
            f"- wait {ident} ({waiting_on}) {wait.resolution}{f': {detail}' if detail else ''} {refs}"
        )
    return (["continuation:", *continuation] if continuation else []), clipped


#: The objective a derived work item shows (its request's text is shown where requests are).
DERIVED_OBJECTIVE: Final = (
    "no work item declared: what the session's first request asks (shown under \"Operator's requests\", "
    "or in the history where it was sent)"
)

MANDATE_HEADER: Final = (
    "## Operator's requests (this session, oldest first; where a later request changes an "
    "earlier one, the later one holds)"
)
#: The header before a history: the requests it shows are not repeated here, and the model
#: must not read this section as all of them.
MANDATE_HEADER_BEFORE_HISTORY: Final = (
    "## Operator's requests (this session, oldest first — any later ones are in the history "
    "below, where they were sent; where a later request changes an earlier one, the later one holds)"
)
#: Newest requests the compact form keeps whole when they fit (besides the first).
_COMPACT_REQUESTS: Final = 3
#: What the compact form keeps of an older request, and the minimum of the first and newest.
_REQUEST_LINE_CHARS: Final = 400
_REQUEST_PREVIEW_CHARS: Final = 400
#: Tokens the compact form keeps back for the line that names the requests it leaves out.
_MANDATE_COUNT_LINE: Final = 48


def _asked(q: RequestEntry) -> str:
    return f" (asked {q.asked} times)" if q.asked > 1 else ""


def _request_whole(q: RequestEntry) -> str:
    rest = (
        f"\n[request continues: {q.chars - len(q.text):,} more chars — restore with ref {ledger_ref(q.seq)}]"
        if q.clipped
        else ""
    )
    return f"[{ledger_ref(q.seq)}] {q.text}{_asked(q)}{rest}"


def _request_short(q: RequestEntry, limit: int, count: Counter) -> tuple[str, r.Omission | None]:
    """A request clipped to ``limit`` characters (and a third as many tokens), naming its record."""
    shown, cut = _bounded(q.text, limit, count)
    if not cut and not q.clipped:
        return _request_whole(q), None
    ref = ledger_ref(q.seq)
    line = f"[{ref}] {shown}{_asked(q)} [request shortened: {q.chars:,} chars — restore with ref {ref}]"
    omission = _shrunk("mandate", ledger_ref(q.seq), "request shortened", [q.text], [shown], count=count)
    return line, omission


def _requests_left_out(
    left: Sequence[RequestEntry], not_held: int, count: Counter
) -> tuple[list[str], list[r.Omission]]:
    """The line naming the requests a form leaves out, and their omissions."""
    if not left and not not_held:
        return [], []
    refs = [ledger_ref(q.seq) for q in left]
    where = f" — restore with ref {_ref_list(refs)}" if refs else ""
    shown_not = len(left) + not_held
    line = f"(+{shown_not} more requests of this session not shown{where}; `holon search` finds them)"
    omissions = [
        r.Omission(section="mandate", ref=ref, reason="request not shown", tokens=count(_request_whole(q)))
        for q, ref in zip(left, refs, strict=True)
    ]
    return [line], omissions


def mandate_candidate(
    inputs: ContextInputs, count: Counter, *, sub_budget: int, before: int | None = None
) -> Candidate | None:
    """The operator's requests the history does not show, verbatim within ``sub_budget`` (pinned).

    The first request is the session's mandate and every later one may correct it or add a
    constraint: none of them may stop binding because the history moved on. Shown: the
    requests before seq ``before`` — where the history starts (``None``: no history, all
    of them); a request the history shows is read there, in its place, the first one
    too (``None`` when the history shows them all). The current input is shown as the
    input, not here. The section comes right before the history, so the requests read
    oldest first through to the newest, and it changes only when the history moves its
    start.

    Full: every such request the projection holds (it holds the first and the newest
    ``requests_window`` distinct ones), whole; compact: the first whole (a preview when it
    alone takes half the sub-budget), then as many of the others as the sub-budget holds,
    newest first — the newest three whole, older ones clipped to a line each — and one
    line naming the refs of the oldest it leaves out; truncated (the pinned minimum,
    bounded whatever the requests hold): the first and the newest as previews and one line
    naming the others' refs. Forms over the sub-budget are not offered, but the smallest
    always is.
    """
    mandate = inputs.mandate
    if mandate is None:
        return None
    current = inputs.current_input.seq if inputs.current_input is not None else None
    requests = [q for q in mandate.requests if q.seq != current]
    if not requests:
        return None
    first = requests[0]
    if before is not None and first.seq >= before:
        # The history shows every request, the first included, in its place: a copy here
        # would only change at each new session's first turns, re-sending all after it.
        return None
    rest = [q for q in requests[1:] if before is None or q.seq < before]
    header = MANDATE_HEADER if before is None else MANDATE_HEADER_BEFORE_HISTORY
    gap: list[str] = []
    if mandate.omitted:
        later = mandate.recent[0].seq
        gap = [
            f"(+{mandate.omitted} more requests between {ledger_ref(first.seq)} and {ledger_ref(later)} "
            "not held — find them with `holon search`)"
        ]
    full = [header, _request_whole(first), *gap, *(_request_whole(q) for q in rest)]

    def compact_within(room_for: int) -> Form:
        """The first request (shortened past half of ``room_for``) and the newest later ones
        ``room_for`` holds, the rest counted in a line naming their refs."""
        cut_here: list[r.Omission] = []
        first_line = _request_whole(first)
        if count(first_line) > room_for // 2:
            first_line, cut = _request_short(first, _REQUEST_PREVIEW_CHARS * 4, count)
            cut_here.extend([cut] if cut is not None else [])
        room = room_for - count(header) - count(first_line) - _MANDATE_COUNT_LINE
        later_lines: list[str] = []
        kept = 0
        for age, q in enumerate(reversed(rest)):
            line, cut = (_request_whole(q), None) if age < _COMPACT_REQUESTS else (None, None)
            if line is None or count(line) > room:
                line, cut = _request_short(q, _REQUEST_LINE_CHARS, count)
            cost = count(line)
            if cost > room:
                break
            room -= cost
            later_lines.append(line)
            cut_here.extend([cut] if cut is not None else [])
            kept += 1
        left, left_cut = _requests_left_out(rest[: len(rest) - kept], 0, count)
        # Requests the projection no longer holds are older than every one held: the gap line
        # says so where they were, the left-out line counts the held ones the form leaves out.
        cut_here.extend(left_cut)
        return _form("compact", [header, first_line, *gap, *left, *reversed(later_lines)], count, cut_here)

    minimum = [header]
    minimum_cut: list[r.Omission] = []
    for q in (first, *rest[-1:]):
        line, cut = _request_short(q, _REQUEST_PREVIEW_CHARS, count)
        minimum.append(line)
        minimum_cut.extend([cut] if cut is not None else [])
    more, more_cut = _requests_left_out(rest[:-1], mandate.omitted, count)
    minimum.extend(more)
    minimum_cut.extend(more_cut)
    # The sub-budget bounds the mandate; the minimum is bounded by construction. It is the
    # smallest form, whatever the sub-budget: short requests can make the compact form
    # smaller than the truncated one, and a minimum that changed with the room would make
    # BudgetExceeded's figure depend on the budget it was raised at. So the compact form
    # the minimum is chosen against is the one no sub-budget makes smaller (built for a
    # sub-budget of 0), not the sub-budget's own: that one grows with the room, and a
    # budget of exactly the minimum BudgetExceeded named raised again, a token short.
    # On a tie the fuller form: the whole requests, else the compact ones.
    whole = _form("full", full, count)
    smallest = min(
        (whole, compact_within(0), _form("truncated", minimum, count, minimum_cut)), key=lambda f: f.tokens
    )
    offered: list[Form] = []
    for f in (whole, compact_within(sub_budget)):  # the fuller forms first, as far as the smallest
        if f is smallest:
            break
        if f.tokens <= sub_budget and f.text != smallest.text:
            offered.append(f)
    offered.append(smallest)
    return _candidate("mandate", offered)


def current_input_candidate(inputs: ContextInputs, count: Counter, *, max_tokens: int) -> Candidate:
    """This turn's input plus continuation context (unknown-outcome calls, resolved waits).

    The truncated form (the pinned minimum) keeps the input's head and tail when it is over
    ``max_tokens``, and the continuation context and trigger clipped like the other
    minimums' texts.
    """
    current = inputs.current_input
    trigger = current.trigger if current is not None else "continue"
    header = f"## Current input ({trigger})"
    header_min, header_cut = header, []
    if current is not None and current.trigger_seq is not None:
        shown, cut = _bounded(trigger, _PINNED_ID_CHARS, count)
        if cut:
            header_min = f"## Current input ({shown} {_refs(current.trigger_seq)})"
            ref = ledger_ref(current.trigger_seq)
            header_cut = [
                _shrunk("current_input", ref, "trigger clipped", [header], [header_min], count=count)
            ]
    tail, clipped = _continuation(inputs, count)
    tail_min, clipped_min = _continuation(inputs, count, bounded=True)
    if current is not None:
        text = current.text
    elif inputs.active_work is not None or inputs.plan is not None:
        text = "(no new input: continue the active work)"
    else:
        # Nothing asked and nothing active: "continue the active work" pointed at nothing.
        text = "(no new input, and no work is active: report what was done, or wait for input)"
    forms = [_form("full", [header, text, *tail], count, clipped)]
    body, body_cut = [text], []
    if current is not None and current.seq is not None and count(text) > max_tokens:
        ref = ledger_ref(current.seq)
        keep = max(200, max_tokens * 2)
        if 2 * keep >= len(text):
            # A dense text over the cap in fewer chars: head and tail must not overlap.
            keep = len(text) // 3
        head, middle, end = text[:keep], text[keep : len(text) - keep], text[len(text) - keep :]
        hidden = f"{len(middle):,} of {len(text):,} chars"
        note = f"[input truncated: {hidden} not shown — restore with ref {ref}]"
        omission = r.Omission(
            section="current_input", ref=ref, reason="current input over its cap", tokens=count(middle)
        )
        body, body_cut = [head, note, end], [omission]
    forms.append(
        _form("truncated", [header_min, *body, *tail_min], count, [*header_cut, *clipped_min, *body_cut])
    )
    return _candidate("current_input", forms)
