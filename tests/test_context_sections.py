"""Sections: order and stability, working memory vs legacy summary, pending delta until confirmed."""

from __future__ import annotations

import msgspec
import pytest

import holon.records as r
from holon.context import (
    Budget,
    CurrentInput,
    EpisodeIndex,
    RenderConfig,
    build_context,
    inputs_from_state,
    prompt_rendered,
)
from holon.context.budget import Candidate
from holon.context.history import TURN_WORK_HEADER
from holon.context.render import token_counter
from holon.context.sections import (
    LAYOUTS,
    MANDATE_HEADER,
    MANDATE_HEADER_BEFORE_HISTORY,
    SECTION_ORDER,
    SECTION_STABILITY,
    Layout,
    mandate_candidate,
    pending_delta_candidate,
    working_memory_candidate,
)
from holon.errors import BudgetExceeded
from holon.projections import (
    DecisionRef,
    FailingCheck,
    MandateEntry,
    PlanEntry,
    RequestEntry,
    SnapshotPlanStep,
    TaskRef,
    WaitEntry,
    WorkingMemorySnapshot,
    WorkItemEntry,
    task_job,
)
from tests.context_inputs import inputs
from tests.live import LiveLedger, RecordsSource

BUDGET = Budget(context_window=16_000, output_reserve=1_000)
TIGHT = Budget(context_window=1_600, output_reserve=100)


def test_sections_follow_the_rfc_order_and_stability() -> None:
    assert [SECTION_STABILITY[n] for n in SECTION_ORDER] == sorted(
        (SECTION_STABILITY[n] for n in SECTION_ORDER), key=["stable", "agent", "turn"].index
    )
    policy = r.SystemPolicy(text="sys", tools=(r.ToolDefinition(name="t"),))
    prompt = build_context(inputs(policy=policy), BUDGET, RenderConfig(layout="rfc"))
    names = [s.name for s in prompt.sections]
    assert names == sorted(names, key=SECTION_ORDER.index)
    assert names[:3] == ["system", "tools", "working_memory"] and names[-1] == "current_input"
    # After the last Stable and AgentScoped sections, and at the end (no history here).
    assert [s.name for s in prompt.sections if s.breakpoint] == ["tools", "working_memory", "current_input"]


def test_the_recitation_layout_puts_what_changes_with_the_revision_after_the_history() -> None:
    policy = r.SystemPolicy(text="sys", tools=(r.ToolDefinition(name="t"),))
    # The default layout.
    prompt = build_context(inputs(policy=policy), BUDGET)
    names = [s.name for s in prompt.sections]
    assert names == sorted(names, key=LAYOUTS["recitation"].index)
    assert names[:2] == ["system", "tools"] and names[-1] == "current_input"
    assert prompt.section("working_memory").stability == "turn"  # type: ignore[union-attr]
    # The same sections in both layouts, with the same texts; only the order differs.
    rfc = build_context(inputs(policy=policy), BUDGET, RenderConfig(layout="rfc"))
    assert sorted((s.name, s.text) for s in rfc.sections) == sorted((s.name, s.text) for s in prompt.sections)
    assert set(LAYOUTS["recitation"]) == set(SECTION_ORDER)
    # No episodes or history here: the end of the Stable block and the end.
    assert [s.name for s in prompt.sections if s.breakpoint] == ["tools", "current_input"]
    # The key leaves the revision out: the prefix no longer holds working memory.
    assert prompt.cache_key.count(":") == 3 and ":r" in rfc.cache_key and ":e" in rfc.cache_key


def test_legacy_summary_only_without_working_memory() -> None:
    summary = r.ContextSummary(text="Earlier we fixed the importer.", source="claude-code")
    with_memory = build_context(inputs(context_summary=summary, context_summary_seq=3), BUDGET)
    assert with_memory.section("context_summary") is None
    without = build_context(
        inputs(snapshot=WorkingMemorySnapshot(), context_summary=summary, context_summary_seq=3), BUDGET
    )
    assert without.section("working_memory") is None
    section = without.section("context_summary")
    assert (
        section is not None
        and "Earlier we fixed the importer." in section.text
        and section.stability == "agent"
    )


def test_active_work_points_to_memory_when_unchanged_and_shows_live_changes() -> None:
    steps = (r.PlanStep(id="s1", text="write the lexer", status="in_progress"),)
    snap = WorkingMemorySnapshot(
        active_work_item_id="w1",
        work_state="active",
        objective="ship the parser",
        plan=tuple(SnapshotPlanStep(id=s.id, text=s.text, status=s.status) for s in steps),
        plan_seq=4,
    )
    work = WorkItemEntry(id="w1", objective="ship the parser", state="active", declared_seq=1, state_seq=1)
    same = build_context(
        inputs(snapshot=snap, active_work=work, plan=PlanEntry(work_item_id="w1", steps=steps, seq=4)), BUDGET
    )
    active = same.section("active_work")
    assert active is not None and "unchanged since working memory revision 2" in active.text
    edited = (*steps, r.PlanStep(id="s2", text="write the parser tests"))
    live = build_context(
        inputs(snapshot=snap, active_work=work, plan=PlanEntry(work_item_id="w1", steps=edited, seq=9)),
        BUDGET,
    )
    active = live.section("active_work")
    assert active is not None and "write the parser tests" in active.text and "[ledger:9]" in active.text
    # The live change is TurnScoped: the cacheable prefix did not move.
    assert live.block_text("agent") == same.block_text("agent") and live.cache_key == same.cache_key


