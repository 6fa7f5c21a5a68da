"""Invariants of rendering (DESIGN.md 1, 3, 4, 5) as properties over generated sessions and budgets.

Every prompt fits its budget or BudgetExceeded is raised — exactly when the pinned
minimum cannot fit, with that minimum as ``required``; pinned sections are present
whenever they fit; no tool call is rendered without its result; nothing a section would
show vanishes: it is shown, or reported in the plan with a ref that restores the
evidence it names (truncated items byte for byte), and every placeholder's refs restore;
the current input is shown once, however the ledger recorded it; unchanged revision +
epoch means a byte-identical cacheable prefix and an equal key;
rendering is deterministic across processes.

Budgets are drawn around each session's own pinned minimum and full size
(``tests.strategies.budgets_around``), so BudgetExceeded, joint ("degraded") planning
and compact, truncated and omitted forms all occur; ``pytest --hypothesis-show-statistics``
lists how often.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import blake3
import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import holon.context.render as render_module
import holon.records as r
from holon.context import (
    Budget,
    EpisodeIndex,
    Prompt,
    PromptSection,
    RefSource,
    RenderConfig,
    build_context,
    get_estimator,
    inputs_from_state,
    parse_ref,
    prompt_rendered,
    restore,
    restore_bytes,
)
from holon.context.history import TURN_WORK_HEADER
from holon.context.render import token_counter
from holon.context.sections import (
    SECTION_ORDER,
    active_work_candidate,
    current_input_candidate,
    pending_delta_candidate,
    system_candidate,
    working_memory_candidate,
)
from holon.errors import BudgetExceeded, RefNotFound
from holon.projections import ProjectionState, apply, initial_state
from holon.testing import AGENT, CONSTRAINT, Session, run_session
from tests.live import LiveLedger, RecordsSource, evidence_of
from tests.strategies import AgentRun, agent_runs, budgets_around

ROOT = Path(__file__).resolve().parent.parent
SEPARATORS = len(SECTION_ORDER)
# A cleared result: the line before it is its header, `[ledger:N] result <call id> <status>...:`.
_CLEARED = re.compile(
    r"\] result (\S+) [^\n]*:\n"  # the result's header, then its preview lines (none of another unit)
    r"(?:(?!\[ledger:\d+\] )[^\n]*\n)*?"
    r"\[cleared: ([\d,]+) bytes — restore with ref ((?:ledger|blob):[0-9a-f]+)\]"
)
_ANY_REF = re.compile(r"restore with ref ((?:ledger|blob|episode):[0-9a-f]+)")
_REF = re.compile(r"(?:ledger|blob|episode):[0-9a-f]+")
_MESSAGE_CUT = re.compile(r"\[(?:message|brief) truncated: ([\d,]+) chars — restore with ref (\S+)\]")
_INPUT_CUT = re.compile(r"\[input truncated: ([\d,]+) of ([\d,]+) chars not shown — restore with ref (\S+)\]")
_BLOB = re.compile(r"\[output stored as blob, ([\d,]+) bytes — restore with ref (\S+)\]")
# A line that starts a history unit (a result line belongs to its call's unit).
_CITED = re.compile(r"^\[ledger:(\d+)\] (?!result )", re.MULTILINE)
# The id a reason names; a colon after it is the reason's ("work item W1: objective clipped").
_ENTRY = re.compile(
    r"\b(decision|follow-up|work item|open wait|arguments of|result of|file|task) (\S+?):?(?=\s|$)"
)

budgets = st.integers(1_000, 200_000).flatmap(
    lambda w: st.builds(Budget, context_window=st.just(w), output_reserve=st.integers(0, w // 4))
)
configs = st.builds(
    RenderConfig,
    keep_tool_results=st.integers(0, 6),
    tool_result_max_tokens=st.integers(50, 3000),
    clear_at_least=st.integers(0, 3000),
    protected_tools=st.sampled_from([(), ("read_file",)]),
    # Small caps truncate messages, arguments and the current input too.
    message_max_tokens=st.sampled_from([5, 40, 2000]),
    preview_chars=st.sampled_from([0, 20, 300]),
    # An exact BPE too: its counts do not add up over joins, so the prompt is counted whole
    # and refitted (every check below holds for it as well).
    estimator=st.sampled_from(["holon-heuristic", "o200k_base"]),
)
_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_sessions: dict[tuple[int, int], Session] = {}


def _session(turns: int, seed: int) -> Session:
    # Sessions are rendered at a roomy budget (as the runtime would), then re-rendered
    # at the drawn budget; caching them keeps the property fast.
    key = (turns, seed)
    if key not in _sessions:
        _sessions[key] = run_session(turns, Budget(context_window=64_000, output_reserve=4_000), seed=seed)
    return _sessions[key]


class _Records:
    """A RefSource over a generated run's records and blobs."""

    def __init__(
        self, records: list[r.Record], state: ProjectionState, blobs: dict[str, bytes] | None = None
    ) -> None:
        self.records = records
        self.archive = state.memory.archive
        self.blobs = blobs or {}

    def record(self, seq: int) -> r.Record:
        if not 0 <= seq < len(self.records):
            raise RefNotFound(f"ledger:{seq}")
        return self.records[seq]

    def blob(self, blob_hash: str) -> bytes:
        if blob_hash not in self.blobs:
            raise RefNotFound(f"blob:{blob_hash}")
        return self.blobs[blob_hash]

    def episode(self, episode_id: int) -> r.ContextEpisodeRecord:
        return self.archive.get(episode_id)


