"""Budget planner: pinned minimums first, then by priority; order-independent; loud when it cannot fit."""

from __future__ import annotations

import random
import re
from typing import Any

import blake3
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.context import (
    Budget,
    Candidate,
    ContextInputs,
    CurrentInput,
    EpisodeIndex,
    Form,
    RenderConfig,
    build_context,
    get_estimator,
    plan_budget,
    prompt_rendered,
    restore,
    restore_bytes,
)
from holon.errors import BudgetExceeded
from holon.projections import (
    DecisionEntry,
    DecisionRef,
    PlanEntry,
    WaitEntry,
    WorkingMemorySnapshot,
    WorkItemEntry,
)
from holon.testing import AGENT, POLICY
from tests.context_inputs import execution, inputs, message
from tests.live import LiveLedger, RecordsSource
from tests.strategies import text as any_text


def _cand(name: str, order: int, priority: int, sizes: tuple[int, ...], pinned: bool = False) -> Candidate:
    kinds = ("full", "compact", "truncated")
    forms = tuple(Form(kind=kinds[i], text=f"{name}:{kinds[i]}", tokens=n) for i, n in enumerate(sizes))  # type: ignore[arg-type]
    return Candidate(name=name, order=order, stability="turn", priority=priority, pinned=pinned, forms=forms)


def test_pinned_minimum_then_priority_upgrades() -> None:
    cands = [
        _cand("input", 0, 100, (50,), pinned=True),
        _cand("memory", 1, 90, (400, 200, 80), pinned=True),
        _cand("queue", 2, 50, (100, 30)),
        _cand("extra", 3, 10, (500,)),
    ]
    chosen = plan_budget(cands, 340)
    # memory: full (400) does not fit beside input; compact (200) does.
    assert chosen["memory"].kind == "compact"
    assert chosen["input"].kind == "full"
    assert chosen["queue"].kind == "compact"  # 50 + 200 + 100 > 340, 50 + 200 + 30 fits
    assert chosen["extra"].kind == "omitted" and chosen["extra"].text == ""
    assert sum(f.tokens for f in chosen.values()) <= 340


def test_an_omitted_section_reports_why_and_the_refs_it_held() -> None:
    contents = (
        r.Omission(section="queue", ref="ledger:7", reason="queued work item w7", tokens=60),
        r.Omission(section="queue", ref="ledger:9", reason="open wait x", tokens=40),
    )
    queue = msgspec.structs.replace(_cand("queue", 1, 50, (100, 80)), contents=contents)
    chosen = plan_budget([_cand("input", 0, 100, (50,), pinned=True), queue], 100)
    omitted = chosen["queue"]
    assert omitted.kind == "omitted" and omitted.text == "" and omitted.tokens == 0
    assert [o.ref for o in omitted.omissions] == ["ledger:7", "ledger:9"]
    assert [o.tokens for o in omitted.omissions] == [60, 40]
    assert all(
        o.section == "queue" and o.reason.startswith("section did not fit the budget")
        for o in omitted.omissions
    )
    assert "80 tokens" in omitted.omissions[0].reason and "queued work item w7" in omitted.omissions[0].reason
    # A section that fits reports nothing.
    assert plan_budget([queue], 100)["queue"].omissions == ()


def test_higher_priority_is_served_before_lower() -> None:
    cands = [_cand("low", 0, 10, (100,)), _cand("high", 1, 90, (100,))]
    chosen = plan_budget(cands, 150)
    assert chosen["high"].kind == "full" and chosen["low"].kind == "omitted"


def test_budget_exceeded_carries_the_numbers() -> None:
    cands = [_cand("a", 0, 100, (300, 120), pinned=True), _cand("b", 1, 90, (90,), pinned=True)]
    with pytest.raises(BudgetExceeded) as info:
        plan_budget(cands, 200)
    assert info.value.available == 200 and info.value.required == 210
    assert "210" in str(info.value) and "200" in str(info.value)
    assert plan_budget(cands, 210)["a"].kind == "compact"


sizes = st.lists(st.integers(0, 400), min_size=1, max_size=3).map(lambda xs: tuple(sorted(xs, reverse=True)))


@given(
    st.lists(st.tuples(st.integers(0, 100), sizes, st.booleans()), min_size=1, max_size=8),
    st.integers(0, 2000),
    st.randoms(use_true_random=False),
)
def test_plan_is_independent_of_insertion_order_and_fits(specs, allowance, rnd) -> None:  # type: ignore[no-untyped-def]
    cands = [_cand(f"s{i}", i, prio, sz, pinned) for i, (prio, sz, pinned) in enumerate(specs)]
    shuffled = list(cands)
    rnd.shuffle(shuffled)
    pinned_min = sum(c.forms[-1].tokens for c in cands if c.pinned)
    if pinned_min > allowance:
        with pytest.raises(BudgetExceeded):
            plan_budget(shuffled, allowance)
        return
    a, b = plan_budget(cands, allowance), plan_budget(shuffled, allowance)
    assert a == b
    assert sum(f.tokens for f in a.values()) <= allowance
    for c in cands:
        if c.pinned:
            assert a[c.name].kind != "omitted"


