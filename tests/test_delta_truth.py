"""Working-memory deltas read the way the model reads them over a long run: the reason in a
delta's header and each of its lines must be true, and a change the model must see must not
pass without a word."""

from __future__ import annotations

from holon import records as r
from holon.context import Budget, RenderConfig, build_context
from holon.projections import (
    DEFAULT_CONFIG,
    derive_snapshot,
    encode_checkpoint,
    fold,
    restore_checkpoint,
    snapshot_lines,
    verify_derivations,
)
from tests.live import LiveLedger


def _delta(records: tuple[r.Record, ...]) -> r.WorkingMemoryDelta:
    (delta,) = (rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta))
    return delta


def _steps(n: int, *, done: frozenset[int] = frozenset()) -> tuple[r.PlanStep, ...]:
    return tuple(
        r.PlanStep(id=f"s{i}", text=f"step {i}", status="done" if i in done else "pending") for i in range(n)
    )


def _one_item() -> LiveLedger:
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.WorkItem(id="W1", objective="Build", state="active"))
    live.append(r.WorkPlan(work_item_id="W1", steps=_steps(3)))
    live.end_turn()
    live.render()
    return live


def test_a_plan_recorded_again_as_it_was_is_not_a_plan_change() -> None:
    live = _one_item()
    live.start_turn("user", "again")
    plan = live.append(r.WorkPlan(work_item_id="W1", steps=_steps(3)))
    delta = _delta(live.end_turn())
    # The header read "plan changed" above a line saying the plan was recorded as it was.
    assert delta.reason == "turn_completed"
    assert delta.lines == (
        f"re-recorded as they were, only their refs changed: the plan [ledger:{plan.seq}]",
    )
    assert verify_derivations(live.records).ok


def test_a_plan_that_changed_is_still_a_plan_change() -> None:
    live = _one_item()
    live.start_turn("user", "progress")
    live.append(r.WorkPlan(work_item_id="W1", steps=_steps(3, done=frozenset({0}))))
    delta = _delta(live.end_turn())
    assert delta.reason == "plan_changed"
    assert delta.lines == ("plan step s0: pending → done",)


def test_a_first_plan_with_no_steps_is_a_plan_change_not_a_repeat() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.WorkItem(id="W1", objective="Build", state="active"))
    live.end_turn()
    live.render()
    live.start_turn("user", "plan")
    plan = live.append(r.WorkPlan(work_item_id="W1", steps=()))
    delta = _delta(live.end_turn())
    # It read "re-recorded as they were, only their refs changed: the plan": there was none.
    assert delta.reason == "plan_changed"
    assert delta.lines == (f"plan recorded with no steps [ledger:{plan.seq}]",)


def _prompt_delta(live: LiveLedger) -> str:
    prompt = build_context(live.state, Budget(context_window=50_000), RenderConfig(), agent_id="a")
    (text,) = (s.text for s in prompt.sections if s.name == "pending_delta")
    return text


def test_a_merged_delta_over_a_switch_that_came_back_says_so_under_a_true_reason() -> None:
    live = _one_item()
    live.start_turn("timer")
    live.append(r.WorkItem(id="W2", objective="Hotfix", state="active"))
    live.end_turn()  # not rendered: the next delta merges into this one
    live.start_turn("timer")
    live.append(r.WorkItemState(id="W2", state="done"))
    delta = _delta(live.end_turn())
    # It read "(revision 1 → 3, active work changed)" over "- changed: active_work_item_id,
    # objective, work_item_seqs": none of them differs from what the model last read.
    assert delta.reason == "turn_completed"
    assert delta.lines == ("active work: W1 again (W2 was active since revision 1; W2 is now done)",)
    live.start_turn("user", "next")
    assert "changed:" not in _prompt_delta(live)
    live.end_turn()
    assert verify_derivations(live.records).ok


def test_a_wait_opened_after_the_prompt_and_resolved_at_the_wake_is_told() -> None:
    live = _one_item()
    live.start_turn("user", "ask for review")
    live.render()
    live.append(r.WaitingIntent(id="review", waiting_on="operator review"))
    live.end_turn("waiting")  # its delta (+waiting on review) is never shown: no prompt follows
    live.start_turn("channel")
    resolved = live.append(r.WaitingResolved(id="review", resolution="timed_out"))
    (pre,) = live.before_prompt()
    assert isinstance(pre.body, r.WorkingMemoryDelta)
    # The wake's first prompt said "- changed: waiting_on": not which wait, nor how it ended.
    assert pre.body.reason == "wake_resumed"
    assert pre.body.lines == ("-waiting on review (opened since revision 1, timed out)",)
    assert "- -waiting on review (opened since revision 1, timed out)" in _prompt_delta(live)
    assert resolved.seq < pre.seq
    live.render()
    live.end_turn()
    assert verify_derivations(live.records).ok


