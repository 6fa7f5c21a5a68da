"""What a newcomer following README.md and docs/daemon-guide.md relies on, and first got wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

import holon
from holon import records as r
from holon.errors import InvalidRecord, InvalidRef, RefNotFound
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


def test_get_bytes_restores_a_cleared_output_whole(tmp_path: Path) -> None:
    # The guide: `agent.get_text(ref)` returns a page, and the whole original bytes are
    # one call away, with no RefSource to build by hand.
    output = "".join(f"row {i}: copied\n" for i in range(2_000))  # over the blob threshold
    with Agent.open(tmp_path / "a", agent_id="a") as agent:
        with agent.turn(input="copy") as turn:
            result = turn.tool("copy", {}).run(lambda: output)
        assert result.blob is not None and result.output == ""
        seq = next(
            rec.seq for rec in agent.ledger.read(0) if isinstance(rec.body, r.ToolResult)
        )
        assert agent.get_bytes(f"ledger:{seq}") == output.encode()
        assert agent.get_bytes(f"blob:{result.blob.hash}") == output.encode()
        assert agent.get_text(f"ledger:{seq}") != output, "get_text pages; get_bytes does not"
        with pytest.raises(RefNotFound):
            agent.get_bytes(f"ledger:{agent.seq + 10}")
        with pytest.raises(InvalidRef):
            agent.get_bytes("nonsense")