def _delta_candidate(live: LiveLedger) -> Candidate | None:
    count = token_counter("holon-heuristic")
    return pending_delta_candidate(inputs_from_state(live.state, agent_id="a"), count)


def test_the_revisions_delta_is_pinned_until_confirmed_then_kept_while_that_saves_a_cache_break() -> None:
    live = LiveLedger()
    live.start_turn("operator", "start")
    live.append(r.WorkItem(id="w1", objective="ship the parser", state="active"))
    derived = live.end_turn()
    delta_record = next(x for x in derived if isinstance(x.body, r.WorkingMemoryDelta))
    assert live.state.memory.pending is not None
    live.start_turn("operator", "next")
    first = build_context(live.state, BUDGET, agent_id="a")
    shown = first.section("pending_delta")
    assert shown is not None and shown.stability == "turn"
    candidate = _delta_candidate(live)
    assert candidate is not None and candidate.pinned
    live.append(prompt_rendered(first))
    assert live.state.memory.pending is None
    live.end_turn()

    # Confirmed: the next turns at revision 1 show it in the same bytes (dropping it would
    # change the prompt before the history), no longer pinned; its ref restores the delta.
    for text in ("and then", "and after that"):
        live.start_turn("operator", text)
        candidate = _delta_candidate(live)
        assert candidate is not None and not candidate.pinned
        assert [o.ref for o in candidate.contents] == [f"ledger:{delta_record.seq}"]
        later = build_context(live.state, BUDGET, agent_id="a")
        assert later.identity.working_memory_revision == first.identity.working_memory_revision == 1
        assert later.section("pending_delta") == shown
        upto = [s.name for s in first.sections].index("pending_delta") + 1
        assert [s.text for s in later.sections[:upto]] == [s.text for s in first.sections[:upto]]
        live.append(prompt_rendered(later))
        live.end_turn()

    # The next revision shows its own delta, pinned until confirmed.
    live.start_turn("operator", "finish it")
    live.append(r.WorkItemState(id="w1", state="done"))
    live.end_turn()
    live.start_turn("operator", "what next?")
    second = build_context(live.state, TIGHT, agent_id="a")
    assert second.identity.working_memory_revision == 2
    section = second.section("pending_delta")
    assert section is not None and "revision 1 → 2" in section.text
    live.append(prompt_rendered(second))
    # Rendered again within the turn while the history keeps its start: kept, same bytes.
    live.append(r.Message(role="assistant", text="looking"))
    again = build_context(live.state, TIGHT, agent_id="a")
    assert again.section("pending_delta") == section
    live.append(prompt_rendered(again))
    # The history has to move (it outgrew its room): the delta gives its room back,
    # named as an omission with its ref, and later prompts leave it out too.
    for i in range(30):
        live.append(r.Message(role="assistant", text=f"note {i}: " + "lorem ipsum dolor sit amet " * 12))
    moved = build_context(live.state, TIGHT, agent_id="a")
    assert moved.plan.history != again.plan.history
    assert moved.section("pending_delta") is None
    assert [(o.section, o.ref) for o in moved.plan.omitted if o.section == "pending_delta"] == [
        ("pending_delta", f"ledger:{live.state.memory.latest_delta.evidence_to_seq + 1}")
    ]
    live.append(prompt_rendered(moved))
    live.end_turn()
    live.start_turn("operator", "anything else?")
    assert build_context(live.state, TIGHT, agent_id="a").section("pending_delta") is None


def test_queue_shows_queued_waiting_and_open_waits() -> None:
    queued = WorkItemEntry(id="w2", objective="write docs", state="queued", declared_seq=7, state_seq=7)
    wait = WaitEntry(id="wait1", waiting_on="operator approval", seq=8)
    prompt = build_context(inputs(queued=(queued,), open_waits=(wait,)), BUDGET)
    queue = prompt.section("queue")
    assert queue is not None and "queued w2: write docs" in queue.text and "open wait wait1" in queue.text


def _history_and_input(live: LiveLedger) -> tuple[str, str]:
    prompt = build_context(live.state, BUDGET, agent_id="a")
    history, current = prompt.section("history"), prompt.section("current_input")
    assert current is not None
    return (history.text if history is not None else ""), current.text