def test_a_follow_up_opened_and_done_between_two_prompts_is_told() -> None:
    live = _one_item()
    live.start_turn("timer")
    live.append(r.FollowUp(id="F1", text="tell ops"))
    live.end_turn()
    live.start_turn("timer")
    live.append(r.FollowUp(id="F1", text="tell ops", status="done"))
    live.append(r.Decision(id="D1", text="ship friday", work_item_id="W1"))
    delta = _delta(live.end_turn())
    # F1 left no line: the model never read it open, nor that it was done.
    assert delta.lines == ("+decision D1: ship friday", "-follow-up F1 (opened since revision 1, done)")


def test_a_wait_that_ended_says_how_it_ended() -> None:
    live = _one_item()
    live.start_turn("user", "ask")
    live.append(r.WaitingIntent(id="q1", waiting_on="the DBA's answer"))
    live.append(r.WaitingIntent(id="q2", waiting_on="the security sign-off"))
    live.end_turn("waiting")
    live.render()
    live.start_turn("timer")
    live.append(r.WaitingResolved(id="q1", resolution="timed_out"))
    live.append(r.WaitingResolved(id="q2", resolution="arrived", detail="approved in the channel"))
    live.render()
    # Both read "-waiting on q1", "-waiting on q2": the sign-off that arrived and the answer
    # that never came were told alike.
    assert live.state.memory.latest_delta is not None
    assert live.state.memory.latest_delta.lines == (
        "-waiting on q2 (arrived: approved in the channel)",
        "-waiting on q1 (timed out)",
    )
    live.end_turn()
    assert verify_derivations(live.records).ok


def test_a_follow_up_that_ended_says_whether_it_was_done_or_dropped() -> None:
    live = _one_item()
    live.start_turn("user", "note")
    live.append(r.FollowUp(id="F1", text="tell ops"))
    live.append(r.FollowUp(id="F2", text="rotate the key"))
    live.end_turn()
    live.render()
    live.start_turn("user", "tidy")
    live.append(r.FollowUp(id="F1", text="tell ops", status="done"))
    live.append(r.FollowUp(id="F2", text="rotate the key", status="dropped"))
    # "-follow-up F2" read as handled: it was dropped, not done.
    assert _delta(live.end_turn()).lines == ("-follow-up F2 (dropped)", "-follow-up F1 (done)")


def test_a_decision_revised_reads_revised_not_added() -> None:
    live = _one_item()
    live.start_turn("user", "decide")
    live.append(r.Decision(id="D1", text="copy with dump and restore", work_item_id="W1"))
    live.end_turn()
    live.render()
    live.start_turn("user", "measure")
    live.append(r.Decision(id="D1", text="copy with logical replication", work_item_id="W1"))
    live.append(r.Decision(id="D2", text="pin the driver", work_item_id="W1"))
    # D1 read "+decision D1: copy with logical replication", as a decision added beside the
    # one the model was shown, which it supersedes.
    assert _delta(live.end_turn()).lines == (
        "+decision D2: pin the driver",
        "decision D1 revised: copy with logical replication",
    )


def test_a_wait_redeclared_with_another_text_reads_revised() -> None:
    live = _one_item()
    live.start_turn("user", "ask")
    live.append(r.WaitingIntent(id="q1", waiting_on="the DBA's answer"))
    live.end_turn("waiting")
    live.render()
    live.start_turn("user", "narrow it")
    live.append(r.WaitingIntent(id="q1", waiting_on="the DBA's answer on slot sizing"))
    assert _delta(live.end_turn()).lines == ("waiting on q1 revised: the DBA's answer on slot sizing",)


def test_a_merged_delta_whose_every_change_came_back_says_so_not_the_field_names() -> None:
    live = _one_item()
    live.start_turn("timer")
    live.append(r.WorkItem(id="W2", objective="Later", state="queued"))
    live.append(r.Decision(id="D5", text="use the replica", work_item_id="W1"))
    live.end_turn()  # not rendered: the next delta merges into this one
    live.start_turn("timer")
    live.append(r.Decision(id="D5", text="use the replica", work_item_id="W2"))
    delta = _delta(live.end_turn())
    # The prompt said "- changed: decisions": the model never read D5, and W1's decisions are
    # what they were.
    assert delta.lines == ("no change since revision 1: what changed in between changed back",)
    assert delta.reason == "turn_completed"


# --------------------------------------------------------------------------- an item switch, plan windows
# Deltas say what changed, not the whole new state: an item switch restated the new item's
# every rule, plan step, file and decision as "+" lines (which working memory right above
# shows in full) and buried the switch; a plan step the window of shown steps slid onto
# read as "+plan step", as if new; two plans sharing step ids read as one edited.


def _delta_lines(records: tuple[r.Record, ...]) -> tuple[str, ...]:
    (delta,) = (rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta))
    return delta.lines


