"""Review regressions for holon.projections (fourth review): each test names the bug it pins down."""

from __future__ import annotations

import pytest

from holon import records as r
from holon.context import Budget, build_context
from holon.errors import HolonError, ProjectionConfigMismatch
from holon.projections import (
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    refresh_before_prompt,
    restore_checkpoint,
    verify_derivations,
)
from tests.live import LiveLedger

# --------------------------------------------------------------------------- scope beyond the cap

_CAP_FULL = tuple(f"rule {i}" for i in range(12))


def _scoped(constraints: tuple[str, ...]) -> r.WorkItem:
    return r.WorkItem(id="W1", objective="ship it", state="active", scope_constraints=constraints)


def _confirmed_item(constraints: tuple[str, ...]) -> LiveLedger:
    """W1 declared with ``constraints`` in turn 1; turn 2 open, its first prompt rendered."""
    live = LiveLedger()
    live.start_turn()
    live.append(_scoped(constraints))
    live.end_turn()
    live.start_turn()
    live.render()
    return live


def _delta_of(records: tuple[r.Record, ...]) -> r.WorkingMemoryDelta:
    deltas = [rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta)]
    assert len(deltas) == 1, records
    return deltas[0]


def test_replacing_a_scope_constraint_beyond_the_cap_is_a_delta_that_says_so() -> None:
    # The 13th constraint is replaced: the snapshot's first 12 and its count of the rest
    # were equal, so the delta named only work_item_seqs, with no line: the model was never
    # told its rules changed.
    live = _confirmed_item((*_CAP_FULL, "never push to main"))
    live.append(_scoped((*_CAP_FULL, "always push to main")))
    delta = _delta_of(live.end_turn())
    assert "scope_constraints" in delta.changed_fields or "scope_rest" in delta.changed_fields
    assert "+scope: always push to main" in delta.lines
    assert "-scope: never push to main" in delta.lines


def test_dropping_a_scope_constraint_beyond_the_cap_is_told_as_a_dropped_rule() -> None:
    live = _confirmed_item((*_CAP_FULL, "never push to main"))
    live.append(_scoped(_CAP_FULL))
    delta = _delta_of(live.end_turn())
    assert "-scope: never push to main" in delta.lines


def test_dropping_a_scope_constraint_beyond_the_cap_mid_turn_supersedes_working_memory() -> None:
    # Working memory names the dropped rule by its declaration's ref ("+1 scope constraints
    # not shown — restore with ref …"), so it still states it: as for a shown constraint,
    # the prompt rendered next must not.
    live = _confirmed_item((*_CAP_FULL, "never push to main"))
    live.append(_scoped(_CAP_FULL))
    delta = _delta_of(refresh_before_prompt(live.state, ts=0))
    assert delta.reason == "superseded"
    assert "-scope: never push to main" in delta.lines


def test_a_constraint_moving_into_view_is_not_reported_as_new() -> None:
    # Dropping a shown constraint brings the 13th into the first 12: the rule set lost one
    # rule and gained none, which is what the lines must say.
    live = _confirmed_item((*_CAP_FULL, "never push to main"))
    live.append(_scoped((*_CAP_FULL[1:], "never push to main")))
    delta = _delta_of(live.end_turn())
    assert [line for line in delta.lines if "scope:" in line] == ["-scope: rule 0"]


# --------------------------------------------------------------------------- another config


def _folded_under_turn_cap_3() -> tuple[ProjectionState, list[r.Record]]:
    live = LiveLedger(ProjectionConfig(turn_cap=3))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.end_turn()
    return live.state, live.records


@pytest.mark.parametrize("call", ["fold", "verify_derivations"])
def test_another_config_than_the_states_is_a_holon_error_naming_the_fields(call: str) -> None:
    # A plain ValueError("config differs") said neither which knob differed nor what to do.
    state, _ = _folded_under_turn_cap_3()
    given = ProjectionConfig(turn_cap=5, files_cap=4)
    with pytest.raises(ProjectionConfigMismatch) as caught:
        if call == "fold":
            fold([], state, config=given)
        else:
            verify_derivations([], state=state, config=given)
    error = caught.value
    assert isinstance(error, HolonError) and isinstance(error, ValueError)
    message = str(error)
    assert message.startswith(f"{call}:"), message
    assert "turn_cap: the state's 3, given 5" in message, message
    assert "files_cap: the state's 16, given 4" in message, message
    assert "plan_cap" not in message, message
    assert "from seq 0" in message, message  # what to do
    assert error.differences == ("turn_cap", "files_cap")


