"""Working-memory deltas read the way the model reads them over a long run: the reason in a
delta's header and each of its lines must be true, and a change the model must see must not
pass without a word."""

from __future__ import annotations

from holon import records as r
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