def test_an_input_recorded_on_turn_started_and_as_a_message_is_shown_once() -> None:
    # Importers record a user's input both ways; the history must not repeat the input.
    live = LiveLedger()
    live.start_turn("user", "Fix the login page.")
    message = live.append(r.Message(role="user", text="Fix the login page."))
    history, current = _history_and_input(live)
    assert "Fix the login page." in current
    assert "Fix the login page." not in history and f"[ledger:{message.seq}]" not in history
    live.end_turn()
    # Once its turn is over, the input is history like any message, the session's first
    # request too: the history shows it whole where it was sent, and nothing repeats it.
    live.start_turn("user", "Now the signup page.")
    live.append(r.Message(role="user", text="Now the signup page."))
    history, current = _history_and_input(live)
    assert f"[ledger:{message.seq}] user: Fix the login page." in history
    assert build_context(live.state, BUDGET, agent_id="a").section("mandate") is None
    assert "Now the signup page." in current and "Now the signup page." not in history
    live.end_turn()
    live.start_turn("user", "And the footer.")
    live.append(r.Message(role="user", text="And the footer."))
    history, current = _history_and_input(live)
    assert "] user: Now the signup page." in history and "And the footer." in current


def test_a_prompt_rendered_again_within_a_turn_shows_the_turn_s_work_after_its_input() -> None:
    live = LiveLedger()
    live.start_turn("user")
    earlier = live.append(r.Message(role="assistant", text="Ready."))
    live.end_turn()
    live.start_turn("user")
    live.append(r.Message(role="user", text="Fix the login page."))
    _, first = _history_and_input(live)
    assert TURN_WORK_HEADER not in first  # nothing done yet: the input is all there is
    intent = live.append(r.ToolIntent(call_id="c1", tool="bash", args={"command": "pytest"}))
    result = live.append(r.ToolResult(call_id="c1", tool="bash", status="ok", output="1 failed"))
    history, again = _history_and_input(live)
    # In the order it happened: what came before the input, the input, the work on it.
    assert f"[ledger:{earlier.seq}] assistant: Ready." in history
    assert f"[ledger:{intent.seq}]" not in history
    lines = again.splitlines()
    assert lines[:4] == [
        "## Current input (user)",
        "Fix the login page.",
        TURN_WORK_HEADER,
        f'[ledger:{intent.seq}] call c1 bash {{"command":"pytest"}}',
    ]
    assert lines[4:] == [f"[ledger:{result.seq}] result c1 ok:", "1 failed"]


# --------------------------------------------------------------------------- the operator's requests


def _mandate(*texts: str, first_seq: int = 10, omitted: int = 0) -> MandateEntry:
    requests = [
        RequestEntry(seq=first_seq + 10 * i, turn=i, text=t, chars=len(t)) for i, t in enumerate(texts)
    ]
    return MandateEntry(
        session=None, first=requests[0], recent=tuple(requests[1:]), count=len(texts) + omitted
    )


def _mandate_section(budget: Budget, **fields: object) -> str:
    prompt = build_context(inputs(**fields), budget)
    section = prompt.section("mandate")
    assert section is not None
    return section.text


def test_the_operators_requests_are_shown_verbatim_before_the_history() -> None:
    mandate = _mandate("Port it to Rust.\nKeep the Justfile.", "Also: no unsafe code.")
    prompt = build_context(inputs(mandate=mandate), Budget(context_window=8_000))
    text = prompt.section("mandate").text  # type: ignore[union-attr]
    assert text.splitlines()[0].startswith("## Operator's requests (this session, oldest first")
    assert (
        "[ledger:10] Port it to Rust.\nKeep the Justfile." in text
        and "[ledger:20] Also: no unsafe code." in text
    )


