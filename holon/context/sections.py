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
 5    pending_delta       turn         85        yes     full, compact
 6    active_work         turn         95        yes     full, compact
 7    queue               turn         50        no      full, compact
 8    history             turn         40        no      filled newest-first
 9    current_input       turn         100       yes     full, truncated
====  ==================  ===========  ========  ======  ================================

Only facts fixed by the working-memory revision and the compression epoch are placed in
Stable/AgentScoped sections (the snapshot, the archived episodes); everything that can
change within a revision (the live plan, the environment, queues, history, input) is
TurnScoped. Every shortened or dropped item names the ref that restores it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Final

import msgspec

import holon.records as r
from holon.context.budget import Candidate, Form, FormKind, Stability
from holon.context.inputs import ContextInputs
from holon.context.refs import episode_ref, ledger_ref
from holon.projections import WorkingMemorySnapshot
from holon.projections.state import one_line

__all__ = [
    "SECTION_ORDER",
    "SECTION_PRIORITY",
    "SECTION_STABILITY",
    "Counter",
    "active_work_candidate",
    "context_summary_candidate",
    "current_input_candidate",
    "episode_text_forms",
    "episodes_candidate",
    "pending_delta_candidate",
    "queue_candidate",
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
    "history",
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
    "current_input": "turn",
}
SECTION_PRIORITY: Final = {
    "system": 100,
    "tools": 100,
    "current_input": 100,
    "active_work": 95,
    "working_memory": 90,
    "pending_delta": 85,
    "context_summary": 70,
    "episodes": 60,
    "queue": 50,
    "history": 40,
}
_PINNED: Final = frozenset(
    {"system", "tools", "working_memory", "pending_delta", "active_work", "current_input"}
)

_MARK: Final = {"pending": "[ ]", "in_progress": "[>]", "done": "[x]", "blocked": "[!]", "skipped": "[-]"}


def _form(kind: FormKind, lines: Sequence[str], count: Counter, omissions: Sequence[r.Omission] = ()) -> Form:
    text = "\n".join(lines)
    return Form(kind=kind, text=text, tokens=count(text), omissions=tuple(omissions))


def _candidate(name: str, forms: Sequence[Form]) -> Candidate:
    # Identical consecutive forms add nothing; keep the shorter tail only when it differs.
    kept: list[Form] = []
    for f in forms:
        if not kept or f.text != kept[-1].text:
            kept.append(f)
    return Candidate(
        name=name,
        order=SECTION_ORDER.index(name),
        stability=SECTION_STABILITY[name],
        priority=SECTION_PRIORITY[name],
        pinned=name in _PINNED,
        forms=tuple(kept),
    )


