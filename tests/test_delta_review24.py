"""Working-memory deltas say what changed, not the whole new state: an item switch restated
the new item's every rule, plan step, file and decision as "+" lines (which working memory
right above shows in full) and buried the switch; a plan step the window of shown steps slid
onto read as "+plan step", as if new; two plans sharing step ids read as one edited."""

from __future__ import annotations

from holon import records as r
from holon.context import Budget, RenderConfig, build_context
from holon.projections import derive_snapshot, fold, snapshot_lines, verify_derivations
from tests.live import LiveLedger


def _delta_lines(records: tuple[r.Record, ...]) -> tuple[str, ...]:
    (delta,) = (rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta))
    return delta.lines


def _steps(n: int, item: str, *, done: frozenset[int] = frozenset()) -> tuple[r.PlanStep, ...]:
    return tuple(
        r.PlanStep(id=f"s{i}", text=f"step {i} of {item}", status="done" if i in done else "pending")
        for i in range(n)
    )


def _two_items() -> LiveLedger:
    """W1 active (3 rules, 4 steps, a decision), then a switch to W2 (15 rules, 30 steps)."""
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(
        r.WorkItem(id="W1", objective="Build", state="active", scope_constraints=("a", "b", "c"))
    )
    live.append(r.WorkPlan(work_item_id="W1", steps=_steps(4, "W1")))
    live.append(r.Decision(id="D1", text="w1 decision", work_item_id="W1"))
    live.end_turn()
    live.render()
    return live


def _switch_to_w2(live: LiveLedger, *, render: bool = True) -> tuple[str, ...]:
    live.start_turn("user", "switch")
    live.append(r.WorkItemState(id="W1", state="queued"))
    rules = tuple(f"w2 rule {i}" for i in range(15))
    live.append(r.WorkItem(id="W2", objective="Second", state="active", scope_constraints=rules))
    live.append(r.WorkPlan(work_item_id="W2", steps=_steps(30, "W2")))
    live.append(r.Decision(id="D2", text="w2 decision", work_item_id="W2"))
    live.append(r.Decision(id="U1", text="unscoped decision", work_item_id=None))
    live.append(r.FollowUp(id="F1", text="tell ops", status="open"))
    lines = _delta_lines(live.end_turn())
    if render:
        live.render()
    return lines


def test_a_switch_counts_what_the_new_item_brings_and_says_what_became_of_the_previous_one() -> None:
    live = _two_items()
    lines = _switch_to_w2(live)
    # Was: "active work: W1 → W2", "objective: Second", nine "+scope" lines and
    # "(+N more changes)", which cut off the decision and follow-up really added.
    assert lines == (
        "active work: W1 → W2 (W1 is now queued)",
        "W2's 15 scope constraints, 30 plan steps, 1 decision: see working memory",
        "W1's 3 scope constraints, 4 plan steps, 1 decision not shown (W1 is not the active item)",
        "+decision U1: unscoped decision",
        "+follow-up F1: tell ops",
    )


def test_switching_back_is_the_same_few_lines_and_nothing_of_the_new_item_is_a_plus_line() -> None:
    live = _two_items()
    _switch_to_w2(live)
    live.start_turn("user", "back")
    live.append(r.WorkItemState(id="W2", state="waiting"))
    live.append(r.WorkItemState(id="W1", state="active"))
    lines = _delta_lines(live.end_turn())
    assert lines == (
        "active work: W2 → W1 (W2 is now waiting)",
        "W1's 3 scope constraints, 4 plan steps, 1 decision: see working memory",
        "W2's 15 scope constraints, 30 plan steps, 1 decision not shown (W2 is not the active item)",
    )
    # Working memory, right above the delta, is where W1's state is read.
    memory = snapshot_lines(live.state.memory.snapshot)
    assert "scope: a" in memory and "  [ ] s3: step 3 of W1" in memory