def test_forms_must_shrink_in_order_and_names_be_unique() -> None:
    with pytest.raises(ValueError):
        Candidate(
            name="x",
            order=0,
            stability="turn",
            priority=1,
            pinned=False,
            forms=(Form(kind="compact", text="", tokens=1), Form(kind="full", text="", tokens=2)),
        )
    with pytest.raises(ValueError):
        plan_budget([_cand("x", 0, 1, (1,)), _cand("x", 1, 1, (1,))], 10)


def test_budget_validates_and_reserves_output_first() -> None:
    assert Budget(context_window=8000, output_reserve=1000).available == 7000
    with pytest.raises(ValueError):
        Budget(context_window=0)
    with pytest.raises(ValueError):
        Budget(context_window=100, prefix_share=0.0)


def _memory_and_input(input_words: int) -> ContextInputs:
    decisions = tuple(
        DecisionRef(id=f"d{i}", text="decide something important about the migration " * 70, seq=i)
        for i in range(8)
    )
    return ContextInputs(
        agent_id="a",
        snapshot=WorkingMemorySnapshot(
            active_work_item_id="w1", work_state="active", objective="ship", decisions=decisions
        ),
        working_memory_revision=1,
        current_input=CurrentInput(text="please review this log line carefully " * input_words, seq=99),
    )


def test_the_current_input_is_reserved_before_the_prefix() -> None:
    # A long input and a large working memory that do not both fit in full: the input is
    # what this turn answers, so it stays whole and working memory gives way.
    budget = Budget(context_window=10_000, output_reserve=0)
    prompt = build_context(_memory_and_input(1000), budget)
    forms = {s.name: s.form for s in prompt.sections}
    assert forms["current_input"] == "full"
    assert forms["working_memory"] in ("compact", "truncated")
    assert prompt.total_tokens <= budget.available


def test_an_ordinary_input_leaves_the_prefix_as_it_is() -> None:
    # The prefix keeps its own share whatever the (ordinary) input: same bytes, same key.
    budget = Budget(context_window=10_000, output_reserve=0)
    short = build_context(_memory_and_input(3), budget)
    longer = build_context(_memory_and_input(300), budget)
    assert short.section("current_input") is not None and longer.section("current_input") is not None
    assert short.block_text("agent") == longer.block_text("agent")
    assert short.cache_key == longer.cache_key


def test_an_exact_estimator_prompt_fits_counted_whole() -> None:
    # o200k counts a message ending in ".\r\n\n" one token higher once the next history
    # unit follows it: summed in parts, a full history overflowed the budget by up to 14
    # tokens. The renderer counts the whole prompt for such an estimator and refits it.
    estimator = get_estimator("o200k_base")
    config = RenderConfig(estimator="o200k_base")
    budget = Budget(context_window=452, output_reserve=0)
    live = LiveLedger()
    live.append(POLICY, in_turn=False)
    refitted = 0
    for turn in range(1, 80):
        live.start_turn("operator", f"Check step {turn}.")
        live.before_prompt()
        prompt = build_context(live.state, budget, config, agent_id=AGENT)
        live.append(prompt_rendered(prompt), step_ms=5)
        exact = estimator.count(prompt.text)
        assert exact <= budget.available, f"turn {turn}: {exact} tokens in {budget.available}"
        # The plan reports what the prompt costs, which may be less than its parts.
        assert prompt.total_tokens == exact
        parts = sum(s.tokens for s in prompt.sections) + len(prompt.sections) - 1
        refitted += parts < exact
        for k in range(4):
            live.append(r.Message(role="assistant", text=f"ok {k}.\r\n\n"))
    assert refitted > 0, "the session never needed a refit: it no longer tests one"


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from([*"ab .:-", "\r", "\n", "\t", "😀"]), max_size=30), min_size=3),
    st.integers(250, 700),
    st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_exact_estimator_prompts_fit_whatever_the_texts_end_with(
    texts: list[str], window: int, name: str
) -> None:
    # DESIGN.md invariant 3 for an estimator whose counts do not add up over joins: any
    # texts (line endings, whitespace runs, emoji at unit edges), rendered turn after
    # turn so the anchored history fills its room, fit counted whole.
    estimator = get_estimator(name)
    config = RenderConfig(estimator=name)
    budget = Budget(context_window=window, output_reserve=0)
    live = LiveLedger()
    live.append(POLICY, in_turn=False)
    for turn, text in enumerate(texts):
        live.start_turn("operator", f"step {turn}")
        live.before_prompt()
        try:
            prompt = build_context(live.state, budget, config, agent_id=AGENT)
        except BudgetExceeded:
            return  # loud, as the invariant allows
        live.append(prompt_rendered(prompt), step_ms=5)
        assert estimator.count(prompt.text) == prompt.total_tokens <= budget.available
        live.append(r.Message(role="assistant", text=text or "."))


