"""Continuity over a 500-turn session: planted facts stay in every prompt; an old side topic does not."""

from __future__ import annotations

import pytest

from holon.context import Budget, Prompt
from holon.testing import (
    CONSTRAINT,
    DECISION,
    PLAN_EDIT_TURN,
    PLAN_V2_EXTRA,
    UNRELATED,
    WAIT,
    Session,
    run_session,
)

TURNS = 500


def _check(turn: int, prompt: Prompt, session: Session) -> None:
    text = prompt.text
    runtime = session.live.state.runtime
    assert prompt.total_tokens <= prompt.plan.available
    assert session.live.state.memory.revision >= 0
    if turn >= 2 and not 4 <= turn <= 5:
        # Turns 4-5 work on the side topic; the migration is suspended (shown in the queue).
        assert CONSTRAINT in text, f"turn {turn}: constraint missing"
        active = runtime.active_work_item
        assert active is not None and active.id in text, f"turn {turn}: active work missing"
    if turn >= 3 and not 4 <= turn <= 5:
        plan = runtime.plan_of("w-migrate")
        assert plan is not None
        for step in plan.steps:
            if step.status != "done":
                assert step.text in text, f"turn {turn}: plan step {step.id} missing"
    if turn > PLAN_EDIT_TURN:
        assert PLAN_V2_EXTRA[1] in text, f"turn {turn}: edited plan missing"
    if turn > 300:
        assert WAIT in text, f"turn {turn}: waiting state missing"
    if turn >= 60:
        assert UNRELATED not in text, f"turn {turn}: unrelated earlier topic carried over"


@pytest.mark.slow
@pytest.mark.parametrize("window", [2_000, 4_000, 16_000])
def test_planted_facts_survive_500_turns(window: int) -> None:
    budget = Budget(context_window=window, output_reserve=window // 8)
    session = run_session(TURNS, budget, on_prompt=_check)
    assert len(session.prompts) == TURNS
    last = session.prompts[TURNS]
    if window >= 16_000:
        assert DECISION in last.text
    # History is bounded by the projection windows and the budget, not by the session length.
    assert last.total_tokens <= budget.available
