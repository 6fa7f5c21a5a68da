"""The AgentScoped sections: working memory, the legacy summary and the selected episodes.

They change only with the working-memory revision and the compression epoch, so in the
``rfc`` layout they end the cacheable prefix. In the ``recitation`` layout working memory
moves after the history, into the TurnScoped tail (:func:`~holon.context.sections.section_stability`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.budget import Candidate, Form, FormKind
from holon.context.inputs import ContextInputs
from holon.context.refs import episode_ref, ledger_ref
from holon.context.rounds import step_line
from holon.context.sections.bounds import (
    PINNED_ID_CHARS,
    PINNED_TEXT_CHARS,
    bound_text,
    cite,
    clip_line,
    clipped_line,
    not_shown_line,
    ref_list,
    shrunk,
)
from holon.context.sections.layout import Counter, section_candidate, section_form
from holon.context.sections.work import (
    RECENT_FINISHED_STEPS,
    clip_open_steps,
    plan_step_lines,
    work_item_lines,
)
from holon.projections import TaskRef, WorkingMemorySnapshot, task_activity
from holon.projections.snapshot import TASK_DESCRIPTION_CHARS, TASK_SUMMARY_CHARS, failing_line
from holon.projections.state import one_line

__all__ = [
    "context_summary_candidate",
    "episode_text_forms",
    "episodes_candidate",
    "working_memory_candidate",
]

# What working memory's compact form keeps: its first files, decisions and follow-ups.
# The rest is named by ref in a placeholder.
_COMPACT_FILES: Final = 6
_COMPACT_DECISIONS: Final = 4
_COMPACT_FOLLOW_UPS: Final = 3


def _plan_lines(
    snapshot: WorkingMemorySnapshot, count: Counter, *, keep_finished: int, clip: bool = False
) -> tuple[list[str], list[r.Omission]]:
    if snapshot.plan_seq is None:
        return [], []
    ref = ledger_ref(snapshot.plan_seq)
    plan, clipped = clip_open_steps(snapshot.plan, count) if clip else (list(snapshot.plan), 0)
    steps, omissions = plan_step_lines(
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
    return work_item_lines(
        "active work: ",
        item,
        cite(*s.work_item_seqs),
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
            ident, id_cut = bound_text(w.id, PINNED_ID_CHARS, count)
            on, on_cut = bound_text(w.waiting_on, PINNED_TEXT_CHARS, count)
            hint, hint_cut = bound_text(w.resume_hint or "", PINNED_TEXT_CHARS, count)
            if id_cut or on_cut or hint_cut:
                short = f"waiting on {ident}: {on}" + (f" (resume: {hint})" if hint else "")
                omissions.append(
                    shrunk(
                        "working_memory",
                        ledger_ref(w.seq),
                        f"wait {ident} clipped",
                        [full],
                        [short],
                        count=count,
                    )
                )
                full = short
        lines.append(f"{full} {cite(w.seq)}")
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
    shown, clipped = clipped_line(text, limit)
    line = f"{noun} {entry_id}: {shown} {cite(seq)}"
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
    shown, cut = bound_text(text, limit, count) if bounded else clipped_line(text, limit)
    if not cut or ref is None:
        return shown, []
    reason = f"task {clip_line(task.id, PINNED_ID_CHARS)} {part} clipped"
    return shown, [shrunk("working_memory", ledger_ref(ref), reason, [text], [shown], count=count)]


def _task_parts(task: TaskRef) -> list[tuple[str, int | None, list[str]]]:
    """What a task's sub-agent did, as (what, the ref restoring it, its lines): one line of
    counts and files, the last error, a running task's plan."""
    parts: list[tuple[str, int | None, list[str]]] = []
    activity = task_activity(task)
    if activity is not None:
        parts.append(("what its sub-agent did", task.ref_seq, [f"  {activity}"]))
    if task.last_error is not None:
        error = f"  last error: {task.last_error} {cite(task.last_error_seq)}"
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
        ident = bound_text(task.id, PINNED_ID_CHARS, count)[0] if bounded else task.id
        state = "(running)" if task.status == "running" else f"finished ({task.status})"
        what, cut = _task_text(
            task, "description", task.description, task.started_seq, count, bounded=bounded
        )
        omissions.extend(cut)
        lines.append(f"task {ident} {state}: {what} {cite(task.ref_seq)}".rstrip())
        if task.summary is not None:
            result, cut = _task_text(task, "result", task.summary, task.result_seq, count, bounded=bounded)
            omissions.extend(cut)
            lines.append(f"  result: {result}")
        left_out: list[tuple[str, str]] = []
        for part, ref, part_lines in _task_parts(task):
            if bounded and part == "what its sub-agent did":
                # One line, but of file paths as long as a model wrote them.
                shown, clipped = bound_text(part_lines[0].strip(), PINNED_TEXT_CHARS, count)
                lines.append(f"  {shown}")
                if clipped and ref is not None:
                    reason = f"task {clip_line(task.id, PINNED_ID_CHARS)}: {part} clipped"
                    omissions.append(
                        shrunk("working_memory", ledger_ref(ref), reason, part_lines, [shown], count=count)
                    )
                continue
            if part in shown_parts or ref is None:
                lines.extend(part_lines)
                if part == "plan" and task.plan_omitted and ref is not None:
                    # The plan's line naming the steps over the cap is a placeholder too.
                    ident_short = clip_line(task.id, PINNED_ID_CHARS)
                    reason = f"task {ident_short}: {task.plan_omitted} plan steps not shown"
                    omissions.append(r.Omission(section="working_memory", ref=ledger_ref(ref), reason=reason))
                continue
            left_out.append((part, ledger_ref(ref)))
            reason = f"task {clip_line(task.id, PINNED_ID_CHARS)}: {part} not shown"
            tokens = count("\n".join(part_lines))
            omissions.append(
                r.Omission(section="working_memory", ref=ledger_ref(ref), reason=reason, tokens=tokens)
            )
        if left_out:
            what_parts = ", ".join(part for part, _ in left_out)
            lines.append(
                f"  ({what_parts} not shown — restore with ref {ref_list([ref for _, ref in left_out])})"
            )
    if s.tasks_omitted:
        n = s.tasks_omitted
        lines.append(
            f"(+{n} older running task{'' if n == 1 else 's'} not shown (over the working-memory cap))"
        )
    return lines, omissions