def _sizes(
    state: ProjectionState, config: RenderConfig, index: EpisodeIndex | None = None
) -> tuple[int, int]:
    """The pinned minimum (as BudgetExceeded reports it) and the full non-history size."""
    try:
        build_context(state, Budget(context_window=SEPARATORS + 1), config, agent_id=AGENT, index=index)
    except BudgetExceeded as exc:
        pinned = exc.required
    else:
        pinned = 1
    roomy = build_context(state, Budget(context_window=10_000_000), config, agent_id=AGENT, index=index)
    full = sum(s.tokens + 1 for s in roomy.sections if s.name != "history")
    return pinned, full


def _check_pairs(prompt: Prompt) -> None:
    history = prompt.section("history")
    if history is None:
        return
    calls = re.findall(r"\] call (\S+) ", history.text)
    results = re.findall(r"\] result (\S+) ", history.text)
    assert calls == results, "a tool call was rendered without its result (or the reverse)"


def _check_refs(prompt: Prompt, session: Session) -> None:
    results = {
        rec.body.call_id: rec.body for rec in session.live.records if isinstance(rec.body, r.ToolResult)
    }
    for call_id, size, ref in _CLEARED.findall(prompt.text):
        original = results[call_id]
        data = restore_bytes(ref, session)
        expected = (
            session.blobs[original.blob.hash] if original.blob is not None else original.output.encode()
        )
        assert data == expected and len(data) == int(size.replace(",", ""))
    for ref in _ANY_REF.findall(prompt.text):
        assert restore_bytes(ref, session)
    for omission in prompt.plan.omitted:
        assert restore_bytes(omission.ref, session) is not None


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _check_evidence(omission: r.Omission, source: RefSource, state: ProjectionState) -> None:
    """The ref of an omission restores to the evidence it names (not just to something)."""
    found = restore(omission.ref, source)
    if isinstance(found, bytes):  # a blob: only a cleared tool output is stored as one
        assert "tool result" in omission.reason
        return
    if isinstance(found, r.ContextEpisodeRecord):
        assert omission.section == "episodes" and f"episode {found.episode_id}" in omission.reason
        return
    line = r.encode_json_record(found).decode()
    reason = omission.reason
    if "plan steps" in reason:
        assert isinstance(found.body, r.WorkPlan)
    elif "delta lines" in reason or "working-memory delta" in reason:
        # the delta that made the current revision (pending, or confirmed and still shown)
        assert found.body == state.memory.latest_delta
    elif "work summary" in reason:
        assert isinstance(found.body, r.WorkItem | r.WorkItemState)
    elif "legacy summary" in reason:
        assert isinstance(found.body, r.ContextSummary)
    elif omission.section == "current_input" and "over its cap" in reason:
        assert isinstance(found.body, r.TurnStarted | r.Message)
    elif "message over its cap" in reason:
        assert isinstance(found.body, r.Message)
    elif "brief over its cap" in reason:
        assert isinstance(found.body, r.Brief)
    elif "tool result" in reason:
        assert isinstance(found.body, r.ToolResult)
    elif omission.section == "mandate":
        # An operator's request the mandate shortened or left out.
        assert reason in ("request shortened", "request not shown"), omission
        assert isinstance(found.body, r.Message) and found.body.role in ("user", "operator")
    elif (match := _ENTRY.search(reason)) is not None and match.group(2).startswith("request:"):
        # Work derived from the operator's requests: its id names the first request's record.
        assert match.group(2) == f"request:{found.seq}" and isinstance(found.body, r.Message), omission
    elif reason == "history item cut to fit the room":
        # The newest history unit, cut: each of its records is named (a call and its result).
        assert omission.section == "history"
        assert isinstance(found.body, r.Message | r.Brief | r.ToolIntent | r.ToolResult | r.TurnStarted)
    elif (match := _ENTRY.search(reason)) is not None:
        # The entry's id (or path) is in the record it names.
        assert json.dumps(match.group(2))[1:-1] in line, (omission, line)
    else:
        assert omission.section == "history" and reason in (
            "history over budget",
            "before the history anchor",
        ), omission