def _requests_session(n: int) -> LiveLedger:
    live = LiveLedger()
    for i in range(n):
        live.start_turn("user")
        live.append(
            r.Message(role="user", text=f"request {i}: " + ("keep the totals exact " if i == 0 else "go on"))
        )
        live.append(r.ToolIntent(call_id=f"c{i}", tool="bash", args={"command": f"make step{i}"}))
        live.append(
            r.ToolResult(call_id=f"c{i}", tool="bash", status="ok", output=f"step {i} " + "ok " * 300)
        )
        live.append(r.Message(role="assistant", text=f"did step {i}"))
        live.end_turn()
    return live


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_mandate_shows_the_requests_the_history_does_not_right_before_it(layout: Layout) -> None:
    live = _requests_session(40)
    live.start_turn("operator", "what is left?")
    live.append(r.Message(role="operator", text="what is left?"))
    prompt = build_context(
        live.state, Budget(context_window=6_000), RenderConfig(layout=layout), agent_id="a"
    )
    names = [s.name for s in prompt.sections]
    assert names.index("mandate") + 1 == names.index("history")
    mandate, history = prompt.section("mandate"), prompt.section("history")
    assert mandate is not None and history is not None and prompt.plan.history is not None
    start = prompt.plan.history.from_seq
    # Every request is read once: the ones before the history's start here, the rest there,
    # the first always here (the history shows a line pointing up at it).
    for i in range(1, 40):
        seq = next(
            rec.seq for rec in live.records if getattr(rec.body, "text", "").startswith(f"request {i}:")
        )
        in_mandate, in_history = (
            f"[ledger:{seq}] request {i}:" in mandate.text,
            f"request {i}:" in history.text,
        )
        assert (in_mandate, in_history) == ((True, False) if seq < start else (False, True)), i
    assert "request 0: keep the totals exact" in mandate.text and "request 0:" not in history.text
    assert "what is left?" not in mandate.text
    # Its header says where the rest are: the section is not all of them.
    assert mandate.text.splitlines()[0] == MANDATE_HEADER_BEFORE_HISTORY
    assert "later ones are in the history below" in MANDATE_HEADER_BEFORE_HISTORY
    # With no history (the room holds only the pinned sections), every request is here.
    config = RenderConfig(layout=layout)
    with pytest.raises(BudgetExceeded) as small:
        build_context(live.state, Budget(context_window=len(SECTION_ORDER) + 1), config, agent_id="a")
    at_minimum = Budget(context_window=small.value.required + len(SECTION_ORDER))
    bare = build_context(live.state, at_minimum, config, agent_id="a")
    assert bare.section("history") is None
    assert bare.section("mandate").text.splitlines()[0] == MANDATE_HEADER  # type: ignore[union-attr]


def test_the_request_that_is_the_current_input_is_shown_as_the_input_only() -> None:
    mandate = _mandate("Port it to Rust.", "Now add CI.")
    text = _mandate_section(
        Budget(context_window=8_000), mandate=mandate, current_input=CurrentInput(text="Now add CI.", seq=20)
    )
    assert "Port it to Rust." in text and "Now add CI." not in text
    only = build_context(
        inputs(mandate=_mandate("Port it."), current_input=CurrentInput(text="Port it.", seq=10)),
        Budget(context_window=8_000),
    )
    assert only.section("mandate") is None


def test_over_its_sub_budget_the_mandate_shortens_each_request_naming_its_record() -> None:
    first = "Port this project to Rust. " + "Keep every public name. " * 400
    later = [f"request {i}: " + "more detail " * 60 for i in range(8)]
    mandate = _mandate(first, *later, omitted=3)
    budget = Budget(context_window=8_000)
    prompt = build_context(inputs(mandate=mandate), budget)
    section = prompt.section("mandate")
    assert section is not None
    # Whole, the requests take some 3,500 tokens: over the sub-budget of a fifth of the room.
    sub_budget = int((budget.available - len(SECTION_ORDER)) * RenderConfig().mandate_share)
    assert section.form == "compact" and section.tokens <= sub_budget
    text = section.text
    # The first request keeps its start and names the record that restores it; the newest
    # three are whole; the ones between are one line each, naming theirs; the requests
    # the projection no longer holds are counted.
    assert text.splitlines()[1].startswith("[ledger:10] Port this project to Rust.")
    assert f"[request shortened: {len(first):,} chars — restore with ref ledger:10]" in text
    for i in range(5, 8):
        assert f"[ledger:{20 + 10 * i}] {later[i]}" in text
    for i in range(5):
        assert (
            f"[ledger:{20 + 10 * i}] request {i}:" in text
            and f"restore with ref ledger:{20 + 10 * i}]" in text
        )
    assert "(+3 more requests between ledger:10 and ledger:20 not held" in text
    shortened = {o.ref for o in section_omissions(prompt, "mandate")}
    assert shortened == {"ledger:10", *(f"ledger:{20 + 10 * i}" for i in range(5))}


def section_omissions(prompt, name: str) -> list[r.Omission]:  # type: ignore[no-untyped-def]
    return [o for o in prompt.plan.omitted if o.section == name]


def test_the_mandates_minimum_is_bounded_whatever_the_requests_hold() -> None:
    huge = _mandate("x " * 50_000, *("y " * 50_000 for _ in range(16)))
    # With no sub-budget only the minimum is offered.
    candidate = mandate_candidate(inputs(mandate=huge), token_counter(RenderConfig().estimator), sub_budget=0)
    assert candidate is not None and [f.kind for f in candidate.forms] == ["truncated"]
    assert candidate.forms[0].tokens < 600
    for window in (2_000, 4_000):
        prompt = build_context(inputs(mandate=huge), Budget(context_window=window, output_reserve=0))
        section = prompt.section("mandate")
        assert section is not None and prompt.plan.total_tokens <= window


