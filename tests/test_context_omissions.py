"""Omissions: every form that shortens or drops something says so, in the text and in the plan, by ref.

The eviction contract (docs/context-rendering.md): whatever a compact, truncated or
omitted form leaves out is named in a visible placeholder line with the ref that
restores it, and reported in ``AssemblyPlan.omitted`` with why.
"""

from __future__ import annotations

import re

import holon.records as r
from holon.context import Budget, CurrentInput, EpisodeIndex, Prompt, RenderConfig, build_context, restore
from holon.projections import (
    DecisionEntry,
    FileRef,
    FollowUpEntry,
    PlanEntry,
    SnapshotPlanStep,
    ToolExecution,
    WaitEntry,
    WorkingMemorySnapshot,
    WorkItemEntry,
)
from holon.testing import Session
from tests.context_inputs import inputs
from tests.live import LiveLedger

_REF = re.compile(r"(?:ledger|blob|episode):[0-9a-f]+")


def _placeholders(text: str) -> list[str]:
    return [line for line in text.splitlines() if "restore with ref" in line]


def _placeholder_refs(text: str) -> set[str]:
    refs: set[str] = set()
    for line in _placeholders(text):
        refs.update(_REF.findall(line.split("restore with ref", 1)[1]))
    return refs


def _omitted(prompt: Prompt, section: str) -> list[r.Omission]:
    return [o for o in prompt.plan.omitted if o.section == section]


def _snapshot(decisions: int = 8, follow_ups: int = 5, files: int = 9) -> WorkingMemorySnapshot:
    return WorkingMemorySnapshot(
        active_work_item_id="w1",
        work_state="active",
        objective="ship the parser",
        work_item_seqs=(3,),
        work_summary="lexer done, parser half way",
        plan=(
            SnapshotPlanStep(id="s1", text="write the lexer", status="done"),
            SnapshotPlanStep(id="s2", text="write the parser", status="in_progress"),
        ),
        plan_seq=4,
        decisions=tuple(
            DecisionEntry(
                id=f"d{i}",
                text=f"decision {i} about the grammar " * 6,
                rationale="it is simpler",
                seq=100 + i,
            )
            for i in range(decisions)
        ),
        follow_ups=tuple(
            FollowUpEntry(id=f"f{i}", text=f"follow up {i}", status="open", first_seq=150 + i, seq=160 + i)
            for i in range(follow_ups)
        ),
        files=tuple(FileRef(path=f"src/f{i}.py", seq=170 + i) for i in range(files)),
    )


def test_compact_working_memory_names_the_entries_it_drops() -> None:
    # The audit's probe: 8 decisions at a 1,000-token window take the compact form.
    prompt = build_context(inputs(snapshot=_snapshot()), Budget(context_window=1_000))
    section = prompt.section("working_memory")
    assert section is not None and section.form == "compact"
    text = section.text
    assert text.count("\ndecision d") == 4
    assert "(+4 more decisions — restore with ref ledger:104, ledger:105, ledger:106, ledger:107)" in text
    assert "(+2 more follow-ups — restore with ref ledger:163, ledger:164)" in text
    assert "(+3 more files — restore with ref ledger:176, ledger:177, ledger:178)" in text
    assert "(work summary not shown — restore with ref ledger:3)" in text
    assert "(1 finished steps not shown — restore with ref ledger:4)" in text
    omitted = _omitted(prompt, "working_memory")
    refs = {o.ref for o in omitted}
    dropped = {f"ledger:{s}" for s in (104, 105, 106, 107, 163, 164, 176, 177, 178, 3, 4)}
    assert dropped <= refs
    # The four shown decisions lost their rationale and were clipped: reported too.
    assert {f"ledger:{100 + i}" for i in range(4)} <= refs
    assert all(o.reason and o.tokens > 0 for o in omitted if o.ref != "ledger:4")
    assert _placeholder_refs(text) <= refs


def test_truncated_working_memory_lists_every_dropped_ref() -> None:
    prompt = build_context(inputs(snapshot=_snapshot()), Budget(context_window=600))
    section = prompt.section("working_memory")
    assert section is not None and section.form == "truncated"
    text = section.text
    assert "decision d" not in text and "follow-up f" not in text and "files:" not in text
    decisions = ", ".join(f"ledger:{100 + i}" for i in range(8))
    assert f"(8 decisions not shown — restore with ref {decisions})" in text
    assert "(5 follow-ups not shown — restore with ref" in text and "(9 files not shown" in text
    refs = {o.ref for o in _omitted(prompt, "working_memory")}
    assert _placeholder_refs(text) == refs
    assert {f"ledger:{s}" for s in [*range(100, 108), *range(160, 165), *range(170, 179)]} <= refs


