"""Regressions found in a fourth adversarial review of holon.context (one test per bug),
and the scale and restoration checks that review ran."""

from __future__ import annotations

import itertools
import random
import re
from pathlib import Path

import pytest

import holon.records as r
from holon.context import (
    Budget,
    CurrentInput,
    EpisodeIndex,
    RenderConfig,
    build_context,
    get_estimator,
    restore_bytes,
)
from holon.errors import BudgetExceeded
from holon.projections import BriefEntry, PlanEntry, WorkItemEntry
from holon.runtime import Agent, AgentConfig
from tests.context_inputs import inputs, message
from tests.live import LiveLedger, RecordsSource

_WORDS = ("replica", "lag", "vacuum", "index", "constraint", "sequence", "owner", "grant", "role", "cursor")
_WORK = WorkItemEntry(
    id="w1", objective="ship the replica index", state="active", declared_seq=1, state_seq=1
)


def test_a_brief_larger_than_the_history_room_is_cut_instead_of_emptying_the_history() -> None:
    # Briefs had no cap (messages, arguments and tool outputs do). The history is a run of
    # units ending at the newest, so one pasted 260 KB report left out all twenty messages
    # before it too: the prompt had no history at all, only "history over budget".

    report = "verified row\n" * 20_000
    brief = r.Brief(status="result", text=report, work_item_id="w1")
    messages = tuple(message(100 + i, f"message {i}") for i in range(20))
    source = inputs(messages=messages, briefs=(BriefEntry(seq=200, ts=200, turn=200, brief=brief),))
    prompt = build_context(source, Budget(context_window=16_000))

    history = prompt.section("history")
    assert history is not None
    assert "[ledger:119] user: message 19" in history.text
    assert "[brief truncated: 260,000 chars — restore with ref ledger:200]" in history.text
    assert prompt.total_tokens <= 16_000
    [omission] = [o for o in prompt.plan.omitted if o.ref == "ledger:200"]
    assert omission.reason == "brief over its cap"
    source = RecordsSource([r.Record(seq=200, ts=200, body=brief)])
    assert restore_bytes("ledger:200", source) == report.encode()


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


_OUTPUTS = {
    "blob": "line of a long build log\n" * 2_000,
    "control characters": "a\x00b\x1b[31mred\x1b[0m\r\nc\rd\x7f\x0c\u2028\u2029\ufeff end" * 40,
    "crlf over the cap": "row,1,2\r\n" * 400,
    "duplicate blob 1": "dup " * 3_000,
    "duplicate blob 2": "dup " * 3_000,
    "duplicate inline 1": "z" * 2_000,
    "duplicate inline 2": "z" * 2_000,
    "astral blob": "\U0001f600\U0001d11e" * 1_500,
    "trailing blank lines": "x   \n\n\n   ",
}
_PAGE_NOTE = re.compile(r"\[\S+, characters ([\d,]+)-([\d,]+) of [\d,]+(?:: the end|; call holon_get .*)\]$")


def test_every_evicted_tool_output_restores_exactly_through_the_agent(tmp_path: Path) -> None:
    # Outputs over the blob threshold, over the result cap, cleared for age, with control
    # characters, and the same content evicted twice: every ref the prompt leaves behind
    # restores the original bytes (get_bytes), and holon_get's pages rebuild the same text.
    clock = itertools.count(1_000)
    config = AgentConfig(
        budget=Budget(context_window=6_000, output_reserve=500),
        render=RenderConfig(tool_result_max_tokens=300, keep_tool_results=1, clear_at_least=10),
        blob_threshold=4_096,
        recall_page_chars=1_000,
    )
    agent = Agent.open(tmp_path / "agent", agent_id="a", config=config, clock=lambda: next(clock))
    try:
        for name, output in _OUTPUTS.items():
            with agent.turn(input=f"run {name}") as turn:
                turn.context()
                with turn.tool("bash", {"command": name}) as call:
                    call.finish(output)
        with agent.turn(input="and now?") as turn:
            prompt = turn.context()
        evicted = [o.ref for o in prompt.plan.omitted if "tool result" in o.reason]
        assert {ref.split(":")[0] for ref in evicted} == {"ledger", "blob"}
        originals = {output.encode() for output in _OUTPUTS.values()}
        for ref in evicted:
            data = agent.get_bytes(ref)
            assert data in originals, ref
            pages, offset = [], 0
            while True:
                text = agent.get_text(ref, offset=offset)
                note = _PAGE_NOTE.search(text)
                if note is None:
                    pages.append(text)
                    break
                start, end = (int(n.replace(",", "")) for n in note.groups())
                pages.append(text[: end - start])
                if end >= len(data.decode()):
                    break
                offset = end
            assert "".join(pages).encode() == data, ref
    finally:
        agent.close()


def test_budget_exceeded_advises_shortening_the_largest_pinned_section() -> None:
    # The advice always said "shorten the current input", even when a pasted objective in
    # the active work item took the room: the caller was sent to the wrong place.
    work = WorkItemEntry(
        id="w1", objective="migrate the billing schema " * 800, state="active", declared_seq=1, state_seq=1
    )
    with pytest.raises(BudgetExceeded) as info:
        # Its minimum clips a pasted objective (review 5), so only a small window is over.
        build_context(inputs(active_work=work), Budget(context_window=120))
    message = str(info.value)
    assert "shorten the active work item (the largest pinned section" in message
    assert "shorten the current input" not in message
    assert f"need {info.value.required} tokens but only {info.value.available} are available" in message