def _flat(text: str) -> str:
    return " ".join(text.split())


def _cited_text(text: str) -> list[int]:
    """Seqs of the units ``text`` shows (lines ``[ledger:N] ...``, not a call's result line)."""
    return [int(m) for m in _CITED.findall(text)]


def _cited(section: PromptSection | None) -> list[int]:
    return _cited_text(section.text) if section is not None else []


def _check_complete(prompt: Prompt, state: ProjectionState) -> None:
    """Nothing vanishes: every entry a section would show in full is shown, or reported by ref.

    (Recent history has its own checks in test_context_history.)
    """
    inputs = inputs_from_state(state, agent_id=AGENT)
    omitted = {o.ref for o in prompt.plan.omitted}

    def text_of(name: str) -> str:
        section = prompt.section(name)
        return _flat(section.text) if section is not None else ""

    def shown_or_omitted(what: str, text: str, *refs: str) -> None:
        assert _flat(what) in text or any(ref in omitted for ref in refs), (what, refs)

    s = inputs.snapshot
    if not s.empty:
        memory = text_of("working_memory")
        for d in s.decisions:
            shown_or_omitted(f"decision {d.id}: {d.text}", memory, f"ledger:{d.seq}")
            if d.rationale:
                shown_or_omitted(d.rationale, memory, f"ledger:{d.seq}")
        for f in s.follow_ups:
            shown_or_omitted(f"follow-up {f.id}: {f.text}", memory, f"ledger:{f.seqs[-1]}")
        for file in s.files:
            shown_or_omitted(file.path, memory, f"ledger:{file.seq}")
        if s.work_summary:
            shown_or_omitted(s.work_summary, memory, *(f"ledger:{seq}" for seq in s.work_item_seqs))
        for step in s.plan:
            shown_or_omitted(f"{step.id}: {step.text}", memory, f"ledger:{s.plan_seq}")
        for wait in s.waiting_on:
            assert _flat(wait.waiting_on) in memory
    if inputs.pending_delta is not None:
        delta = text_of("pending_delta")
        reported = any(o.section == "pending_delta" for o in prompt.plan.omitted)
        assert all(_flat(line) in delta for line in inputs.pending_delta.lines) or reported
    active = text_of("active_work")
    if inputs.plan is not None and "unchanged since working memory" not in active:
        for step in inputs.plan.steps:
            shown_or_omitted(f"{step.id}: {step.text}", active, f"ledger:{inputs.plan.seq}")
    queue = text_of("queue")
    for item in (*inputs.suspended, *inputs.queued, *inputs.waiting):
        shown_or_omitted(f"{item.id}: {item.objective}", queue, f"ledger:{item.declared_seq}")
    for item in inputs.suspended:
        for constraint in item.scope_constraints:
            shown_or_omitted(constraint, queue, f"ledger:{item.declared_seq}")
    for wait in inputs.open_waits:
        shown_or_omitted(f"{wait.waiting_on}", queue, f"ledger:{wait.seq}")
        if wait.resume_hint:
            shown_or_omitted(wait.resume_hint, queue, f"ledger:{wait.seq}")
    episodes = text_of("episodes")
    for episode_id in prompt.plan.episodes:
        shown_or_omitted(f"episode:{episode_id} (", episodes, f"episode:{episode_id}")
    if inputs.current_input is not None and inputs.current_input.seq is not None:
        shown_or_omitted(
            inputs.current_input.text, text_of("current_input"), f"ledger:{inputs.current_input.seq}"
        )
        # Shown once: however the input was recorded (on turn_started, as the turn's
        # message, or both), one of the turn's messages with its text is the input, shown
        # here and not in the history.
        turn = state.runtime.turn
        history = text_of("history")
        same = [
            e.seq
            for e in state.runtime.messages
            if turn is not None
            and e.turn == turn.index
            and e.message.role == "user"
            and e.message.text == inputs.current_input.text
        ]
        assert f"[ledger:{inputs.current_input.seq}]" not in history
        assert not same or sum(f"[ledger:{seq}] user:" in history for seq in same) < len(same)
        # In the order it happened: the history holds what came before the input, and
        # the turn's own work (a prompt rendered again within the turn) follows it.
        split = inputs.current_input.seq
        assert all(seq < split for seq in _cited(prompt.section("history")))
        current = prompt.section("current_input")
        assert current is not None
        head, found, work = current.text.partition(f"\n{TURN_WORK_HEADER}\n")
        assert not _cited_text(head)
        assert all(seq > split for seq in _cited_text(work))
        if found:
            event("the turn's own work shown after its input")