def _item_steps(n: int, item: str, *, done: frozenset[int] = frozenset()) -> tuple[r.PlanStep, ...]:
    return tuple(
        r.PlanStep(id=f"s{i}", text=f"step {i} of {item}", status="done" if i in done else "pending")
        for i in range(n)
    )


def _two_items() -> LiveLedger:
    """W1 active (3 rules, 4 steps, a decision), then a switch to W2 (15 rules, 30 steps)."""
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.WorkItem(id="W1", objective="Build", state="active", scope_constraints=("a", "b", "c")))
    live.append(r.WorkPlan(work_item_id="W1", steps=_item_steps(4, "W1")))
    live.append(r.Decision(id="D1", text="w1 decision", work_item_id="W1"))
    live.end_turn()
    live.render()
    return live


def _switch_to_w2(live: LiveLedger, *, render: bool = True) -> tuple[str, ...]:
    live.start_turn("user", "switch")
    live.append(r.WorkItemState(id="W1", state="queued"))
    rules = tuple(f"w2 rule {i}" for i in range(15))
    live.append(r.WorkItem(id="W2", objective="Second", state="active", scope_constraints=rules))
    live.append(r.WorkPlan(work_item_id="W2", steps=_item_steps(30, "W2")))
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
    live.append(r.WorkPlan(work_item_id="W2", steps=_item_steps(30, "W2", done=frozenset({0}))))
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
    steps = [s for s in _item_steps(30, "W2", done=frozenset({27})) if s.id != "s28"]
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
    steps = list(_item_steps(4, "W1"))
    steps[1] = r.PlanStep(id="s1", text="reproduce on staging", status="done")
    live.append(r.WorkPlan(work_item_id="W1", steps=tuple(steps)))
    # Was "plan step s1: pending → done" alone: the new wording was not told.
    assert _delta_lines(live.end_turn()) == ("plan step s1: pending → done, reworded: reproduce on staging",)


def test_two_items_whose_plans_share_step_ids_do_not_read_as_one_plan_edited() -> None:
    live = _two_items()
    live.start_turn("user", "switch")
    live.append(r.WorkItemState(id="W1", state="abandoned"))
    live.append(r.WorkItem(id="W3", objective="Third", state="active"))
    live.append(r.WorkPlan(work_item_id="W3", steps=_item_steps(2, "W3", done=frozenset({0}))))
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
    plan = live.append(r.WorkPlan(work_item_id="W1", steps=_item_steps(4, "W1")))
    item = live.append(
        r.WorkItem(id="W1", objective="Build", state="active", scope_constraints=("a", "b", "c"))
    )
    # Only the refs working memory cites moved. The delta had no line, and the prompt said
    # "changed: work_item_seqs, plan_seq".
    assert _delta_lines(live.end_turn()) == (
        "re-recorded as they were, only their refs changed: "
        f"W1 [ledger:{item.seq}], the plan [ledger:{plan.seq}]",
    )


# --------------------------------------------------------------------------- caps over a long run
# Caps that hid entries without a word, deltas that read a capped-out decision as withdrawn
# or an entry coming into view as new, and an item switch whose one-line-per-rule removals
# crowded out the delta's later lines.


def _decide(live: LiveLedger, ids: range, item: str | None = "W1") -> None:
    for i in ids:
        live.append(r.Decision(id=f"D{i}", text=f"decision {i}", work_item_id=item))


def _started() -> LiveLedger:
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.WorkItem(id="W1", objective="Build the exporter", state="active"))
    _decide(live, range(1, 9))  # exactly the cap: nothing pushed out yet
    live.end_turn()
    live.render()
    return live


def test_a_decision_the_cap_pushes_out_still_holds_and_working_memory_counts_it() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 11))
    lines = _delta_lines(live.end_turn())
    # D1 and D2 were not withdrawn: newer decisions pushed them out of the newest eight.
    assert "decision D1: still holds, not shown (over the cap)" in lines
    assert "decision D2: still holds, not shown (over the cap)" in lines
    assert not any(line.startswith("-decision") for line in lines)
    snapshot = live.state.memory.snapshot
    assert snapshot.decisions_omitted == 2
    assert "(+2 older decisions not shown)" in snapshot_lines(snapshot)


def test_a_decision_redeclared_elsewhere_reads_withdrawn_and_says_where() -> None:
    live = _started()
    live.start_turn("user", "reorganise")
    live.append(r.WorkItem(id="W2", objective="Second", state="queued"))
    live.append(r.WorkItem(id="W9", objective="Old", state="done"))
    live.append(r.Decision(id="D3", text="decision 3", work_item_id="W2"))
    live.append(r.Decision(id="D4", text="decision 4", work_item_id="W9"))
    _decide(live, range(9, 13))  # two refill the bucket, two push out D1 and D2
    lines = _delta_lines(live.end_turn())
    assert "-decision D3 (moved to W2)" in lines
    assert "-decision D4 (moved to W9, which is not open)" in lines
    assert "decision D1: still holds, not shown (over the cap)" in lines
    assert "decision D2: still holds, not shown (over the cap)" in lines
    assert live.state.memory.snapshot.decisions_omitted == 2