def test_a_step_the_window_slides_onto_is_not_new_and_a_step_finished_out_of_view_says_so() -> None:
    live = _two_items()
    _switch_to_w2(live)
    assert live.state.memory.snapshot.plan_omitted == 6  # s24..s29, over the cap of 24
    live.start_turn("user", "s0 done")
    live.append(r.WorkPlan(work_item_id="W2", steps=_steps(30, "W2", done=frozenset({0}))))
    lines = _delta_lines(live.end_turn())
    # Was: "+plan step s24 [ ]: …" (read as a step just added) and "plan step s0: not shown
    # (over the plan cap)", which hid that s0 was finished.
    assert lines == (
        "plan step s24 (was over the cap, now shown): step 24 of W2",
        "plan step s0: pending → done, not shown (over the plan cap)",
    )


def test_changes_beyond_the_plan_cap_are_told_and_marked_not_shown() -> None:
    live = _two_items()
    _switch_to_w2(live)
    live.render()
    live.start_turn("user", "edit the plan")
    steps = [s for s in _steps(30, "W2", done=frozenset({27})) if s.id != "s28"]
    steps.append(r.PlanStep(id="s30", text="appended"))
    live.append(r.WorkPlan(work_item_id="W2", steps=tuple(steps)))
    lines = _delta_lines(live.end_turn())
    # Was a delta with no line at all ("changed: plan_seq, plan_omitted" in the prompt).
    assert lines == (
        "plan step s27: pending → done (not shown: over the plan cap)",
        "+plan step s30 [ ]: appended (not shown: over the plan cap)",
        "-plan step s28",
    )


def test_a_step_reworded_and_finished_at_once_tells_both() -> None:
    live = _two_items()
    live.start_turn("user", "s1")
    steps = list(_steps(4, "W1"))
    steps[1] = r.PlanStep(id="s1", text="reproduce on staging", status="done")
    live.append(r.WorkPlan(work_item_id="W1", steps=tuple(steps)))
    # Was "plan step s1: pending → done" alone: the new wording was not told.
    assert _delta_lines(live.end_turn()) == ("plan step s1: pending → done, reworded: reproduce on staging",)


def test_two_items_whose_plans_share_step_ids_do_not_read_as_one_plan_edited() -> None:
    live = _two_items()
    live.start_turn("user", "switch")
    live.append(r.WorkItemState(id="W1", state="abandoned"))
    live.append(r.WorkItem(id="W3", objective="Third", state="active"))
    live.append(r.WorkPlan(work_item_id="W3", steps=_steps(2, "W3", done=frozenset({0}))))
    lines = _delta_lines(live.end_turn())
    # Was "plan step s0: pending → done", "plan step s1: step 1 of W3", "-plan step s2", …:
    # W1's plan edited, though nobody touched it.
    assert lines == (
        "active work: W1 → W3 (W1 is now abandoned)",
        "W3's 2 plan steps: see working memory",
        "W1's 3 scope constraints, 4 plan steps, 1 decision not shown (W1 is not the active item)",
    )


def test_an_items_first_own_plan_replaces_the_unscoped_one_and_is_not_its_steps_reworded() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.WorkPlan(work_item_id=None, steps=(r.PlanStep(id="s1", text="triage"),)))
    live.end_turn()
    live.render()
    live.start_turn("user", "W1")
    live.append(r.WorkItem(id="W1", objective="Build", state="active"))
    # W1 has no plan: the unscoped one is still shown, and is no item's (no count for W1).
    assert _delta_lines(live.end_turn()) == ("active work: None → W1",)
    live.render()
    live.start_turn("user", "plan W1")
    live.append(r.WorkPlan(work_item_id="W1", steps=(r.PlanStep(id="s1", text="write the exporter"),)))
    # Was "plan step s1: write the exporter", the unscoped step s1 reworded.
    assert _delta_lines(live.end_turn()) == (
        "+plan step s1 [ ]: write the exporter",
        "the unscoped plan's 1 step not shown (W1 has its own plan)",
    )
    live.render()
    live.start_turn("user", "W2")
    live.append(r.WorkItem(id="W2", objective="Other", state="active"))
    assert _delta_lines(live.end_turn()) == (
        "active work: W1 → W2 (W1 is still active; W2 was activated after it)",
        "W1's 1 plan step not shown (W1 is not the active item)",
        "the unscoped plan's 1 step: see working memory",
    )