def test_the_mandates_smallest_form_is_the_same_at_every_sub_budget() -> None:
    # BudgetExceeded names the pinned minimum; a budget of exactly that must render. The
    # compact form grows with the sub-budget, so the smallest form cannot be "whichever of
    # compact and truncated is smaller at this sub-budget" (one token more at a budget at
    # the minimum than at a budget of nothing, found by test_every_form_names_what_it_left_out).
    count = token_counter(RenderConfig().estimator)
    for texts in (
        ("fix the parser", "add a test", "ship it"),
        ("port this project to Rust " * 40, "keep the Justfile", "and the CI config"),
        tuple(f"request {n} " + "word " * (n * 7) for n in range(12)),
    ):
        smallest = set()
        for sub_budget in (0, 12, 40, 90, 400, 4_000):
            candidate = mandate_candidate(inputs(mandate=_mandate(*texts)), count, sub_budget=sub_budget)
            assert candidate is not None
            smallest.add((candidate.forms[-1].kind, candidate.forms[-1].text))
            assert all(f.tokens > candidate.forms[-1].tokens for f in candidate.forms[:-1])
        assert len(smallest) == 1, smallest


def test_the_compact_mandate_keeps_the_newest_requests_the_sub_budget_holds() -> None:
    later = [f"rule {i}: " + "keep the invoice totals exact " * 8 for i in range(40)]
    mandate = _mandate("Port it to Rust.", *later)
    budget = Budget(context_window=8_000)
    prompt = build_context(inputs(mandate=mandate), budget)
    section = prompt.section("mandate")
    assert section is not None and section.form == "compact"
    sub_budget = int((budget.available - len(SECTION_ORDER)) * RenderConfig().mandate_share)
    assert section.tokens <= sub_budget
    text = section.text
    shown = [i for i in range(40) if f"] rule {i}: " in text]
    # The first request, then a run of the newest ones; the oldest are named, not dropped.
    assert "[ledger:10] Port it to Rust." in text and shown == list(range(shown[0], 40)) and shown[0] > 0
    left = [f"ledger:{20 + 10 * i}" for i in range(shown[0])]
    assert f"(+{shown[0]} more requests of this session not shown — restore with ref {left[0]}" in text
    assert {o.ref for o in section_omissions(prompt, "mandate") if o.reason == "request not shown"} == set(
        left
    )
    # Oldest first: the left-out line comes before the requests it precedes.
    assert text.index("more requests of this session not shown") < text.index(f"] rule {shown[0]}: ")


def test_a_request_sent_again_is_shown_once_with_how_often() -> None:
    nudge = RequestEntry(seq=40, turn=4, text="Keep at it.", chars=11, asked=3)
    mandate = MandateEntry(session=None, first=_mandate("Port it.").first, recent=(nudge,), count=4)
    text = _mandate_section(Budget(context_window=8_000), mandate=mandate)
    assert "[ledger:40] Keep at it. (asked 3 times)" in text and "not held" not in text


def test_work_derived_from_a_request_reads_as_such_and_the_prompt_does_not_contradict_itself() -> None:
    snapshot = WorkingMemorySnapshot(
        active_work_item_id="request:10",
        work_state="active",
        objective="Port it to Rust.",
        work_item_seqs=(10,),
    )
    derived = WorkItemEntry(
        id="request:10", objective="Port it to Rust.", state="active", declared_seq=10, state_seq=10
    )
    prompt = build_context(
        inputs(
            snapshot=snapshot, active_work=derived, current_input=None, mandate=_mandate("Port it to Rust.")
        ),
        Budget(context_window=8_000),
    )
    memory = prompt.section("working_memory")
    assert memory is not None
    assert (
        "active work: request:10 (active) — no work item declared: what the session's first request asks"
        in memory.text
    )
    assert prompt.section("current_input").text.endswith("(no new input: continue the active work)")  # type: ignore[union-attr]
    idle = build_context(
        inputs(snapshot=WorkingMemorySnapshot(), current_input=None), Budget(context_window=8_000)
    )
    assert "no work is active" in idle.section("current_input").text  # type: ignore[union-attr]
    assert "continue the active work" not in idle.text


def test_failing_checks_are_in_working_memory_with_the_end_of_their_output() -> None:
    check = FailingCheck(
        command="pytest -q",
        tool="bash",
        seq=77,
        status="error",
        exit_code=1,
        tail="FAILED t.py::test_x - boom",
    )
    snapshot = WorkingMemorySnapshot(
        active_work_item_id="w1", work_state="active", objective="o", failing=(check,)
    )
    memory = build_context(inputs(snapshot=snapshot), Budget(context_window=8_000)).section("working_memory")
    assert memory is not None
    assert "failing: `pytest -q` (exit 1): FAILED t.py::test_x - boom [ledger:77]" in memory.text


# --------------------------------------------------------------------------- tasks in working memory