# --------------------------------------------------------------------------- plans and archives at scale

_WORDS = ("replica", "lag", "vacuum", "index", "constraint", "sequence", "owner", "grant", "role", "cursor")
_WORK = WorkItemEntry(
    id="w1", objective="ship the replica index", state="active", declared_seq=1, state_seq=1
)


def _plan(steps: int, *, in_progress: int, text: str = "") -> PlanEntry:
    return PlanEntry(
        work_item_id="w1",
        seq=42,
        steps=tuple(
            r.PlanStep(
                id=f"s{i}",
                text=text or f"port table {i} ({_WORDS[i % len(_WORDS)]}) and check its row counts",
                status="done" if i < 3 else "in_progress" if i == in_progress else "pending",
            )
            for i in range(steps)
        ),
    )


@pytest.mark.parametrize(
    ("plan", "shown"),
    [
        # Thousands of open steps: every one was in the pinned minimum (~25k tokens).
        (_plan(2_000, in_progress=1_500), "+1973 more open steps not shown"),
        # A few steps of pasted text each: the same, through the steps' length.
        (_plan(8, in_progress=4, text="run the migration script " * 2_000), "5 long steps clipped"),
    ],
    ids=["many steps", "long steps"],
)
def test_a_huge_live_plan_still_renders_its_open_steps_within_the_budget(plan: PlanEntry, shown: str) -> None:
    # The live plan (active work) is not capped like working memory's copy, and its
    # smallest form listed every open step in full: such a plan raised BudgetExceeded on
    # every render, so the agent could not take a single turn to work through it.
    budget = Budget(context_window=4_000, output_reserve=500)
    prompt = build_context(inputs(active_work=_WORK, plan=plan), budget)

    section = prompt.section("active_work")
    assert section is not None and section.form == "truncated"
    assert get_estimator().count(prompt.text) <= prompt.total_tokens <= budget.available
    current = next(s for s in plan.steps if s.status == "in_progress")
    assert f"[>] {current.id}: " in section.text  # the step being worked on is always among them
    assert f"{shown} — restore with ref ledger:42)" in section.text
    assert "(3 finished steps not shown — restore with ref ledger:42)" in section.text
    cut = [o for o in prompt.plan.omitted if o.section == "active_work" and "finished" not in o.reason]
    assert [o.ref for o in cut] == ["ledger:42"]


@pytest.mark.parametrize("window", [4_000, 32_000])
def test_a_plan_of_a_few_pasted_pages_still_renders(window: int) -> None:
    # Working memory's copy of the plan is capped in steps, not in their length: its
    # smallest form kept every open step's text in full, so 8 steps of ~50 KB each
    # (69k tokens) raised BudgetExceeded at every render, whatever the window.
    live = LiveLedger()
    live.start_turn("user", "migrate the billing tables")
    live.append(r.WorkItem(id="w1", objective="migrate billing", state="active"))
    page = "run the migration script on the next shard and compare the row counts " * 700
    steps = tuple(
        r.PlanStep(id=f"s{i}", text=page, status="in_progress" if i == 1 else "pending") for i in range(8)
    )
    plan = live.append(r.WorkPlan(work_item_id="w1", steps=steps))
    live.end_turn("completed")
    live.start_turn("user", "continue")
    live.before_prompt()
    budget = Budget(context_window=window, output_reserve=500)
    prompt = build_context(live.state, budget, agent_id="a")

    memory = prompt.section("working_memory")
    assert memory is not None and memory.form == "truncated"
    assert prompt.total_tokens <= budget.available
    assert "  [>] s1: run the migration script on the next shard" in memory.text
    assert f"  (8 long steps clipped — restore with ref ledger:{plan.seq})" in memory.text
    assert any(
        o.ref == f"ledger:{plan.seq}" and o.reason == "8 plan steps clipped" for o in prompt.plan.omitted
    )