def test_a_section_the_planner_drops_reports_why_and_what_it_held() -> None:
    queued = tuple(
        WorkItemEntry(
            id=f"w{i}",
            objective=f"objective {i} " * 5,
            state="queued",
            declared_seq=200 + i,
            state_seq=200 + i,
        )
        for i in range(200)
    )
    prompt = build_context(inputs(queued=queued), Budget(context_window=3_000))
    assert prompt.section("queue") is None
    assert ("queue", "omitted") in {(s.section, s.form) for s in prompt.plan.sections}
    omitted = _omitted(prompt, "queue")
    assert [o.ref for o in omitted] == [f"ledger:{200 + i}" for i in range(200)]
    assert all("did not fit the budget" in o.reason and o.tokens > 0 for o in omitted)
    assert set(prompt.plan.evicted_refs) >= {o.ref for o in omitted}


def test_compact_queue_keeps_the_ref_of_every_shortened_line() -> None:
    long = "migrate every report of the billing service to the new warehouse schema and retire the old one"
    queued = tuple(
        WorkItemEntry(id=f"w{i}", objective=long, state="queued", declared_seq=200 + i, state_seq=300 + i)
        for i in range(12)
    )
    wait = WaitEntry(id="wait1", waiting_on="operator approval", resume_hint="a reply in #ops", seq=400)
    prompt = build_context(inputs(queued=queued, open_waits=(wait,)), Budget(context_window=420))
    queue = prompt.section("queue")
    assert queue is not None and queue.form == "compact"
    lines = queue.text.splitlines()[1:]
    assert all(line.endswith(("]",)) for line in lines)
    assert (
        lines[0].endswith("… [ledger:200]") and lines[-1] == "open wait wait1: operator approval [ledger:400]"
    )
    assert {o.ref for o in _omitted(prompt, "queue")} == {f"ledger:{200 + i}" for i in range(12)} | {
        "ledger:400"
    }


def _ledger_with_a_long_delta() -> LiveLedger:
    live = LiveLedger()
    live.start_turn("operator", "start")
    live.append(
        r.WorkItem(
            id="w1",
            objective="ship the parser " * 5,
            state="active",
            scope_constraints=("no new deps", "keep API"),
        )
    )
    steps = tuple(r.PlanStep(id=f"s{i}", text=f"step {i} of the plan " * 4) for i in range(6))
    live.append(r.WorkPlan(work_item_id="w1", steps=steps))
    for i in range(4):
        live.append(r.Decision(id=f"d{i}", text=f"decision {i} " * 10, work_item_id="w1"))
        live.append(r.FollowUp(id=f"f{i}", text=f"follow-up {i} " * 10, work_item_id="w1"))
    live.end_turn()
    live.start_turn("operator", "next")
    return live


def test_compact_pending_delta_names_the_delta_record() -> None:
    live = _ledger_with_a_long_delta()
    pending = live.state.memory.pending
    assert pending is not None and len(pending.lines) > 3
    prompt = build_context(live.state, Budget(context_window=600), agent_id="a")
    section = prompt.section("pending_delta")
    assert section is not None and section.form == "compact"
    omitted = _omitted(prompt, "pending_delta")
    assert len(omitted) == 1 and omitted[0].tokens > 0
    assert f"restore with ref {omitted[0].ref})" in section.text
    # The ref restores the delta record itself, every line of it.
    record = restore(omitted[0].ref, Session(live=live))
    assert isinstance(record, r.Record) and record.body == pending


def test_compact_active_work_names_the_plan_it_collapsed() -> None:
    done = [
        r.PlanStep(id=f"s{i}", text=f"step {i} of a long plan that is mostly done " * 12, status="done")
        for i in range(12)
    ]
    steps = (*done, r.PlanStep(id="s12", text="the last step", status="in_progress"))
    work = WorkItemEntry(id="w1", objective="ship the parser", state="active", declared_seq=1, state_seq=1)
    prompt = build_context(
        inputs(active_work=work, plan=PlanEntry(work_item_id="w1", steps=steps, seq=42)),
        Budget(context_window=500),
    )
    section = prompt.section("active_work")
    assert section is not None and section.form == "compact"
    assert "(12 finished steps not shown — restore with ref ledger:42)" in section.text
    [omission] = _omitted(prompt, "active_work")
    assert omission.ref == "ledger:42" and "12 finished plan steps" in omission.reason and omission.tokens > 0


def _episode(i: int, words: int) -> r.ContextEpisodeRecord:
    return r.ContextEpisodeRecord(
        episode_id=i,
        boundary_reason="turn_cap",
        work_item_id="w1",
        first_turn=i,
        last_turn=i,
        from_seq=i * 10,
        to_seq=i * 10 + 9,
        objective="ship the parser",
        summary_lines=tuple(f"worked on part {i}.{j} of the parser " * 2 for j in range(words)),
        projection_version=1,
    )


