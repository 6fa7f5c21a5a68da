"""Budget planner: pinned minimums first, then by priority; order-independent; loud when it cannot fit."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.context import (
    Budget,
    Candidate,
    ContextInputs,
    CurrentInput,
    Form,
    RenderConfig,
    build_context,
    get_estimator,
    plan_budget,
    prompt_rendered,
)
from holon.errors import BudgetExceeded
from holon.projections import DecisionRef, WorkingMemorySnapshot
from tests.context_session import AGENT, POLICY
from tests.live import LiveLedger


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