def _task_memory() -> WorkingMemorySnapshot:
    running = TaskRef(
        id="t2",
        status="running",
        description="Audit the lexer " + "in detail " * 40,
        started_seq=40,
        tool_calls=3,
        errors=1,
        files=("src/lexer.py",),
        commands=("pytest -q",),
        plan=(r.PlanStep(id="1", text="read", status="done"), r.PlanStep(id="2", text="report")),
        plan_seq=44,
        last_error="pytest -q: error, exit 1: 1 failed",
        last_error_seq=43,
    )
    finished = TaskRef(
        id="t1",
        status="ok",
        description="find the bug",
        started_seq=10,
        result_seq=30,
        summary="The lexer drops empty input. " * 30,
        tool_calls=14,
        errors=2,
        files=("b.py", "a.py"),
        files_omitted=3,
    )
    return WorkingMemorySnapshot(
        active_work_item_id="w1",
        work_state="active",
        objective="ship the parser",
        # Decisions the truncated form leaves out, so that it is offered (it is smaller).
        decisions=tuple(DecisionRef(id=f"d{i}", text="keep the old API " * 5, seq=i) for i in range(3)),
        tasks=(running, finished),
        tasks_omitted=2,
    )


def _forms(snapshot: WorkingMemorySnapshot) -> dict[str, tuple[str, tuple[r.Omission, ...]]]:
    candidate = working_memory_candidate(inputs(snapshot=snapshot), token_counter("holon-heuristic"))
    assert candidate is not None
    return {form.kind: (form.text, form.omissions) for form in candidate.forms}


def test_a_running_tasks_plan_steps_over_the_cap_are_named_as_left_out() -> None:
    memory = _task_memory()
    running = msgspec.structs.replace(memory.tasks[0], plan_omitted=5)
    full, omitted = _forms(msgspec.structs.replace(memory, tasks=(running, *memory.tasks[1:])))["full"]
    assert "    (+5 steps not shown — restore with ref ledger:44)" in full
    assert any(o.ref == "ledger:44" and o.reason == "task t2: 5 plan steps not shown" for o in omitted)


def test_working_memory_shows_each_tasks_result_and_what_its_sub_agent_did() -> None:
    forms = _forms(_task_memory())
    full, full_omitted = forms["full"]
    lines = full.splitlines()
    at = lines.index("task t1 finished (ok): find the bug [ledger:30]")
    summary = lines[at + 1]
    assert (
        summary.startswith("  result: The lexer drops empty input.")
        and len(summary) == len("  result: ") + 300
    )
    assert lines[at + 2] == "  14 tool calls, 2 errors, files: a.py, b.py (and earlier ones)"
    head = next(line for line in lines if line.startswith("task t2 (running): Audit the lexer"))
    assert head.endswith("… [ledger:40]") and len(head) < 260
    assert "  last error: pytest -q: error, exit 1: 1 failed [ledger:43]" in lines
    assert "  plan: [ledger:44]" in lines and "    [ ] 2: report" in lines
    assert lines[-1] == "(+2 older running tasks not shown (over the working-memory cap))"
    # Clipped texts name the records holding them whole.
    assert {(o.ref, o.reason) for o in full_omitted} == {
        ("ledger:40", "task t2 description clipped"),
        ("ledger:30", "task t1 result clipped"),
    }


def test_shorter_forms_keep_every_result_and_name_what_they_leave_out() -> None:
    forms = _forms(_task_memory())
    compact, compact_omitted = forms["compact"]
    assert "  (last error, plan not shown — restore with ref ledger:43, ledger:44)" in compact
    assert "  14 tool calls, 2 errors, files: a.py, b.py (and earlier ones)" in compact
    assert {o.reason for o in compact_omitted} >= {"task t2: last error not shown", "task t2: plan not shown"}
    truncated, truncated_omitted = forms["truncated"]
    for text in (compact, truncated):
        assert "task t1 finished (ok): find the bug [ledger:30]" in text
        assert "  result: The lexer drops empty input." in text
        assert "(+2 older running tasks not shown (over the working-memory cap))" in text
    assert "ledger:43" in truncated and "[ ] 2: report" not in truncated
    assert {"ledger:30", "ledger:40", "ledger:43", "ledger:44"} <= {o.ref for o in truncated_omitted}


def test_the_tasks_share_of_the_pinned_minimum_does_not_grow_with_their_texts() -> None:
    def minimum(n: int) -> int:
        memory = _task_memory()
        huge = tuple(
            msgspec.structs.replace(
                t, description=t.description * n, summary=t.summary * n if t.summary else None
            )
            for t in memory.tasks
        )
        text, _ = _forms(msgspec.structs.replace(memory, tasks=huge))["truncated"]
        return token_counter("holon-heuristic")(text)

    assert minimum(500) == minimum(50)