def test_a_checkpoint_of_another_config_names_the_fields_that_differ() -> None:
    state, _ = _folded_under_turn_cap_3()
    data = encode_checkpoint(state, head_hash="h")
    rejected = restore_checkpoint(data, hash_at=lambda seq: "h", config=ProjectionConfig())
    assert isinstance(rejected, CheckpointRejected) and rejected.reason == "config"
    assert "turn_cap: the checkpoint's 3, given 12" in rejected.detail, rejected.detail
    assert "plan_cap" not in rejected.detail, rejected.detail


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


# --------------------------------------------------------------------------- over a list's cap


def _waiting_on(n: int) -> LiveLedger:
    """W1 active and ``n`` open waits q0..q{n-1} from turn 1; turn 2 open and rendered."""
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    for i in range(n):
        live.append(r.WaitingIntent(id=f"q{i}", waiting_on=f"review {i}"))
    live.end_turn()
    live.start_turn()
    live.render()
    return live


def test_a_wait_pushed_out_of_the_list_by_a_newer_one_does_not_supersede_working_memory() -> None:
    # With waiting_cap (6) waits open, a 7th pushed q0 out of the snapshot's list: that was
    # read as "q0 no longer open", a mid-turn refresh (another render, a changed prefix)
    # whose delta said "-waiting on q0" while q0 was still open.
    live = _waiting_on(6)
    live.append(r.WaitingIntent(id="q6", waiting_on="review 6"))
    assert refresh_before_prompt(live.state, ts=0) == ()
    delta = _delta_of(live.end_turn())
    assert "-waiting on q0" not in delta.lines, delta.lines
    assert "waiting on q0: still open, not shown (over the cap)" in delta.lines
    assert "+waiting on q6: review 6" in delta.lines


def test_a_wait_resolved_still_supersedes_working_memory() -> None:
    live = _waiting_on(6)
    live.append(r.WaitingResolved(id="q0", resolution="arrived"))
    delta = _delta_of(refresh_before_prompt(live.state, ts=0))
    assert "-waiting on q0 (arrived)" in delta.lines


def test_a_plan_step_pushed_past_the_plan_cap_is_not_a_withdrawn_step() -> None:
    live = LiveLedger(ProjectionConfig(plan_cap=3))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    steps = tuple(r.PlanStep(id=f"s{i}", text=f"step {i}") for i in range(3))
    live.append(r.WorkPlan(work_item_id="W1", steps=steps))
    live.end_turn()
    live.start_turn()
    live.render()
    live.append(r.WorkPlan(work_item_id="W1", steps=(r.PlanStep(id="s00", text="first"), *steps)))
    # A step added is an addition, not a withdrawal: no mid-turn refresh for it.
    assert refresh_before_prompt(live.state, ts=0) == ()
    delta = _delta_of(live.end_turn())
    assert "-plan step s2" not in delta.lines, delta.lines
    assert "plan step s2: not shown (over the plan cap)" in delta.lines
    assert "+plan step s00 [ ]: first" in delta.lines


def test_an_open_follow_up_pushed_out_of_the_list_is_not_told_as_closed() -> None:
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    for i in range(8):  # follow_ups_cap
        live.append(r.FollowUp(id=f"F{i}", text=f"revisit {i}", status="open"))
    live.end_turn()
    live.start_turn()
    live.render()
    live.append(r.FollowUp(id="F8", text="revisit 8", status="open"))
    live.append(r.FollowUp(id="F9", text="revisit 9", status="open"))
    live.append(r.FollowUp(id="F1", text="revisit 1", status="done"))  # room for one of them
    lines = _delta_of(live.end_turn()).lines
    assert "follow-up F0: still open, not shown (over the cap)" in lines, lines
    assert "-follow-up F1 (done)" in lines, lines