def test_an_entry_coming_into_view_is_not_reported_as_new() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    for i in range(10):
        live.append(r.FollowUp(id=f"F{i}", text=f"follow {i}", status="open"))
    live.end_turn()
    live.render()
    assert live.state.memory.snapshot.follow_ups_omitted == 2
    live.start_turn("user", "close one")
    live.append(r.FollowUp(id="F9", text="follow 9", status="done"))
    lines = _delta_lines(live.end_turn())
    # F1 was open all along, over the cap: "+follow-up F1" read as a new follow-up.
    assert lines == ("follow-up F1 (was over the cap, now shown): follow 1", "-follow-up F9 (done)")


def test_closing_an_entry_over_the_cap_is_a_change_working_memory_states() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    for i in range(8):
        live.append(r.WaitingIntent(id=f"w{i}", waiting_on=f"thing {i}"))
    live.end_turn("waiting")
    live.render()
    live.start_turn("user", "one arrived")
    live.append(r.WaitingResolved(id="w0", resolution="arrived"))  # over the cap of 6
    lines = _delta_lines(live.end_turn())
    assert lines == ("older open waits not shown: 2 → 1",)


def test_the_prompt_names_every_count_a_cap_leaves_out() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 10))
    for i in range(10):
        live.append(r.FollowUp(id=f"F{i}", text=f"follow {i}", status="open", work_item_id="W1"))
    for i in range(7):
        live.append(r.WaitingIntent(id=f"w{i}", waiting_on=f"thing {i}", work_item_id="W1"))
    live.end_turn()
    live.start_turn("user", "next")
    prompt = build_context(live.state, Budget(context_window=50_000), RenderConfig(), agent_id="a")
    (memory,) = (s.text for s in prompt.sections if s.name == "working_memory")
    cap = "(over the working-memory cap)"
    assert f"(+1 older decision not shown {cap}: in force unless revised since)" in memory
    assert f"(+2 older open follow-ups not shown {cap})" in memory
    assert f"(+1 older open wait not shown {cap})" in memory


def test_an_item_switch_sums_up_the_previous_item_and_keeps_what_ended() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    rules = tuple(f"rule {i}" for i in range(14))
    live.append(r.WorkItem(id="W1", objective="Build", state="active", scope_constraints=rules))
    steps = tuple(r.PlanStep(id=f"s{i}", text="x") for i in range(5))
    live.append(r.WorkPlan(work_item_id="W1", steps=steps))
    _decide(live, range(1, 4))
    live.append(r.WaitingIntent(id="ci", waiting_on="the CI run"))
    live.end_turn("waiting")
    live.render()
    live.start_turn("user", "switch")
    live.append(r.WaitingResolved(id="ci", resolution="arrived"))
    live.append(r.WorkItemState(id="W1", state="queued"))
    live.append(r.WorkItem(id="W2", objective="Second", state="active"))
    lines = _delta_lines(live.end_turn())
    # W1's rules were not dropped, nor its decisions withdrawn: they are W1's. One line
    # for them all left room for the wait that ended (it was cut off by "(+N more changes)").
    # One line, not one per list; W2's objective is in working memory.
    assert lines == (
        "active work: W1 → W2 (W1 is now queued)",
        "W1's 14 scope constraints, 5 plan steps, 3 decisions not shown (W1 is not the active item)",
        "-waiting on ci (arrived)",
    )


def test_the_counts_survive_a_checkpoint_and_a_piecewise_fold() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 12))
    _decide(live, range(20, 30), item=None)
    live.end_turn()
    whole = fold(live.records)
    assert whole.runtime.decisions_over_cap == {"W1": 3}
    assert whole.runtime.unscoped_decisions_over_cap == 2
    half = len(live.records) // 2
    assert fold(live.records[half:], fold(live.records[:half])) == whole
    data = encode_checkpoint(whole, head_hash="00" * 32)
    restored = restore_checkpoint(data, hash_at=lambda seq: "00" * 32, config=DEFAULT_CONFIG)
    assert restored == whole
    # 3 pushed out of W1's bucket, 2 of the unscoped one, 8 kept but over the cap.
    assert derive_snapshot(whole.runtime).decisions_omitted == 13


def test_an_item_finishing_drops_its_count_with_its_bucket() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 11))
    live.append(r.WorkItemState(id="W1", state="done"))
    live.end_turn()
    assert live.state.runtime.decisions_over_cap == {}