def test_a_result_that_arrived_while_the_agent_was_idle_is_in_the_prompt_of_its_turn() -> None:
    live = LiveLedger()
    live.start_turn()
    live.append(r.TaskStarted(id="t1", description="run the release build"))
    live.render()
    live.end_turn()
    live.append(r.TaskResult(id="t1", status="ok", summary="build green"), in_turn=False)
    live.start_turn("task", "t1 finished")
    live.before_prompt()
    prompt = build_context(inputs_from_state(live.state, agent_id="a"), BUDGET)
    memory = prompt.section("working_memory")
    assert memory is not None
    assert "task t1 finished (ok): run the release build [ledger:" in memory.text
    assert "  result: build green" in memory.text
    delta = prompt.section("pending_delta")
    assert delta is not None and "task t1 finished (ok): build green" in delta.text


def _tests_episode(episode_id: int, task_id: str, summary: str) -> r.ContextEpisodeRecord:
    """An archived episode whose one task result is a run of the test-suite job."""
    return r.ContextEpisodeRecord(
        episode_id=episode_id,
        boundary_reason="task_rejoined",
        work_item_id=None,
        first_turn=episode_id,
        last_turn=episode_id,
        from_seq=episode_id * 10,
        to_seq=episode_id * 10 + 9,
        objective="fix the parser tests",
        summary_lines=("no active work item", f"task {task_id} ok: {summary}", "closed by: task_rejoined"),
        task_runs=(r.TaskRun(id=task_id, job=task_job("run the test suite")),),
        projection_version=12,
    )


def _episodes_text(index: EpisodeIndex, snapshot: WorkingMemorySnapshot) -> str:
    question = CurrentInput(text="did the parser tests pass?", seq=10_000)
    prompt = build_context(inputs(snapshot=snapshot, current_input=question), BUDGET, index=index)
    episodes = prompt.section("episodes")
    assert episodes is not None, "the parser episodes match the question"
    return episodes.text


def test_an_archived_task_result_a_later_run_of_its_job_replaced_is_not_shown_as_current() -> None:
    old = _tests_episode(1, "t1", "parser tests: 3 failed")
    new = _tests_episode(2, "t2", "parser tests: all passed")
    snapshot = WorkingMemorySnapshot(objective="fix the parser tests")
    # A later episode lists the newer run: the older one's summary is not repeated.
    text = _episodes_text(EpisodeIndex([old, new]), snapshot)
    assert "3 failed" not in text
    assert "task t1 ok: (superseded by a later run of the same job" in text
    assert "task t2 ok: parser tests: all passed" in text
    # Working memory holds the newer result, not archived yet: the same.
    finished = TaskRef(
        id="t2",
        status="ok",
        description="run the test suite",
        result_seq=95,
        summary="parser tests: all passed",
    )
    text = _episodes_text(EpisodeIndex([old]), msgspec.structs.replace(snapshot, tasks=(finished,)))
    assert "3 failed" not in text and "task t1 ok: (superseded" in text
    # A job running again keeps its last result: it is still the latest known.
    running = TaskRef(id="t2", status="running", description="run the test suite")
    text = _episodes_text(EpisodeIndex([old]), msgspec.structs.replace(snapshot, tasks=(running,)))
    assert "task t1 ok: parser tests: 3 failed" in text


# --------------------------------------------------------------------------- scope beyond the cap

_CAP_FULL = tuple(f"rule {i}" for i in range(12))
_BUDGET = Budget(context_window=8_000, output_reserve=1_000)


def _declared(scope: tuple[str, ...], *, plan: bool = True) -> tuple[LiveLedger, r.Record]:
    """W1 declared with ``scope`` (and a one-step plan) in turn 1; turn 2 open, refreshed."""
    live = LiveLedger()
    live.start_turn("operator", "go")
    declared = live.append(r.WorkItem(id="W1", objective="ship it", state="active", scope_constraints=scope))
    if plan:
        live.append(r.WorkPlan(work_item_id="W1", steps=(r.PlanStep(id="s1", text="write the migration"),)))
    live.end_turn()
    live.start_turn("operator", "continue")
    live.before_prompt()
    return live, declared


def test_active_work_does_not_repeat_working_memory_when_the_item_has_more_constraints_than_the_cap() -> None:
    # The live item was compared with the snapshot's first 12 constraints: with a 13th it
    # never matched, and active work repeated every constraint and the plan that working
    # memory had just shown. Now it points at working memory and adds only the 13th.
    live, _ = _declared((*_CAP_FULL, "never push to main"))
    prompt = build_context(live.state, _BUDGET, agent_id="a")
    active = prompt.section("active_work")
    assert active is not None
    assert "unchanged since working memory revision" in active.text, active.text
    assert "scope: never push to main" in active.text.splitlines()
    assert not any(f"scope: {c}" in active.text.splitlines() for c in _CAP_FULL), active.text
    assert "write the migration" not in active.text, active.text
    # Every rule is still in the prompt, none behind a recall.
    assert all(f"scope: {c}" in prompt.text.splitlines() for c in (*_CAP_FULL, "never push to main"))