def _check_prompt(
    prompt: Prompt, state: ProjectionState, source: RefSource, budget: Budget, config: RenderConfig
) -> None:
    """Every invariant a rendered prompt keeps, whatever its budget."""
    # 1. It fits.
    assert prompt.total_tokens <= budget.available
    assert get_estimator(config.estimator).count(prompt.text) <= budget.available
    # 2. Every pinned section is there (when its minimum does not fit, rendering raises).
    runtime, memory = state.runtime, state.memory
    policy = runtime.policy.policy if runtime.policy is not None else None
    pinned = {"active_work", "current_input"}
    if policy is not None and policy.text:
        pinned.add("system")
    if policy is not None and policy.tools:
        pinned.add("tools")
    if not memory.snapshot.empty:
        pinned.add("working_memory")
    if memory.pending is not None:
        pinned.add("pending_delta")
    assert pinned <= {s.name for s in prompt.sections}, pinned - {s.name for s in prompt.sections}
    _check_pairs(prompt)
    _check_complete(prompt, state)
    # 3. Every omission restores, to the evidence it names.
    evicted = set(prompt.plan.evicted_refs)
    for omission in prompt.plan.omitted:
        _check_evidence(omission, source, state)
    # 4. Every placeholder's refs restore and are reported in the plan.
    for line in prompt.text.splitlines():
        if "restore with ref" not in line:
            continue
        refs = _REF.findall(line.split("restore with ref", 1)[1])
        assert refs, line
        for ref in refs:
            restore(ref, source)
            assert ref in evicted, (ref, line)
    # 5. Truncated items restore byte for byte to the original evidence.
    for size, ref in _MESSAGE_CUT.findall(prompt.text):
        original = restore_bytes(ref, source).decode()
        assert len(original) == _number(size) and original[: config.preview_chars * 2] in prompt.text
    for hidden, size, ref in _INPUT_CUT.findall(prompt.text):
        original = restore_bytes(ref, source).decode()
        keep = (_number(size) - _number(hidden)) // 2
        section = prompt.section("current_input")
        assert len(original) == _number(size) and section is not None
        assert original[:keep] in section.text and original[len(original) - keep :] in section.text
    for size, ref in _BLOB.findall(prompt.text):
        assert len(restore_bytes(ref, source)) == _number(size)
    # What was exercised.
    if prompt.plan.degraded:
        event("degraded: the whole prompt planned jointly")
    for planned in prompt.plan.sections:
        if planned.form != "full":
            event(f"{planned.section} {planned.form}")
    if any("section did not fit the budget" in o.reason for o in prompt.plan.omitted):
        event("a section omitted by the planner")


def _check_threshold(
    state: ProjectionState,
    budget: Budget,
    config: RenderConfig,
    exc: BudgetExceeded,
    index: EpisodeIndex | None = None,
) -> None:
    """BudgetExceeded's numbers are exact: the pinned minimum renders; one token less raises."""
    assert exc.available == budget.available - SEPARATORS
    assert exc.required > exc.available
    assert str(exc.required) in str(exc) and str(exc.available) in str(exc)
    window = budget.output_reserve + SEPARATORS + exc.required
    at = msgspec.structs.replace(budget, context_window=window)
    prompt = build_context(state, at, config, agent_id=AGENT, index=index)
    assert prompt.total_tokens <= at.available
    # At exactly the minimum, the prompt is the pinned sections in their minimum forms.
    assert sum(s.tokens for s in prompt.sections) == exc.required
    with pytest.raises(BudgetExceeded) as below:
        below_budget = msgspec.structs.replace(budget, context_window=window - 1)
        build_context(state, below_budget, config, agent_id=AGENT, index=index)
    assert below.value.required == exc.required