class _Entries(msgspec.Struct, frozen=True, kw_only=True):
    """Working memory's lists as its full form shows them, and what dropping each entry
    loses (its ref and the tokens of its full line): the shorter forms are made of these."""

    files: list[str]
    decisions: list[str]
    follow_ups: list[str]
    file_drops: list[r.Omission]
    decision_drops: list[r.Omission]
    follow_up_drops: list[r.Omission]
    #: The placeholders for what working memory's caps leave out (every form shows them).
    older_decisions: list[str]
    older_follow_ups: list[str]
    older_waits: list[str]
    #: The open waits in full, then the placeholder for those over the cap.
    waits: list[str]
    #: The placeholder for a work summary the shorter forms leave out, and its omissions.
    summary_dropped: list[str]
    summary_drops: list[r.Omission]


def _entries(s: WorkingMemorySnapshot, count: Counter) -> _Entries:
    section = "working_memory"
    file_lines = [f"{f.path} {cite(f.seq)}" for f in s.files]
    decision_lines = [
        f"decision {d.id}: {d.text}"
        + (f" — because {d.rationale}" if d.rationale else "")
        + f" {cite(d.seq)}"
        for d in s.decisions
    ]
    follow_up_lines = [f"follow-up {f.id}: {f.text} {cite(*f.seqs)}" for f in s.follow_ups]
    older_decisions, older_follow_ups, older_waits = _over_cap_lines(s)
    summary_dropped, summary_drops = _summary_dropped(s, count)
    return _Entries(
        files=file_lines,
        decisions=decision_lines,
        follow_ups=follow_up_lines,
        file_drops=[
            r.Omission(
                section=section, ref=ledger_ref(f.seq), reason=f"file {f.path} not shown", tokens=count(line)
            )
            for f, line in zip(s.files, file_lines, strict=True)
        ],
        decision_drops=[
            r.Omission(
                section=section,
                ref=ledger_ref(d.seq),
                reason=f"decision {d.id} not shown",
                tokens=count(line),
            )
            for d, line in zip(s.decisions, decision_lines, strict=True)
        ],
        follow_up_drops=[
            r.Omission(
                section=section,
                ref=ledger_ref(f.seqs[-1]),
                reason=f"follow-up {f.id} not shown",
                tokens=count(line),
            )
            for f, line in zip(s.follow_ups, follow_up_lines, strict=True)
        ],
        older_decisions=older_decisions,
        older_follow_ups=older_follow_ups,
        older_waits=older_waits,
        waits=[*_wait_lines(s, count)[0], *older_waits],
        summary_dropped=summary_dropped,
        summary_drops=summary_drops,
    )


