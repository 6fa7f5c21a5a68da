"""Working-memory deltas read the way the model reads them over a long run: the reason in a
delta's header and each of its lines must be true, and a change the model must see must not
pass without a word."""

from __future__ import annotations

from holon import records as r
from holon.context import Budget, RenderConfig, build_context
from holon.projections import verify_derivations
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