@_SETTINGS
@given(st.integers(6, 30), st.integers(0, 3), configs, st.data())
def test_every_prompt_fits_or_fails_loudly(
    turns: int, seed: int, config: RenderConfig, data: st.DataObject
) -> None:
    session = _session(turns, seed)
    state = session.live.state
    pinned, full = _sizes(state, config, session.index)
    # Fixed budgets as before, and budgets drawn around this session's own sizes.
    regime, budget = data.draw(
        budgets_around(pinned, full, separators=SEPARATORS, absolute=budgets), label="budget"
    )
    event(regime)
    try:
        prompt = build_context(state, budget, config, agent_id=AGENT, index=session.index)
    except BudgetExceeded as exc:
        event("raised BudgetExceeded")
        assert exc.required == pinned
        _check_threshold(state, budget, config, exc, session.index)
        return
    assert budget.available - SEPARATORS >= pinned
    _check_prompt(prompt, state, session, budget, config)
    # The planted facts survive any form: the constraint, the active item, its open steps.
    text = prompt.text
    assert CONSTRAINT in text
    runtime = state.runtime
    active = runtime.active_work_item
    if active is not None:
        assert active.id in text
        plan = runtime.plan_of(active.id)
        for step in plan.steps if plan is not None else ():
            if step.status not in ("done", "skipped"):
                assert step.text in text
    _check_refs(prompt, session)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(max_turns=10, long_texts=True, open_turn=True), configs, st.data())
def test_every_form_names_what_it_left_out(run: AgentRun, config: RenderConfig, data: st.DataObject) -> None:
    # Generated runs have many decisions, follow-ups, queued items and waits: the compact
    # and truncated forms of working memory and the queue really drop entries.
    state = initial_state(run.config)
    for record in run.records:
        state = apply(state, record)
    source = _Records(run.records, state, run.blobs)
    pinned, full = _sizes(state, config)
    regime, budget = data.draw(budgets_around(pinned, full, separators=SEPARATORS), label="budget")
    event(regime)
    try:
        prompt = build_context(state, budget, config, agent_id=AGENT)
    except BudgetExceeded as exc:
        event("raised BudgetExceeded")
        assert exc.required == pinned
        _check_threshold(state, budget, config, exc)
        return
    _check_prompt(prompt, state, source, budget, config)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 50), st.sampled_from([3_000, 12_000, 100_000]))
def test_unchanged_revision_and_epoch_keep_the_prefix(seed: int, window: int) -> None:
    session = run_session(36, Budget(context_window=window, output_reserve=window // 10), seed=seed)
    prompts = [session.prompts[t] for t in sorted(session.prompts)]
    by_key: dict[str, str] = {}
    same_pairs = 0
    for before, after in itertools.pairwise(prompts):
        same = (
            before.identity.working_memory_revision == after.identity.working_memory_revision
            and before.identity.compression_epoch == after.identity.compression_epoch
        )
        if same and not (before.plan.degraded or after.plan.degraded):
            same_pairs += 1
            assert before.block_text("stable") == after.block_text("stable")
            assert before.block_text("agent") == after.block_text("agent")
            assert before.cache_key == after.cache_key
    for p in prompts:
        prefix = p.block_text("stable") + "\x00" + p.block_text("agent")
        # Equal keys => equal prefix text (so changed text => changed key).
        assert by_key.setdefault(p.cache_key, prefix) == prefix
    assert same_pairs > 0, "the session never kept a revision: the property was not exercised"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 50), st.sampled_from([3_000, 12_000, 100_000]))