def _full_memory(inputs: ContextInputs, header: str, e: _Entries, count: Counter) -> Form:
    """Every entry, the last :data:`RECENT_FINISHED_STEPS` finished plan steps, each failing
    check with the end of its output."""
    s = inputs.snapshot
    core, core_omitted = _core_lines(inputs, count)
    if s.work_summary:
        core.append(f"summary: {s.work_summary}")
    plan, plan_omitted = _plan_lines(s, count, keep_finished=RECENT_FINISHED_STEPS)
    lines = [header, *core, *plan]
    if e.files:
        lines.append("files: " + ", ".join(e.files))
    lines.extend(e.decisions)
    lines.extend(e.older_decisions)
    lines.extend(e.follow_ups)
    lines.extend(e.older_follow_ups)
    lines.extend(e.waits)
    # Failing checks: the end of their output in full, clipped in compact, the command alone
    # (and its ref) in the minimum: what is red is state the agent must not lose.
    lines.extend(f"{failing_line(f)} {cite(f.seq)}" for f in s.failing)
    tasks, tasks_omitted = _task_lines(s, count, "full")
    lines.extend(tasks)
    return section_form("full", lines, count, [*core_omitted, *plan_omitted, *tasks_omitted])


def _compact_memory(inputs: ContextInputs, header: str, e: _Entries, count: Counter) -> Form:
    """No finished plan step, no work summary, the first :data:`_COMPACT_FILES` files and the
    first decisions and follow-ups on a clipped line each; each kind's rest in a placeholder."""
    s = inputs.snapshot
    core, core_omitted = _core_lines(inputs, count)
    plan, plan_omitted = _plan_lines(s, count, keep_finished=0)
    lines = [header, *core, *e.summary_dropped, *plan]
    omitted = [*core_omitted, *e.summary_drops, *plan_omitted]
    if s.files:
        line = "files: " + ", ".join(f.path for f in s.files[:_COMPACT_FILES])
        if len(s.files) > _COMPACT_FILES:
            rest = e.file_drops[_COMPACT_FILES:]
            line += " " + not_shown_line(len(rest), "file", [o.ref for o in rest], more=True)
            omitted.extend(rest)
        lines.append(line)
    for d, full_line in zip(s.decisions[:_COMPACT_DECISIONS], e.decisions, strict=False):
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
        lines.append(line)
        omitted.extend(shortened)
    for f, full_line in zip(s.follow_ups[:_COMPACT_FOLLOW_UPS], e.follow_ups, strict=False):
        line, shortened = _compact_entry(
            "follow-up", f.id, f.text, f.seqs[-1], full_line, count=count, limit=80
        )
        lines.append(line)
        omitted.extend(shortened)
    for noun, drops, kept, older in (
        ("decision", e.decision_drops, _COMPACT_DECISIONS, e.older_decisions),
        ("follow-up", e.follow_up_drops, _COMPACT_FOLLOW_UPS, e.older_follow_ups),
    ):
        if len(drops) > kept:
            rest = drops[kept:]
            lines.append(not_shown_line(len(rest), noun, [o.ref for o in rest], more=True))
            omitted.extend(rest)
        lines.extend(older)
    lines.extend(e.waits)
    lines.extend(
        f"{failing_line(f, tail=False)}: {clip_line(f.tail, 120)} {cite(f.seq)}"
        if f.tail
        else f"{failing_line(f)} {cite(f.seq)}"
        for f in s.failing
    )
    tasks, tasks_omitted = _task_lines(s, count, "compact")
    lines.extend(tasks)
    omitted.extend(tasks_omitted)
    return section_form("compact", lines, count, omitted)


def _truncated_memory(inputs: ContextInputs, header: str, e: _Entries, count: Counter) -> Form:
    """The pinned minimum: the work item, scope, open plan steps, waits, failing commands and
    tasks, each text clipped; files, decisions and follow-ups only as placeholders."""
    s = inputs.snapshot
    core, core_cut = _core_lines(inputs, count, bounded=True)
    plan, plan_omitted = _plan_lines(s, count, keep_finished=0, clip=True)
    waits, waits_cut = _wait_lines(s, count, bounded=True)
    tasks, tasks_cut = _task_lines(s, count, "truncated")
    lines = [
        header,
        *core,
        *e.summary_dropped,
        *plan,
        *waits,
        *e.older_waits,
        *(f"{failing_line(f, tail=False)} {cite(f.seq)}" for f in s.failing),
        *tasks,
    ]
    omitted = [*core_cut, *e.summary_drops, *plan_omitted, *waits_cut, *tasks_cut]
    for noun, drops, older in (
        ("decision", e.decision_drops, e.older_decisions),
        ("follow-up", e.follow_up_drops, e.older_follow_ups),
        ("file", e.file_drops, []),
    ):
        if drops:
            lines.append(not_shown_line(len(drops), noun, [o.ref for o in drops], more=False))
            omitted.extend(drops)
        lines.extend(older)
    return section_form("truncated", lines, count, omitted)