def test_a_decision_shown_before_and_revised_for_the_new_item_is_still_told() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.Decision(id="D1", text="use sqlite", work_item_id=None))
    live.end_turn()
    live.render()
    live.start_turn("user", "W1")
    live.append(r.WorkItem(id="W1", objective="Build", state="active"))
    live.append(r.Decision(id="D1", text="use postgres", work_item_id="W1"))
    live.append(r.Decision(id="D2", text="pin the driver", work_item_id="W1"))
    # The model read "D1: use sqlite": its revision is a change, D2 is W1's state.
    assert _delta_lines(live.end_turn()) == (
        "active work: None → W1",
        "W1's 1 decision: see working memory",
        "decision D1 revised: use postgres",
    )


def test_a_genuine_change_to_the_same_item_keeps_its_own_line() -> None:
    live = _two_items()
    live.start_turn("user", "more rules")
    live.append(
        r.WorkItem(id="W1", objective="Build it", state="active", scope_constraints=("a", "b", "c", "d"))
    )
    assert _delta_lines(live.end_turn()) == ("objective: Build it", "+scope: d")


def test_a_merged_delta_does_not_tell_a_switch_that_came_back() -> None:
    live = _two_items()
    live.start_turn("user", "away")
    live.append(r.WorkItemState(id="W1", state="queued"))
    live.append(r.WorkItem(id="W2", objective="Second", state="active"))
    live.end_turn()  # not rendered: the delta stays pending and the next one merges into it
    live.start_turn("user", "and back")
    live.append(r.WorkItemState(id="W2", state="queued"))
    live.append(r.WorkItemState(id="W1", state="active"))
    live.append(r.Decision(id="D9", text="ship friday", work_item_id="W1"))
    lines = _delta_lines(live.end_turn())
    # Was "active work: W1 → W1" and "objective: Build" (fields the first turn changed). That
    # W1 is active again after W2 is said in words (test_delta_truth).
    assert lines == (
        "active work: W1 again (W2 was active since revision 1; W2 is now queued)",
        "+decision D9: ship friday",
    )


def test_the_prompt_shows_the_switch_first_and_the_ledger_verifies() -> None:
    live = _two_items()
    _switch_to_w2(live, render=False)
    live.start_turn("user", "next")
    prompt = build_context(live.state, Budget(context_window=50_000), RenderConfig(), agent_id="a")
    (delta,) = (s.text for s in prompt.sections if s.name == "pending_delta")
    assert "- active work: W1 → W2 (W1 is now queued)" in delta
    assert "+scope" not in delta and "+plan step" not in delta
    live.end_turn()
    assert verify_derivations(live.records).ok
    assert fold(live.records).memory.snapshot == derive_snapshot(fold(live.records).runtime)


def test_a_record_repeated_as_it_was_is_said_in_words_not_field_names() -> None:
    live = _two_items()
    live.start_turn("user", "again")
    plan = live.append(r.WorkPlan(work_item_id="W1", steps=_steps(4, "W1")))
    item = live.append(
        r.WorkItem(id="W1", objective="Build", state="active", scope_constraints=("a", "b", "c"))
    )
    # Only the refs working memory cites moved. The delta had no line, and the prompt said
    # "changed: work_item_seqs, plan_seq".
    assert _delta_lines(live.end_turn()) == (
        "re-recorded as they were, only their refs changed: "
        f"W1 [ledger:{item.seq}], the plan [ledger:{plan.seq}]",
    )