def test_in_the_recitation_layout_a_new_revision_resends_only_what_follows_the_history(
    seed: int, window: int
) -> None:
    config = RenderConfig(prompt_cache_key="migration", layout="recitation")
    session = run_session(36, Budget(context_window=window, output_reserve=window // 10), config, seed=seed)
    prompts = [session.prompts[t] for t in sorted(session.prompts)]
    kept = 0
    for before, after in itertools.pairwise(prompts):
        start = [p.plan.history.from_seq if p.plan.history is not None else None for p in (before, after)]
        if start[0] != start[1] or before.plan.degraded or after.plan.degraded:
            continue
        # While the history keeps its start, whatever the revision and the epoch did, the
        # prefix before the history holds (the episodes too), and so does its key.
        assert before.block_text("stable") == after.block_text("stable")
        assert before.block_text("agent") == after.block_text("agent")
        assert before.cache_key == after.cache_key
        history = before.section("history")
        if history is None or before.plan.history != after.plan.history:
            continue
        # The history kept its start and clearing: the prompt up to the end of the
        # previous history is the start of this one, across a new revision too.
        end = before.text.index(history.text) + len(history.text)
        assert after.text.startswith(before.text[:end])
        kept += before.identity.working_memory_revision != after.identity.working_memory_revision
    assert kept > 0, "no new revision kept the history: the property was not exercised"


def test_changed_prefix_text_changes_the_key() -> None:
    session = _session(12, 0)
    budget = Budget(context_window=32_000, output_reserve=2_000)
    base = build_context(session.live.state, budget, agent_id=AGENT, index=session.index)
    live = session.live
    changed_policy = r.SystemPolicy(text="A different system prompt.", tools=())
    state = live.state
    changed = apply(state, r.Record(body=changed_policy, ts=live.ts + 1, seq=len(live.records)))
    other = build_context(changed, budget, agent_id=AGENT, index=session.index)
    assert other.identity.working_memory_revision == base.identity.working_memory_revision
    assert other.block_text("stable") != base.block_text("stable")
    assert other.cache_key != base.cache_key


_SCRIPT = """
import blake3
from holon.context import Budget
from holon.testing import run_session
s = run_session(20, Budget(context_window=6000, output_reserve=500), seed=3)
h = blake3.blake3()
for t in sorted(s.prompts):
    h.update(s.prompts[t].text.encode()); h.update(s.prompts[t].cache_key.encode())
print(h.hexdigest())
"""


def test_rendering_is_deterministic_across_processes() -> None:
    outputs = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        outputs.append(done.stdout.strip())
    assert outputs[0] == outputs[1] and len(outputs[0]) == 64


@pytest.mark.parametrize("reserve", [0, 500])
@pytest.mark.parametrize("short", [1, 100])
def test_tiny_budgets_raise_with_numbers(reserve: int, short: int) -> None:
    state = _session(12, 1).live.state
    pinned, _ = _sizes(state, RenderConfig())
    assert pinned > short
    budget = Budget(context_window=reserve + SEPARATORS + pinned - short, output_reserve=reserve)
    with pytest.raises(BudgetExceeded) as info:
        build_context(state, budget, agent_id=AGENT)
    assert (info.value.available, info.value.required) == (pinned - short, pinned)
    assert f"need {pinned} tokens but only {pinned - short} are available" in str(info.value)
    # The caller's own figures, and which sections are pinned: what to change, and by how much.
    message = str(info.value)
    assert f"the room is the budget's {budget.available:,} tokens" in message
    assert f"window of {budget.context_window:,} less an output reserve of {reserve:,}" in message
    assert "current_input " in message and "tokens at their smallest" in message
    _check_threshold(state, budget, RenderConfig(), info.value)


# --------------------------------------------------------------------------- generated runs, rendered live
# DESIGN.md invariant 4 (cache stability) over generated agent runs rendered turn by turn
# as the runtime renders them (each prompt's own ``PromptRendered`` appended, so the sticky
# episode selection and the history anchor work as they do live), with an exact estimator
# as well, whose refit pass used to take its excess off the cacheable prefix's share.
# Generated runs store some tool outputs as blobs, which is how a history item cut to fit
# was found to end inside a placeholder.

RUN_AGENT = "agent-23"


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts ``_assemble`` calls (a refit is a second pass within one build_context)."""
    calls = [0]
    original = render_module._assemble

    def counted(*args: Any, **kwargs: Any) -> Prompt:
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(render_module, "_assemble", counted)
    return calls


def _prefix(prompt: Prompt) -> tuple[str, str]:
    return prompt.block_text("stable"), prompt.block_text("agent")


def _same_identity(a: Prompt, b: Prompt) -> bool:
    return (a.identity.working_memory_revision, a.identity.compression_epoch) == (
        b.identity.working_memory_revision,
        b.identity.compression_epoch,
    )


# --------------------------------------------------------------------------- the exact-estimator refit


def _decided(live: LiveLedger) -> None:
    """An active item with five decisions: working memory has a compact form to fall to."""
    live.append(r.SystemPolicy(text="You are careful."), in_turn=False)
    live.start_turn("user", "go")
    live.append(r.WorkItem(id="W1", objective="objective of W1", state="active"))
    for i in range(5):
        live.append(r.Decision(id=f"D{i}", text=f"decision {i} is long enough to drop.", work_item_id="W1"))
    live.end_turn()
    live.start_turn("user", None)
    live.render()
    live.end_turn()


def test_an_exact_estimator_refit_keeps_the_cacheable_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    # o200k counts "ok 3.\r\n\n" followed by the next history unit one token higher than
    # its parts, so once the anchored history fills its room the whole prompt is over and
    # the renderer plans again in a room smaller by the excess. It took the prefix's share
    # of that smaller room: a working memory filling its share exactly fell to its compact
    # form on every refitted turn and came back on the next — the cacheable prefix changed
    # twice at one revision and epoch (not degraded), a provider cache miss of the whole
    # prompt each time. The share is of the first pass's room now.
    config = RenderConfig(estimator="o200k_base")
    count = token_counter(config.estimator)
    probe = LiveLedger()
    _decided(probe)
    inputs = inputs_from_state(probe.state, agent_id=RUN_AGENT)
    policy, memory = system_candidate(inputs.policy, count), working_memory_candidate(inputs, count)
    assert policy is not None and memory is not None
    full = policy.forms[0].tokens + memory.forms[0].tokens
    assert memory.forms[-1].tokens < memory.forms[0].tokens, "working memory has no smaller form to fall to"
    passes = _count_passes(monkeypatch)
    refits = 0
    for window in range(340, 380, 3):
        room = window - len(SECTION_ORDER)
        # The prefix's share is exactly its full size: one token less and it is compacted.
        budget = Budget(context_window=window, output_reserve=0, prefix_share=(full + 0.01) / room)
        live = LiveLedger()
        _decided(live)
        prompts = []
        for _ in range(10):
            live.start_turn("user", None)
            live.before_prompt()
            before = passes[0]
            prompt = build_context(live.state, budget, config, agent_id=RUN_AGENT)
            refits += passes[0] - before > 1
            prompts.append(prompt)
            live.append(prompt_rendered(prompt), step_ms=5)
            for k in range(4):
                live.append(r.Message(role="assistant", text=f"ok {k}.\r\n\n"))
            live.end_turn()
        for first, then in itertools.pairwise(prompts):
            assert _same_identity(first, then) and not (first.plan.degraded or then.plan.degraded)
            assert _prefix(first) == _prefix(then), f"window {window}: the prefix changed at one revision"
            assert first.cache_key == then.cache_key
    assert refits > 0, "no prompt was refitted: the test no longer exercises the refit"


# --------------------------------------------------------------------------- cache stability, generated


def _squeezed(state: ProjectionState, budget: Budget, config: RenderConfig) -> bool:
    """True when the reserved turn sections take part of the prefix's share.

    The documented exception to a stable prefix (docs/context-rendering.md, Budget
    algorithm 3): the current input in full and the other pinned turn sections at their
    minimum do not fit beside the prefix's share, so working memory gives way to them.
    """
    inputs = inputs_from_state(state, agent_id=RUN_AGENT)
    count = token_counter(config.estimator)
    turn = [
        c
        for c in (
            pending_delta_candidate(inputs, count),
            active_work_candidate(inputs, count),
            current_input_candidate(inputs, count, max_tokens=config.message_max_tokens),
        )
        if c is not None and c.pinned
    ]
    reserved = sum(c.forms[0].tokens if c.name == "current_input" else c.forms[-1].tokens for c in turn)
    room = budget.available - len(SECTION_ORDER)
    return room - reserved < int(room * budget.prefix_share)


def _rendered_live(
    run: AgentRun, budget: Budget, config: RenderConfig
) -> Iterator[tuple[Prompt | None, r.Record | None]]:
    """Replay ``run``'s evidence as the runtime would, rendering each of its prompts for real.

    Yields each prompt (``None`` where it raised BudgetExceeded or the input squeezed the
    prefix) and, between prompts, the evidence records that feed the prefix directly.
    """
    live = LiveLedger(run.config)
    for record in evidence_of(run.records):
        if record.kind == r.PromptRendered.KIND:
            live.before_prompt()
            try:
                prompt = build_context(live.state, budget, config, agent_id=RUN_AGENT)
            except BudgetExceeded:
                yield None, None
                continue
            yield (None if _squeezed(live.state, budget, config) else prompt), None
            live.append(prompt_rendered(prompt), step_ms=5)
            continue
        live._append(r.Record(body=record.body, ts=record.ts, turn=record.turn))
        if record.kind in (r.SystemPolicy.KIND, r.ContextSummary.KIND):
            # A new policy or legacy summary is shown in the prefix as it arrives, at the
            # same revision (its key changes with the prefix hash: see the key check).
            yield None, record
        if record.kind == r.TurnEnded.KIND:
            live.refresh()


_budgets = st.builds(
    Budget,
    context_window=st.integers(300, 6000),
    output_reserve=st.just(0),
    prefix_share=st.sampled_from([0.3, 0.5, 0.8]),
    episode_share=st.sampled_from([0.0, 0.15]),
)
_configs = st.builds(
    RenderConfig,
    estimator=st.sampled_from(["holon-heuristic", "o200k_base"]),
    message_max_tokens=st.sampled_from([5, 40, 2000]),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(max_turns=10, long_texts=True), _budgets, _configs)
def test_unchanged_revision_and_epoch_keep_the_prefix_of_generated_runs(
    run: AgentRun, budget: Budget, config: RenderConfig
) -> None:
    # DESIGN.md invariant 4 over runs with work switches, waits, tasks, plan edits and
    # episodes, at budgets that compact working memory, with either kind of estimator.
    steps = list(_rendered_live(run, budget, config))
    by_key: dict[str, tuple[str, str]] = {}
    for prompt, _ in steps:
        if prompt is not None:
            # Equal keys => equal prefix text, across the whole run.
            assert by_key.setdefault(prompt.cache_key, _prefix(prompt)) == _prefix(prompt)
    for (before, _), (after, _) in itertools.pairwise(steps):
        if before is None or after is None or before.plan.degraded or after.plan.degraded:
            continue
        if not _same_identity(before, after):
            continue
        event("two prompts at one revision and epoch")
        assert _prefix(before) == _prefix(after)
        assert before.cache_key == after.cache_key


# --------------------------------------------------------------------------- a unit cut inside a placeholder

_REF_AFTER = re.compile(r"(?:ledger|blob|episode):[0-9a-f]+")


def _refs_shown_whole(prompt: Prompt, source: RecordsSource | None = None) -> None:
    """Every ref a placeholder shows parses, is one the plan reports, and restores."""
    evicted = set(prompt.plan.evicted_refs)
    for line in prompt.text.splitlines():
        if "restore with ref" in line:
            for ref in _REF_AFTER.findall(line.split("restore with ref", 1)[1]):
                parse_ref(ref)
                assert ref in evicted, (ref, line)
                if source is not None:
                    assert restore_bytes(ref, source)


class _WithBlobs(RecordsSource):
    def __init__(self, live: LiveLedger, blobs: dict[str, bytes]) -> None:
        super().__init__(live.records)
        self.blobs = blobs

    def blob(self, blob_hash: str) -> bytes:
        return self.blobs[blob_hash]


def test_a_unit_cut_to_fit_never_ends_inside_a_blob_placeholder() -> None:
    # The newest unit larger than the history's room is shown as its longest head that
    # fits. A head ending inside "[output stored as blob, … — restore with ref blob:<64 hex>]"
    # showed "blob:a81f19ad674545ca0f0" (windows 180-198 here): a ref holon_get refuses as
    # malformed. The head ends before the placeholder now; the cut note names the result's
    # seq, which restores the blob's bytes.
    data = ("line of output " * 200).encode()
    digest = blake3.blake3(data).hexdigest()
    live = LiveLedger()
    live.append(r.SystemPolicy(text="You are careful."), in_turn=False)
    live.start_turn("user", "go")
    live.append(r.ToolIntent(call_id="c1", tool="bash", args={"command": "ls"}))
    preview = "line of output " * 20
    blob = r.BlobRef(hash=digest, size=len(data), preview=preview)
    live.append(r.ToolResult(call_id="c1", tool="bash", status="ok", blob=blob, exit_code=0))
    live.end_turn()
    live.start_turn("user", "next")
    source = _WithBlobs(live, {digest: data})
    cut = 0
    for window in range(60, 400):
        try:
            prompt = build_context(live.state, Budget(context_window=window), agent_id=RUN_AGENT)
        except BudgetExceeded:
            continue
        cut += "history item cut to fit the room" in prompt.text
        _refs_shown_whole(prompt, source)
    assert cut > 0
