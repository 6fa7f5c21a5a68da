"""What a newcomer following README.md and docs/daemon-guide.md relies on, and first got wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

import holon
from holon import records as r
from holon.errors import InvalidRecord
from holon.runtime import Agent


def test_a_plan_of_strings_is_refused_with_how_to_write_it(tmp_path: Path) -> None:
    # `turn.record_plan(...)` is how the guide says to keep the plan; a list of step texts
    # is the first thing one tries. It must say what a step is, and record nothing.
    with Agent.open(tmp_path / "a", agent_id="a") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "ship it", state="active")
        before = agent.seq
        with pytest.raises(InvalidRecord, match=r"holon\.PlanStep\(id='s1', text='build'\)") as caught:
            turn.record_plan(["build", "review"])
        assert "body.steps[0]" in str(caught.value)
        with pytest.raises(InvalidRecord, match=r"a plan is a list of steps.*holon\.PlanStep"):
            turn.record_plan("build it")  # type: ignore[arg-type]
        assert agent.seq == before, "nothing is recorded"
        steps = [holon.PlanStep(id="s1", text="build"), holon.PlanStep(id="s2", text="review")]
        seq = turn.record_plan(steps)
        plan = agent.ledger.get(seq).body
        assert isinstance(plan, r.WorkPlan) and [s.text for s in plan.steps] == ["build", "review"]