def _episodes(n: int) -> list[r.ContextEpisodeRecord]:
    rng = random.Random(n)
    return [
        r.ContextEpisodeRecord(
            episode_id=i,
            boundary_reason="turn_cap",
            work_item_id=f"w{i % 7}",
            first_turn=i,
            last_turn=i,
            from_seq=10 * i,
            to_seq=10 * i + 5,
            objective=" ".join(rng.choice(_WORDS) for _ in range(6)),
            summary_lines=tuple(" ".join(rng.choice(_WORDS) for _ in range(10)) for _ in range(4)),
            touched_files=(f"src/{rng.choice(_WORDS)}.py",),
            projection_version=1,
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("window", [4_000, 8_000, 32_000])
def test_three_thousand_episodes_and_a_400_step_plan_render_within_budget_and_deterministically(
    window: int,
) -> None:
    # A long-lived agent: the render stays within the budget at every window, keeps the plan
    # being worked on visible, and gives the same bytes and cache key from a fresh index.
    episodes = _episodes(3_000)
    source = inputs(
        active_work=_WORK,
        plan=_plan(400, in_progress=200),
        messages=tuple(message(100_000 + i, f"message {i} about the replica lag") for i in range(200)),
        current_input=CurrentInput(text="replica index lag", seq=200_000),
    )
    budget = Budget(context_window=window, output_reserve=500)
    first = build_context(source, budget, index=EpisodeIndex(episodes))
    again = build_context(source, budget, index=EpisodeIndex(list(episodes)))

    assert first.text == again.text and first.cache_key == again.cache_key
    assert first.total_tokens <= budget.available
    section = first.section("active_work")
    assert section is not None and "[>] s200: port table 200" in section.text
    assert first.plan.episodes  # selected from the 3,000, within its sub-budget


def test_budget_exceeded_advises_shortening_the_largest_pinned_section() -> None:
    # The advice always said "shorten the current input", even when a pasted objective in
    # the active work item took the room: the caller was sent to the wrong place.
    work = WorkItemEntry(
        id="w1", objective="migrate the billing schema " * 800, state="active", declared_seq=1, state_seq=1
    )
    with pytest.raises(BudgetExceeded) as info:
        # Its minimum clips a pasted objective, so only a small window is over.
        build_context(inputs(active_work=work), Budget(context_window=120))
    message = str(info.value)
    assert "shorten the active work item (the largest pinned section" in message
    assert "shorten the current input" not in message
    assert f"need {info.value.required} tokens but only {info.value.available} are available" in message


# --------------------------------------------------------------------------- minimums bounded by a constant
# The pinned minimum of a prompt is bounded by a constant, whatever the size of any one
# record: one test per hole, and a property over records with arbitrarily long texts in
# every field.

_BUDGET = Budget(context_window=4_000, output_reserve=500)
_SPEC = "\n".join(f"{i}. the replica must keep every row of table t{i} byte for byte" for i in range(2_000))


def _strings(value: Any) -> set[str]:
    """Every string a record body holds (field values, list items, dict keys and values)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {s for k, v in value.items() for s in (_strings(k) | _strings(v))}
    if isinstance(value, list | tuple):
        return {s for v in value for s in _strings(v)}
    return set()


def _holds(source: RecordsSource, ref: str, original: str) -> bool:
    found = restore(ref, source)
    assert isinstance(found, r.Record)
    return original in _strings(msgspec.to_builtins(found.body))


def _within(prompt: Any, budget: Budget) -> None:
    assert get_estimator().count(prompt.text) <= prompt.total_tokens <= budget.available


# --------------------------------------------------------------------------- 1. scope, objective, target


def test_a_pasted_spec_as_scope_objective_and_target_keeps_each_constraints_start_visible() -> None:
    # The minimum of active work kept the objective, the delivery target and every scope
    # constraint whole: a spec pasted into them raised BudgetExceeded at every render,
    # whatever the window. Scope constraints are safety content: each kept one starts as
    # written, and the note says how many more there are and where to restore them.
    live = LiveLedger()
    live.start_turn("user", "migrate the billing tables")
    scope = ("never drop a table", _SPEC, *(f"keep table t{i} online" for i in range(30)))
    declared = live.append(
        r.WorkItem(
            id="w1",
            objective=f"migrate billing:\n{_SPEC}",
            state="active",
            delivery_target=_SPEC,
            scope_constraints=scope,
        )
    )
    live.end_turn()
    live.start_turn("user", "continue")
    live.before_prompt()
    prompt = build_context(live.state, _BUDGET, agent_id="a")

    _within(prompt, _BUDGET)
    memory = prompt.section("working_memory")
    assert memory is not None and memory.form == "truncated"
    lines = memory.text.splitlines()
    assert "scope: never drop a table" in lines  # short constraints read as written
    assert any(
        line.startswith("scope: 0. the replica must keep every row of table t0 byte") for line in lines
    )
    # (Working memory holds the first 12: the projection's scope_cap; it names the other 20.)
    assert "scope: keep table t9 online" in lines and "scope: keep table t10 online" not in lines
    ref = f"ledger:{declared.seq}"
    assert (
        f"  (objective, delivery target, 1 scope constraint clipped; +20 more scope constraints not shown "
        f"— restore with ref {ref})"
    ) in lines
    assert restore_bytes(ref, RecordsSource(live.records)) == r.encode_json_record(declared)
    [omission] = [o for o in prompt.plan.omitted if o.section == "working_memory" and o.ref == ref]
    assert omission.tokens > 10_000


def test_the_live_work_items_pasted_spec_is_clipped_in_active_work_too() -> None:
    # The live item's constraints are not capped by the projection at all (working
    # memory's are, at 12): 500 of them were all in the pinned minimum.
    work = WorkItemEntry(
        id="w1",
        objective=_SPEC,
        state="active",
        delivery_target=_SPEC,
        scope_constraints=tuple(f"constraint {i}: {_SPEC[:400]}" for i in range(500)),
        declared_seq=7,
        state_seq=7,
    )
    prompt = build_context(inputs(active_work=work), _BUDGET)

    _within(prompt, _BUDGET)
    section = prompt.section("active_work")
    assert section is not None and section.form == "truncated"
    assert section.text.count("\nscope: constraint ") == 12
    assert (
        "(objective, delivery target, 12 scope constraints clipped; +488 more scope constraints not shown"
        " — restore with ref ledger:7)"
    ) in section.text


# --------------------------------------------------------------------------- 2. the other pinned texts


def test_decisions_made_this_turn_waits_and_the_environment_are_bounded_in_the_minimums() -> None:
    # Decisions made this turn (every one, whole, in every form of active work), a wait's
    # text and resume hint (working memory) and the environment line had no bound either.
    live = LiveLedger()
    live.start_turn("user", "port the schema")
    live.append(r.WorkItem(id="w1", objective="port the schema", state="active"))
    wait = live.append(r.WaitingIntent(id="q1", waiting_on=_SPEC, resume_hint=_SPEC, work_item_id="w1"))
    live.end_turn("waiting")
    live.start_turn("user", "go on")
    env = live.append(
        r.ExecutionEnvironment(workspace="/ws", extra={f"k{i}": _SPEC[:300] for i in range(300)})
    )
    decided = [
        live.append(r.Decision(id=f"d{i}", text=f"decision {i}: {_SPEC}", rationale=_SPEC, work_item_id="w1"))
        for i in range(20)
    ]
    live.before_prompt()
    prompt = build_context(live.state, _BUDGET, agent_id="a")

    _within(prompt, _BUDGET)
    active = prompt.section("active_work")
    assert active is not None and active.form == "truncated"
    shown = [line for line in active.text.splitlines() if line.startswith("decision ")]
    # (The projection keeps the newest 8 of an item's decisions.)
    assert [line.split(" ", 2)[1] for line in shown] == [f"d{i}" for i in range(12, 20)]
    assert all(line.endswith(f"… [ledger:{d.seq}]") for line, d in zip(shown, decided[12:], strict=True))
    assert {f"ledger:{d.seq}" for d in decided[12:]} <= {o.ref for o in prompt.plan.omitted}
    assert re.search(rf"environment: workspace=/ws, k0=.*… \[ledger:{env.seq}\]$", active.text, re.M)
    memory = prompt.section("working_memory")
    assert memory is not None
    assert re.search(
        rf"^waiting on q1: 0\. the replica .*… \(resume: 0\. .*…\) \[ledger:{wait.seq}\]$", memory.text, re.M
    )


def test_huge_decisions_in_the_unchanged_pointer_form_of_active_work_fit() -> None:
    # The one-line pointer (live work equal to working memory's) had one form only, with
    # this turn's decisions whole in it; the minimum keeps the newest 8, clipped.
    work = WorkItemEntry(id="w1", objective="ship the parser", state="active", declared_seq=1, state_seq=1)
    decisions = tuple(DecisionEntry(id=f"d{i}", text=_SPEC, seq=40 + i, work_item_id="w1") for i in range(20))
    prompt = build_context(inputs(active_work=work, new_decisions=decisions), _BUDGET)

    _within(prompt, _BUDGET)
    section = prompt.section("active_work")
    assert section is not None and section.form == "truncated"
    assert "w1: unchanged since working memory revision 2" in section.text
    assert [o.reason for o in prompt.plan.omitted if o.ref == "ledger:59"] == ["decision d19 clipped"]
    refs = ", ".join(f"ledger:{40 + i}" for i in range(8))
    assert section.text.endswith(
        f"(+12 earlier decisions made this turn not shown — restore with ref {refs} and 4 more)"
    )
    assert {f"ledger:{40 + i}" for i in range(20)} <= {o.ref for o in prompt.plan.omitted}


def test_continuation_context_is_bounded_in_the_current_inputs_minimum() -> None:
    # A resolved wait's text and detail, and an unknown-outcome call's id, were kept whole
    # in both forms of the current input (the truncated one cut the input text only).
    wait = WaitEntry(id="q1", waiting_on=_SPEC, seq=30, resolved_seq=31, resolution="arrived", detail=_SPEC)
    pending = msgspec.structs.replace(execution(4), call_id="c" * 5_000, result=None, result_seq=None)
    source = inputs(
        resolved_waits=(wait,),
        tools=(pending,),
        current_input=CurrentInput(text="go on", seq=50, trigger="t" * 5_000, trigger_seq=49),
    )
    prompt = build_context(source, _BUDGET)

    _within(prompt, _BUDGET)
    section = prompt.section("current_input")
    assert section is not None and section.form == "truncated"
    assert section.text.startswith(f"## Current input ({'t' * 127}… [ledger:49])")
    assert re.search(
        r"^- wait q1 \(0\. the replica .*…\) arrived: 0\. .*… \[ledger:30\] \[ledger:31\]$",
        section.text,
        re.M,
    )
    assert f"- tool call {'c' * 127}… (bash " in section.text
    assert {o.ref for o in prompt.plan.omitted} >= {"ledger:30", "ledger:31", "ledger:40", "ledger:49"}


def test_many_unknown_outcome_calls_and_a_dense_pending_delta_are_bounded() -> None:
    # Every unknown-outcome call was listed (up to the tool window, 24 by default), its
    # arguments clipped to 160 characters — 430 tokens of emoji each — and a pending delta
    # of three long lines had no shorter form: together over 12,000 tokens of minimum.
    calls = tuple(
        msgspec.structs.replace(
            execution(i),
            intent=r.ToolIntent(call_id=f"c{i}", tool="bash", args={"a": "😀" * 500}),
            result=None,
            result_seq=None,
        )
        for i in range(1, 25)
    )
    delta = r.WorkingMemoryDelta(
        from_revision=1,
        to_revision=2,
        reason="turn_completed",
        changed_fields=("objective",),
        lines=tuple(f"objective: {'😀' * 159}" for _ in range(3)),
        evidence_from_seq=1,
        evidence_to_seq=2,
        projection_version=5,
    )
    prompt = build_context(inputs(tools=calls, pending_delta=delta), _BUDGET)

    _within(prompt, _BUDGET)
    section = prompt.section("current_input")
    assert section is not None and section.form == "truncated"
    assert section.text.count("- tool call c") == 8  # the newest
    assert "- tool call c24 (bash " in section.text and "- tool call c16 " not in section.text
    refs = ", ".join(f"ledger:{10 * i}" for i in range(1, 9))
    assert (
        f"- +16 earlier tool calls whose outcome is unknown are not shown: check their effects before "
        f"retrying them — restore with ref {refs} and 8 more" in section.text
    )
    small = Budget(context_window=400)
    alone = build_context(inputs(pending_delta=delta), small)
    _within(alone, small)
    changes = alone.section("pending_delta")
    assert changes is not None and changes.form == "compact"
    assert changes.text.endswith("- (3 long changes clipped — restore with ref ledger:3)")


def test_minimums_of_ordinary_records_read_as_before() -> None:
    # The new bounds change nothing for texts under them: a short objective, scope and
    # decision are shown as written, on their own lines, in every form.
    work = WorkItemEntry(
        id="w1",
        objective="ship\nthe parser",
        state="active",
        scope_constraints=("no new deps",),
        declared_seq=1,
        state_seq=1,
    )
    decision = DecisionEntry(id="d1", text="use msgspec", rationale="fast", seq=44, work_item_id="w1")
    prompt = build_context(inputs(active_work=work, new_decisions=(decision,)), _BUDGET)

    section = prompt.section("active_work")
    assert section is not None and section.form == "full"
    assert section.text == (
        "## Active work item\nw1 (active) — ship\nthe parser [ledger:1]\nscope: no new deps\n"
        "decision d1 (made this turn, after working memory revision 2): "
        "use msgspec — because fast [ledger:44]"
    )


# --------------------------------------------------------------------------- 3. history larger than its room


@pytest.mark.parametrize("kind", ["message", "tool result"])
def test_a_newest_unit_larger_than_the_room_is_cut_to_fit_instead_of_hiding_all_history(kind: str) -> None:
    # The caps are absolute tokens: with the default message_max_tokens (2,000) and
    # tool_result_max_tokens (2,000), a 1,500-token message or output is under them, yet
    # larger than a small window's history room — and the history, a run of units ending
    # at the newest, was left out whole ("history over budget").
    big = " ".join(f"word{i}" for i in range(700))  # 1,484 tokens
    older = tuple(message(100 + i, f"message {i}") for i in range(5))
    if kind == "message":
        source = inputs(messages=(*older, message(120, big)))
        ref = "ledger:120"
    else:
        source = inputs(messages=older, tools=(execution(30, output=big),))
        ref = "ledger:300, ledger:301"
    budget = Budget(context_window=1_200)
    prompt = build_context(source, budget)

    _within(prompt, budget)
    history = prompt.section("history")
    assert history is not None
    assert re.search(
        rf"\[history item cut to fit the room: [\d,]+ of [\d,]+ chars shown — restore with ref {ref}\]$",
        history.text,
    )
    assert "word0 word1 word2" in history.text
    for one in ref.split(", "):
        assert any(
            o.ref == one and o.reason == "history item cut to fit the room" for o in prompt.plan.omitted
        )
    # The next render, with this one's anchor, cuts the same unit again.
    recorded = r.PromptRendered(
        working_memory_revision=2,
        compression_epoch=0,
        cache_key="k",
        prompt_hash="0" * 64,
        total_tokens=prompt.total_tokens,
        budget=budget.context_window,
        estimator="holon-heuristic",
        history=prompt.plan.history,
    )
    again = build_context(msgspec.structs.replace(source, previous=recorded), budget)
    assert again.section("history") == history


# --------------------------------------------------------------------------- 4. blob preview


def test_a_blob_stored_output_shows_no_preview_when_previews_are_off() -> None:
    # preview_chars=0 left out the preview of a cleared result, but an output stored as a
    # blob still showed the blob's stored preview (200 characters from the runtime).
    blob = b"SECRET-TOKEN=abc " * 500
    ex = execution(3, blob=blob)
    ex = msgspec.structs.replace(
        ex,
        result=msgspec.structs.replace(
            ex.result, blob=msgspec.structs.replace(ex.result.blob, preview=blob[:200].decode())
        ),
    )
    source = inputs(tools=(ex,))
    quiet = build_context(source, _BUDGET, RenderConfig(preview_chars=0))
    some = build_context(source, _BUDGET, RenderConfig(preview_chars=30))

    ref = f"blob:{blake3.blake3(blob).hexdigest()}"
    marker = f"[output stored as blob, {len(blob):,} bytes — restore with ref {ref}]"
    quiet_history = quiet.section("history")
    some_history = some.section("history")
    assert quiet_history is not None and some_history is not None
    assert "SECRET" not in quiet_history.text and f"exit 0:\n{marker}" in quiet_history.text
    assert f"exit 0:\n{blob[:30].decode()}\n{marker}" in some_history.text


# --------------------------------------------------------------------------- the property


def _long(tag: str) -> st.SearchStrategy[str]:
    """A text of up to ~100,000 characters (a few words to pasted pages), tagged to be unique."""
    return st.builds(
        lambda piece, n, sep: f"{tag}:{sep.join([piece] * n)}",
        any_text.filter(str.strip),
        st.integers(1, 2_500),
        st.sampled_from([" ", "\n", "\n\n", "", "\t"]),
    )


@st.composite
def _long_ledgers(draw: st.DrawFn) -> tuple[LiveLedger, list[tuple[int, str]]]:
    """A two-turn run whose every text field is drawn arbitrarily long, the second turn
    open (live edits, decisions, a resolved wait, an unknown-outcome call); with the
    (seq, text) of each long text."""
    live = LiveLedger()
    texts: list[tuple[int, str]] = []

    def put(body: r.Body, *fields: str) -> r.Record:
        rec = live.append(body)
        texts.extend((rec.seq, getattr(body, f)) for f in fields if getattr(body, f))
        return rec

    def few(tag: str, most: int = 3) -> tuple[str, ...]:
        return tuple(draw(st.lists(_long(tag), min_size=1, max_size=most)))

    work_id = draw(st.sampled_from(["w1", None])) or draw(_long("work id"))
    live.start_turn("user", "set up the migration")
    declared = put(
        r.WorkItem(
            id=work_id,
            objective=draw(_long("objective")),
            state="active",
            delivery_target=draw(_long("target")),
            scope_constraints=few("scope"),
            summary=draw(_long("summary")),
        ),
        "id",
        "objective",
        "delivery_target",
        "summary",
    )
    texts.extend((live.records[-1].seq, c) for c in live.records[-1].body.scope_constraints)  # type: ignore[union-attr]
    steps = tuple(
        r.PlanStep(id=draw(_long("step id")) if draw(st.booleans()) else f"s{i}", text=t, status=status)
        for i, (t, status) in enumerate(
            zip(few("step", 4), ["in_progress", "pending", "done", "blocked"], strict=False)
        )
    )
    plan = live.append(r.WorkPlan(work_item_id=work_id, steps=steps))
    texts.extend((plan.seq, s) for step in steps for s in (step.id, step.text))
    put(
        r.Decision(
            id=draw(_long("decision id")),
            text=draw(_long("decision")),
            rationale=draw(_long("rationale")),
            work_item_id=work_id,
        ),
        "id",
        "text",
        "rationale",
    )
    put(r.FollowUp(id="f1", text=draw(_long("follow-up")), work_item_id=work_id), "text")
    wait = put(
        r.WaitingIntent(
            id=draw(_long("wait id")),
            waiting_on=draw(_long("waiting on")),
            resume_hint=draw(_long("hint")),
            work_item_id=work_id,
        ),
        "id",
        "waiting_on",
        "resume_hint",
    )
    put(r.WaitingIntent(id="q2", waiting_on=draw(_long("second wait"))), "waiting_on")
    put(r.Message(role="assistant", text=draw(_long("message"))), "text")
    put(r.Brief(status="result", text=draw(_long("brief")), work_item_id=work_id), "text")
    call_id = draw(_long("call id"))
    put(r.ToolIntent(call_id=call_id, tool="bash", args={"command": draw(_long("command"))}), "call_id")
    texts.append((live.records[-1].seq, live.records[-1].body.args["command"]))  # type: ignore[union-attr]
    put(r.ToolResult(call_id=call_id, tool="bash", status="ok", output=draw(_long("output"))), "output")
    env = live.append(
        r.ExecutionEnvironment(
            workspace=draw(_long("workspace")), cwd="/ws", extra={"note": draw(_long("env note"))}
        )
    )
    texts.extend([(env.seq, env.body.workspace or ""), (env.seq, env.body.extra["note"])])  # type: ignore[union-attr]
    live.end_turn("waiting")

    live.append(r.WaitingResolved(id="q2", detail=draw(_long("detail"))), in_turn=False)
    texts.append((live.records[-1].seq, live.records[-1].body.detail or ""))  # type: ignore[union-attr]
    trigger = draw(st.sampled_from(["user", None])) or draw(_long("trigger"))
    started = live.start_turn(trigger, "continue the migration")
    texts.append((started.seq, trigger))
    if draw(st.booleans()):  # the live item differs from working memory's
        # A redeclaration replaces every field: the first declaration's texts are no longer
        # current, and the refresh before the prompt makes working memory say so.
        texts[:] = [(seq, t) for seq, t in texts if seq != declared.seq]
        put(
            r.WorkItem(
                id=work_id,
                objective=draw(_long("new objective")),
                state="active",
                scope_constraints=few("new scope"),
            ),
            "id",
            "objective",
        )
        texts.extend((live.records[-1].seq, c) for c in live.records[-1].body.scope_constraints)  # type: ignore[union-attr]
    for i in range(draw(st.integers(0, 3))):
        put(
            r.Decision(
                id=draw(_long(f"new decision id {i}")), text=draw(_long("new decision")), work_item_id=work_id
            ),
            "id",
            "text",
        )
    put(r.ToolIntent(call_id=draw(_long("open call id")), tool="bash", args={}), "call_id")
    del wait
    live.before_prompt()
    return live, texts


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(_long_ledgers())
def test_records_with_arbitrarily_long_texts_always_render_and_every_clipped_text_restores(
    run: tuple[LiveLedger, list[tuple[int, str]]],
) -> None:
    # The invariant: the pinned minimum is bounded by a constant, not by the size of any one
    # record, so a modest window always renders (never BudgetExceeded), within the budget;
    # and a text that is not in the prompt whole is named by a ref that restores it exactly.
    live, texts = run
    prompt = build_context(live.state, _BUDGET, agent_id="a")

    _within(prompt, _BUDGET)
    source = RecordsSource(live.records)
    omitted = {o.ref for o in prompt.plan.omitted}
    for seq, original in texts:
        # Shown whole: as written, or JSON-encoded (a call's arguments).
        if original in prompt.text or msgspec.json.encode(original).decode()[1:-1] in prompt.text:
            continue
        ref = f"ledger:{seq}"
        assert ref in omitted, (ref, original[:80])
        assert _holds(source, ref, original), ref


def test_working_memory_names_the_scope_constraints_beyond_its_cap() -> None:
    # The snapshot kept the first 12 scope constraints (scope_cap) and dropped the rest
    # without a word, in every form: a 13th rule of the active item was simply not there.
    live = LiveLedger()
    live.start_turn("user", "migrate the billing tables")
    scope = tuple(f"keep table t{i} online" for i in range(15))
    declared = live.append(
        r.WorkItem(id="w1", objective="migrate billing", state="active", scope_constraints=scope)
    )
    live.end_turn()
    live.start_turn("user", "continue")
    live.before_prompt()
    assert live.state.memory.snapshot.scope_omitted == 3
    prompt = build_context(live.state, Budget(context_window=32_000, output_reserve=1_000), agent_id="a")
    memory = prompt.section("working_memory")
    assert memory is not None and memory.form == "full"
    ref = f"ledger:{declared.seq}"
    assert f"  (+3 more scope constraints not shown — restore with ref {ref})" in memory.text.splitlines()
    assert any(o.section == "working_memory" and o.ref == ref for o in prompt.plan.omitted)


def test_a_call_cut_to_fit_is_never_shown_without_its_result() -> None:
    # The newest unit cut to fit was cut anywhere: with long arguments (under their cap)
    # the head ended inside the call's line, and the prompt showed the call without its
    # result — a pair split, which the renderer promises never happens. Found by the
    # `explore` Hypothesis profile (test_every_form_names_what_it_left_out).
    big = " ".join(f"word{i}" for i in range(700))  # 1,484 tokens: under the 2,000 cap
    call = execution(30, output="done")
    call = msgspec.structs.replace(
        call, intent=msgspec.structs.replace(call.intent, args={"command": f"echo {big}"})
    )
    budget = Budget(context_window=1_200)
    prompt = build_context(inputs(tools=(call,)), budget)

    _within(prompt, budget)
    history = prompt.section("history")
    assert history is not None
    assert "] call c30 " not in history.text and "] result c30 " not in history.text
    # Only the note, naming both records: the call and its result restore together.
    assert re.search(
        r"\n\[history item cut to fit the room: 0 of [\d,]+ chars shown — restore with ref "
        r"ledger:300, ledger:301\]$",
        history.text,
    ), history.text[-300:]