def working_memory_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """Working memory at the current revision; the minimum keeps work, scope, plan and waits.

    The full form lists the last 3 finished plan steps (older ones are collapsed into one
    line); the compact form collapses them all and keeps at most 6 files, 4 decisions
    (clipped, without rationale) and 3 follow-ups (clipped); the truncated form keeps only
    the work item, scope, open plan steps and waits, each text clipped (so no one record
    makes the pinned minimum larger than a window). Whatever a form leaves out is named
    in a placeholder line with the refs that restore it, and reported as its omissions.
    """
    if inputs.snapshot.empty:
        return None
    header = f"## Working memory (revision {inputs.working_memory_revision})"
    entries = _entries(inputs.snapshot, count)
    return section_candidate(
        "working_memory",
        [
            _full_memory(inputs, header, entries, count),
            _compact_memory(inputs, header, entries, count),
            _truncated_memory(inputs, header, entries, count),
        ],
    )


def context_summary_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """The legacy flat summary — only when there is no structured working memory."""
    summary = inputs.context_summary
    if summary is None or not inputs.snapshot.empty or not summary.text:
        return None
    source = f" from {summary.source}" if summary.source else ""
    header = f"## Earlier context (legacy summary{source})"
    forms = [section_form("full", [header, summary.text], count)]
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
            forms.append(section_form("truncated", [header, head, note], count, [omission]))
    return section_candidate("context_summary", forms, contents)


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
    return "\n".join(lines), clip_line(compact, 240)


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


_EPISODES_HEADER: Final = "## Relevant earlier episodes (restore any with `holon get episode:<id>`)"
#: One selected episode: the record, its full text (decisions revised since and results
#: superseded since marked) and its compact text.
_EpisodeTexts = tuple[r.ContextEpisodeRecord, str, str]


def _episode_texts(
    selected: Sequence[r.ContextEpisodeRecord],
    current_decisions: dict[str, str] | None,
    superseded_run: Callable[[str], bool] | None,
) -> list[_EpisodeTexts]:
    texts: list[_EpisodeTexts] = []
    for episode in selected:
        full, compact = episode_text_forms(episode)
        if current_decisions:
            full = _revised_decisions(full, episode, current_decisions)
        if superseded_run is not None and episode.task_runs:
            full = _superseded_runs(full, episode, superseded_run)
        texts.append((episode, full, compact))
    return texts


def _filled(
    kind: FormKind,
    limit: int,
    texts: Sequence[_EpisodeTexts],
    contents: Sequence[r.Omission],
    *,
    sub_budget: int,
    count: Counter,
) -> Form | None:
    """The ``kind`` form of the first ``limit`` episodes, as many as fit ``sub_budget`` (each
    in that form), the rest named in a placeholder line; ``None`` when none fits."""
    section = "episodes"
    shown: list[tuple[int, str, int]] = []  # (position in the selection, text, cost)
    used = count(_EPISODES_HEADER) + 1
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
            msgspec.structs.replace(contents[i], reason=f"episode {texts[i][0].episode_id} not shown ({why})")
        )
    lines = [_EPISODES_HEADER, *(text for _, text, _ in shown)]
    if left:
        # The line naming what was left out is not charged to the sub-budget (which
        # bounds episode content): paying for it with a whole episode would be worse.
        # The planner still counts it against the prompt's budget.
        refs = [episode_ref(texts[i][0].episode_id) for i in left]
        note = not_shown_line(len(left), "selected episode", refs, more=True)
        lines.append(note)
        used += count(note) + 1
    # Tokens as the sum of the parts plus one per line break (an upper bound), so
    # each episode text is counted once.
    return Form(kind=kind, text="\n".join(lines), tokens=used - 1, omissions=tuple(omissions))


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
    texts = _episode_texts(selected, current_decisions, superseded_run)
    contents = [
        r.Omission(
            section=section,
            ref=episode_ref(e.episode_id),
            reason=f"episode {e.episode_id}",
            tokens=count(full),
        )
        for e, full, _ in texts
    ]
    forms = [
        f
        for f in (
            _filled("full", len(texts), texts, contents, sub_budget=sub_budget, count=count),
            _filled("compact", len(texts), texts, contents, sub_budget=sub_budget, count=count),
            _filled("truncated", 1, texts, contents, sub_budget=sub_budget, count=count),
        )
        if f
    ]
    if not forms:
        # Not even the best episode fits the sub-budget: say so, by ref.
        dropped = tuple(
            msgspec.structs.replace(o, reason=f"{o.reason} not shown (did not fit the episode budget)")
            for o in contents
        )
        forms = [Form(kind="omitted", text="", tokens=0, omissions=dropped)]
    return section_candidate(section, forms, contents)