def _clip(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _refs(*seqs: int | None) -> str:
    return " ".join(f"[{ledger_ref(s)}]" for s in seqs if s is not None)


# --------------------------------------------------------------------------- Stable


def system_candidate(policy: r.SystemPolicy | None, count: Counter) -> Candidate | None:
    """The system/policy prompt, verbatim (pinned: a model call without it is a different agent)."""
    if policy is None or not policy.text:
        return None
    return _candidate("system", [_form("full", [policy.text], count)])


def tools_candidate(policy: r.SystemPolicy | None, count: Counter) -> Candidate | None:
    """Tool definitions as canonical JSON lines (adapters also pass them structured)."""
    if policy is None or not policy.tools:
        return None
    lines = ["## Tools"]
    for tool in policy.tools:
        spec = msgspec.json.encode(
            {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
            order="sorted",
        ).decode()
        lines.append(spec)
    return _candidate("tools", [_form("full", lines, count)])


# --------------------------------------------------------------------------- AgentScoped


def _plan_lines(snapshot: WorkingMemorySnapshot, *, collapse_done: bool) -> list[str]:
    if snapshot.plan_seq is None:
        return []
    lines = [f"plan: {_refs(snapshot.plan_seq)}"]
    done = 0
    for step in snapshot.plan:
        if collapse_done and step.status in ("done", "skipped"):
            done += 1
            continue
        lines.append(f"  {_MARK[step.status]} {step.id}: {step.text}")
    if done:
        lines.append(f"  ({done} finished steps not shown)")
    if snapshot.plan_omitted:
        lines.append(f"  (+{snapshot.plan_omitted} steps not shown)")
    return lines


def _core_lines(s: WorkingMemorySnapshot) -> list[str]:
    if s.active_work_item_id is None:
        lines = ["active work: none"]
    else:
        work = f"{s.active_work_item_id} ({s.work_state}) — {s.objective}"
        lines = [f"active work: {work} {_refs(*s.work_item_seqs)}"]
        if s.delivery_target:
            lines.append(f"delivery target: {s.delivery_target}")
        lines.extend(f"scope: {c}" for c in s.scope_constraints)
    return lines


def _wait_lines(s: WorkingMemorySnapshot) -> list[str]:
    return [
        f"waiting on {w.id}: {w.waiting_on}"
        + (f" (resume: {w.resume_hint})" if w.resume_hint else "")
        + f" {_refs(w.seq)}"
        for w in s.waiting_on
    ]


def working_memory_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """Working memory at the current revision; the minimum keeps work, scope, plan and waits."""
    s = inputs.snapshot
    if s.empty:
        return None
    header = f"## Working memory (revision {inputs.working_memory_revision})"
    core = _core_lines(s)
    if s.work_summary:
        core.append(f"summary: {s.work_summary}")
    files = [f"{f.path} {_refs(f.seq)}" for f in s.files]
    full = [header, *core, *_plan_lines(s, collapse_done=False)]
    if files:
        full.append("files: " + ", ".join(files))
    full.extend(
        f"decision {d.id}: {d.text}"
        + (f" — because {d.rationale}" if d.rationale else "")
        + f" {_refs(d.seq)}"
        for d in s.decisions
    )
    full.extend(f"follow-up {f.id}: {f.text} {_refs(*f.seqs)}" for f in s.follow_ups)
    full.extend(_wait_lines(s))

    compact = [header, *_core_lines(s), *_plan_lines(s, collapse_done=True)]
    if s.files:
        compact.append(
            "files: " + ", ".join(f.path for f in s.files[:6]) + (" …" if len(s.files) > 6 else "")
        )
    compact.extend(f"decision {d.id}: {_clip(d.text, 100)} {_refs(d.seq)}" for d in s.decisions[:4])
    compact.extend(f"follow-up {f.id}: {_clip(f.text, 80)}" for f in s.follow_ups[:3])
    compact.extend(_wait_lines(s))

    dropped: list[r.Omission] = [
        r.Omission(section="working_memory", ref=ledger_ref(d.seq), reason=f"decision {d.id} not shown")
        for d in s.decisions
    ]
    dropped.extend(
        r.Omission(section="working_memory", ref=ledger_ref(f.seqs[-1]), reason=f"follow-up {f.id} not shown")
        for f in s.follow_ups
        if f.seqs
    )
    dropped.extend(
        r.Omission(section="working_memory", ref=ledger_ref(f.seq), reason=f"file {f.path} not shown")
        for f in s.files
    )
    truncated = [header, *_core_lines(s), *_plan_lines(s, collapse_done=True), *_wait_lines(s)]
    if dropped:
        truncated.append(
            f"[working memory truncated: {len(s.decisions)} decisions, {len(s.follow_ups)} follow-ups, "
            f"{len(s.files)} files not shown — restore with ref {dropped[0].ref} …, or `holon get`]"
        )
    return _candidate(
        "working_memory",
        [
            _form("full", full, count),
            _form("compact", compact, count),
            _form("truncated", truncated, count, dropped),
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
    if inputs.context_summary_seq is not None:
        ref = ledger_ref(inputs.context_summary_seq)
        head = summary.text[:1200]
        if len(head) < len(summary.text):
            omission = r.Omission(section="context_summary", ref=ref, reason="legacy summary truncated")
            shown = f"{len(head):,} of {len(summary.text):,} chars"
            note = f"[summary truncated at {shown} — restore with ref {ref}]"
            forms.append(_form("truncated", [header, head, note], count, [omission]))
    return _candidate("context_summary", forms)


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


def episodes_candidate(
    selected: Sequence[r.ContextEpisodeRecord],
    sub_budget: int,
    count: Counter,
    current_decisions: dict[str, str] | None = None,
) -> Candidate | None:
    """Selected episodes, best first, filling their own sub-budget; each shows its ref.

    ``current_decisions`` (decision id → its current text: working memory's, else the
    latest archived) marks decisions an episode lists that were revised since.
    """
    if not selected or sub_budget <= 0:
        return None
    header = "## Relevant earlier episodes (restore any with `holon get episode:<id>`)"
    header_tokens = count(header) + 1

    def fill(kind: FormKind, limit: int) -> Form | None:
        lines = [header]
        used = header_tokens
        for episode in selected[:limit]:
            full, compact = episode_text_forms(episode)
            if current_decisions:
                full = _revised_decisions(full, episode, current_decisions)
            text = full if kind == "full" else compact
            cost = count(text) + 1
            if used + cost > sub_budget:
                continue
            lines.append(text)
            used += cost
        if len(lines) == 1:
            return None
        # Tokens as the sum of the parts plus one per line break (an upper bound), so
        # each episode text is counted once.
        return Form(kind=kind, text="\n".join(lines), tokens=used - 1)

    forms = [
        f for f in (fill("full", len(selected)), fill("compact", len(selected)), fill("truncated", 1)) if f
    ]
    if not forms:
        return None
    return _candidate("episodes", forms)


# --------------------------------------------------------------------------- TurnScoped


def pending_delta_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """What changed in working memory and has not yet been shown (rendered until confirmed)."""
    delta = inputs.pending_delta
    if delta is None:
        return None
    header = (
        f"## Working memory changes (revision {delta.from_revision} → {delta.to_revision}, "
        f"{delta.reason.replace('_', ' ')})"
    )
    full = [header, *(f"- {line}" for line in delta.lines)]
    if not delta.lines:
        full.append("- changed: " + ", ".join(delta.changed_fields))
    forms = [_form("full", full, count)]
    if len(delta.lines) > 3:
        compact = [header, *(f"- {_clip(line, 120)}" for line in delta.lines[:3])]
        compact.append(f"- (+{len(delta.lines) - 3} more changes; current values are in working memory)")
        forms.append(_form("compact", compact, count))
    return _candidate("pending_delta", forms)


def _live_matches_snapshot(inputs: ContextInputs) -> bool:
    s, work, plan = inputs.snapshot, inputs.active_work, inputs.plan
    if work is None or s.active_work_item_id != work.id:
        return False
    if (s.objective, s.delivery_target, s.work_state) != (work.objective, work.delivery_target, work.state):
        return False
    if s.scope_constraints != work.scope_constraints or s.plan_omitted:
        return False
    live = plan.steps if plan is not None else ()
    return len(live) == len(s.plan) and all(
        (a.id, a.text, a.status) == (b.id, b.text, b.status) for a, b in zip(live, s.plan, strict=True)
    )


def _environment_line(env: r.ExecutionEnvironment | None) -> list[str]:
    if env is None:
        return []
    parts = [
        f"{k}={v}" for k, v in (("workspace", env.workspace), ("cwd", env.cwd), ("branch", env.branch)) if v
    ]
    parts.extend(f"{k}={env.extra[k]}" for k in sorted(env.extra))
    return ["environment: " + ", ".join(parts)] if parts else []


def active_work_candidate(inputs: ContextInputs, count: Counter) -> Candidate:
    """The live active work item and its current plan (pinned).

    When they equal working memory's, a one-line pointer avoids paying for them twice;
    a mid-revision change (a plan edited, a decision made this turn) is shown here in full
    at once.
    """
    header = "## Active work item"
    work, plan = inputs.active_work, inputs.plan
    env = _environment_line(inputs.environment)
    decided = [
        f"decision {d.id} (made this turn, after working memory revision {inputs.working_memory_revision}): "
        f"{d.text}" + (f" — because {d.rationale}" if d.rationale else "") + f" {_refs(d.seq)}"
        for d in inputs.new_decisions
    ]
    if work is None and plan is None:
        return _candidate(
            "active_work", [_form("full", [header, "No active work item.", *decided, *env], count)]
        )
    if _live_matches_snapshot(inputs):
        assert work is not None
        line = (
            f"{work.id}: unchanged since working memory revision {inputs.working_memory_revision} "
            "(objective, scope and plan are shown there)."
        )
        return _candidate("active_work", [_form("full", [header, line, *decided, *env], count)])

    def lines(collapse: bool) -> list[str]:
        out = [header]
        if work is not None:
            out.append(f"{work.id} ({work.state}) — {work.objective} {_refs(*work.seqs)}")
            if work.delivery_target:
                out.append(f"delivery target: {work.delivery_target}")
            out.extend(f"scope: {c}" for c in work.scope_constraints)
        else:
            out.append("No active work item.")
        if plan is not None:
            out.append(f"current plan: {_refs(plan.seq)}")
            done = 0
            for step in plan.steps:
                if collapse and step.status in ("done", "skipped"):
                    done += 1
                    continue
                out.append(f"  {_MARK[step.status]} {step.id}: {step.text}")
            if done:
                out.append(f"  ({done} finished steps not shown)")
        out.extend(decided)
        out.extend(env)
        return out

    return _candidate(
        "active_work", [_form("full", lines(False), count), _form("compact", lines(True), count)]
    )


def queue_candidate(inputs: ContextInputs, count: Counter) -> Candidate | None:
    """Queued and waiting work items and open waits."""
    if not (inputs.suspended or inputs.queued or inputs.waiting or inputs.open_waits):
        return None
    header = "## Queued and waiting work"
    full, compact = [header], [header]
    for entry in inputs.suspended:
        full.append(f"suspended {entry.id}: {entry.objective} {_refs(*entry.seqs)}")
        full.extend(f"  scope: {c}" for c in entry.scope_constraints)
        compact.append(f"suspended {entry.id}: {_clip(entry.objective, 60)}")
    for label, items in (("queued", inputs.queued), ("waiting", inputs.waiting)):
        for entry in items:
            full.append(f"{label} {entry.id}: {entry.objective} {_refs(*entry.seqs)}")
            compact.append(f"{label} {entry.id}: {_clip(entry.objective, 60)}")
    for wait in inputs.open_waits:
        hint = f" (resume: {wait.resume_hint})" if wait.resume_hint else ""
        item = f" for {wait.work_item_id}" if wait.work_item_id else ""
        full.append(f"open wait {wait.id}{item}: {wait.waiting_on}{hint} {_refs(wait.seq)}")
        compact.append(f"open wait {wait.id}: {_clip(wait.waiting_on, 60)}")
    return _candidate("queue", [_form("full", full, count), _form("compact", compact, count)])


def current_input_candidate(inputs: ContextInputs, count: Counter, *, max_tokens: int) -> Candidate:
    """This turn's input plus continuation context (unknown-outcome calls, resolved waits)."""
    current = inputs.current_input
    trigger = current.trigger if current is not None else "continue"
    header = f"## Current input ({trigger})"
    continuation: list[str] = []
    for ex in inputs.tools:
        # No result yet, or the runtime recorded on resume that the outcome was lost in a
        # crash (status "unknown"): either way the model must check before retrying.
        unknown = ex.result is None or ex.result.status == "unknown"
        if unknown and ex.intent is not None:
            args = _clip(msgspec.json.encode(ex.intent.args, order="sorted").decode(), 160)
            continuation.append(
                f"- tool call {ex.call_id} ({ex.tool} {args}) was started {_refs(ex.intent_seq)} "
                "and its outcome is unknown: check its effects before retrying"
            )
    for wait in inputs.resolved_waits:
        detail = f": {wait.detail}" if wait.detail else ""
        continuation.append(
            f"- wait {wait.id} ({wait.waiting_on}) {wait.resolution}{detail} {_refs(wait.resolved_seq)}"
        )
    tail = ["continuation:", *continuation] if continuation else []
    text = current.text if current is not None else "(no new input: continue the active work)"
    forms = [_form("full", [header, text, *tail], count)]
    if current is not None and current.seq is not None and count(text) > max_tokens:
        ref = ledger_ref(current.seq)
        keep = max(200, max_tokens * 2)
        head, end = text[:keep], text[-keep:]
        hidden = f"{len(text) - 2 * keep:,} of {len(text):,} chars"
        note = f"[input truncated: {hidden} not shown — restore with ref {ref}]"
        omission = r.Omission(section="current_input", ref=ref, reason="current input over its cap")
        forms.append(_form("truncated", [header, head, note, end, *tail], count, [omission]))
    return _candidate("current_input", forms)