def test_episodes_left_out_of_their_sub_budget_are_named() -> None:
    episodes = tuple(_episode(i, 12) for i in range(4))
    budget = Budget(context_window=4_000, episode_share=0.15)
    prompt = build_context(inputs(episodes=episodes), budget)
    section = prompt.section("episodes")
    assert section is not None
    shown = set(re.findall(r"^episode:(\d+) ", section.text, re.M))
    assert 0 < len(shown) < 4
    left = [f"episode:{i}" for i in range(4) if str(i) not in shown]
    assert _placeholder_refs(section.text) == set(left)
    omitted = _omitted(prompt, "episodes")
    assert {o.ref for o in omitted if "not shown" in o.reason} == set(left)
    # The whole selection is recorded, so the next turn at this revision renders the same.
    assert prompt.plan.episodes == (3, 2, 1, 0)
    previous = r.PromptRendered(
        working_memory_revision=2,
        compression_epoch=0,
        cache_key=prompt.cache_key,
        prompt_hash=prompt.prompt_hash,
        total_tokens=prompt.total_tokens,
        budget=budget.context_window,
        estimator=prompt.estimator,
        render_config=prompt.render_config,
        episodes=prompt.plan.episodes,
    )
    again = build_context(inputs(episodes=episodes, previous=previous), budget)
    assert again.block_text("agent") == prompt.block_text("agent")


def test_episodes_that_never_fit_are_still_reported() -> None:
    episodes = (_episode(0, 40),)
    prompt = build_context(inputs(episodes=episodes), Budget(context_window=2_000, episode_share=0.01))
    assert prompt.section("episodes") is None
    [omission] = _omitted(prompt, "episodes")
    assert omission.ref == "episode:0" and "did not fit the episode budget" in omission.reason
    assert omission.tokens > 0


def test_compact_episodes_are_reported_as_shortened() -> None:
    index = EpisodeIndex([_episode(i, 12) for i in range(3)])
    prompt = build_context(inputs(), Budget(context_window=10_000, episode_share=0.02), index=index)
    section = prompt.section("episodes")
    assert section is not None and section.form == "compact"
    shortened = [o for o in _omitted(prompt, "episodes") if "shortened" in o.reason]
    assert {o.ref for o in shortened} == {
        f"episode:{i}" for i in re.findall(r"^episode:(\d+) ", section.text, re.M)
    }


def test_dense_current_input_is_truncated_without_overlap() -> None:
    # 300 dense chars, far over 50 tokens: fewer than the 2 * 200 chars of head and tail.
    text = "".join(f"{i:04x}" for i in range(75))
    prompt = build_context(
        inputs(current_input=CurrentInput(text=text, seq=77)),
        Budget(context_window=200),
        RenderConfig(message_max_tokens=50),
    )
    section = prompt.section("current_input")
    assert section is not None and section.form == "truncated"
    body = section.text.splitlines()
    head, note, end = body[1], body[2], body[3]
    hidden = int(re.search(r"input truncated: ([\d,]+) of", note).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert hidden > 0 and len(head) + hidden + len(end) == len(text)
    assert text.startswith(head) and text.endswith(end)
    assert [o.ref for o in _omitted(prompt, "current_input")] == ["ledger:77"]


def test_clipped_continuation_arguments_are_reported() -> None:
    intent = r.ToolIntent(call_id="c9", tool="bash", args={"command": "echo " + "x" * 400})
    pending = ToolExecution(
        call_id="c9", tool="bash", command="echo", turn=1, ts=1, intent_seq=90, intent=intent
    )
    prompt = build_context(inputs(tools=(pending,)), Budget(context_window=8_000))
    section = prompt.section("current_input")
    assert section is not None and "…) was started [ledger:90]" in section.text
    [omission] = _omitted(prompt, "current_input")
    assert omission.ref == "ledger:90" and "arguments of c9" in omission.reason


def test_full_forms_list_only_the_most_recent_finished_steps() -> None:
    # A long-running plan: listing every finished step in every prompt is work that is done.
    steps = (
        *(r.PlanStep(id=f"s{i}", text=f"finished step {i}", status="done") for i in range(10)),
        r.PlanStep(id="s10", text="the current step", status="in_progress"),
        r.PlanStep(id="s11", text="the next step"),
    )
    work = WorkItemEntry(id="w1", objective="ship the parser", state="active", declared_seq=1, state_seq=1)
    prompt = build_context(
        inputs(active_work=work, plan=PlanEntry(work_item_id="w1", steps=steps, seq=42)),
        Budget(context_window=50_000),
    )
    section = prompt.section("active_work")
    assert section is not None and section.form == "full"
    listed = [line.strip() for line in section.text.splitlines() if line.startswith("  [")]
    assert listed == [
        "[x] s7: finished step 7",
        "[x] s8: finished step 8",
        "[x] s9: finished step 9",
        "[>] s10: the current step",
        "[ ] s11: the next step",
    ]
    assert "(7 finished steps not shown — restore with ref ledger:42)" in section.text
    [omission] = _omitted(prompt, "active_work")
    assert omission.ref == "ledger:42" and omission.reason == "7 finished plan steps collapsed"