def test_a_rule_beyond_the_cap_changed_mid_turn_is_shown_from_the_live_item() -> None:
    live, _ = _declared((*_CAP_FULL, "never push to main"))
    live.append(
        r.WorkItem(
            id="W1", objective="ship it", state="active", scope_constraints=(*_CAP_FULL, "push to main")
        )
    )
    active = build_context(live.state, _BUDGET, agent_id="a").section("active_work")
    assert active is not None and "unchanged since" not in active.text
    assert "scope: push to main" in active.text.splitlines()


def test_a_huge_list_of_constraints_beyond_the_cap_stays_bounded_and_restorable() -> None:
    # The pointer form's minimum lists at most 12 of the rest, each clipped, and names the
    # declaration for everything it cuts: a list of pages cannot make the minimum larger
    # than a window.
    rest = tuple(f"rule {i}: " + "do not touch the billing tables " * 40 for i in range(12, 400))
    live, declared = _declared((*_CAP_FULL, *rest))
    budget = Budget(context_window=12_000, output_reserve=1_000)
    prompt = build_context(live.state, budget, agent_id="a")
    assert prompt.total_tokens <= budget.available
    active = prompt.section("active_work")
    assert active is not None and active.form == "truncated"
    assert "unchanged since working memory revision" in active.text, active.text[:400]
    assert "write the migration" not in active.text
    ref = f"ledger:{declared.seq}"
    lines = active.text.splitlines()
    assert sum(line.startswith("scope: rule ") for line in lines) == 12
    assert any("+376 more scope constraints not shown" in line and ref in line for line in lines), lines
    cut = [o for o in prompt.plan.omitted if o.section == "active_work"]
    assert cut and all(o.ref == ref for o in cut)
    # The ref restores every rule.
    body = RecordsSource(live.records).record(declared.seq).body
    assert isinstance(body, r.WorkItem) and body.scope_constraints == (*_CAP_FULL, *rest)


def test_a_pointer_with_no_constraints_beyond_the_cap_reads_as_before() -> None:
    live, _ = _declared(_CAP_FULL)
    active = build_context(live.state, _BUDGET, agent_id="a").section("active_work")
    assert active is not None
    assert active.text.splitlines()[1:] == [
        "W1: unchanged since working memory revision 1 (objective, scope and plan are shown there)."
    ]


# ---------------------------------------------------------------------- an unscoped plan working memory shows


def _unscoped_plan() -> LiveLedger:
    """A plan of no work item from turn 1, and no active item; turn 2 open, refreshed."""
    live = LiveLedger()
    live.start_turn("operator", "go")
    steps = (r.PlanStep(id="s1", text="write the migration"), r.PlanStep(id="s2", text="run it"))
    live.append(r.WorkPlan(work_item_id=None, steps=steps))
    live.end_turn()
    live.start_turn("operator", "continue")
    live.before_prompt()
    return live


def test_active_work_does_not_repeat_an_unscoped_plan_working_memory_shows() -> None:
    # With no active item, the section listed the whole unscoped plan under "No active work
    # item." at every turn, right after working memory had shown the same plan.
    live = _unscoped_plan()
    prompt = build_context(live.state, _BUDGET, agent_id="a")
    active, memory = prompt.section("active_work"), prompt.section("working_memory")
    assert active is not None and memory is not None
    assert "write the migration" in memory.text
    assert "write the migration" not in active.text, active.text
    assert active.text.splitlines()[1] == (
        "No active work item; the plan is unchanged since working memory revision 1 (shown there)."
    )


def test_an_unscoped_plan_edited_this_turn_is_shown_from_the_live_plan() -> None:
    live = _unscoped_plan()
    live.append(r.WorkPlan(work_item_id=None, steps=(r.PlanStep(id="s1", text="drop the table"),)))
    active = build_context(live.state, _BUDGET, agent_id="a").section("active_work")
    assert active is not None and "unchanged since" not in active.text
    assert "s1: drop the table" in active.text


# --------------------------------------------------------------------------- every scope constraint shown


def _scoped(constraints: tuple[str, ...]) -> r.WorkItem:
    return r.WorkItem(id="W1", objective="ship it", state="active", scope_constraints=constraints)


def test_every_scope_constraint_is_in_the_prompt_without_a_recall() -> None:
    # Working memory shows the first 12 and names the rest by ref; the active work section
    # then shows the live item whole (as it does when the plan is over its cap). Matching
    # it to working memory on the first 12 alone would put the 13th rule out of view.
    live = LiveLedger()
    live.start_turn("operator", "go")
    live.append(_scoped((*_CAP_FULL, "never push to main")))
    live.end_turn()
    live.start_turn("operator", "continue")
    live.before_prompt()
    text = build_context(live.state, Budget(context_window=8_000, output_reserve=1_000), agent_id="a").text
    assert all(f"scope: {c}" in text for c in (*_CAP_FULL, "never push to main")), text
