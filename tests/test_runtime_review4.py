"""The Turn convenience methods refuse ids the fold could not place.

`turn.activate("W2")` for an undeclared item used to append a state change the fold
carried (``state.carried``, shown in no prompt): a daemon's typo silently lost the
model's active work. The named methods now refuse such a call with a UsageError that
names the id, what is known instead and what to do, before anything is appended;
`turn.record(body)` stays the permissive raw path.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.runtime import _probe_turn
from holon import records as r
from holon.errors import UsageError
from holon.runtime import Agent
from tests.runtime_support import Tick


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="rv4", clock=Tick())


def _refused(agent: Agent, call: Callable[[], object], *fragments: str) -> str:
    """Assert ``call`` raises a UsageError holding every fragment and records nothing."""
    seq, carried = agent.seq, agent.state.carried_count
    with pytest.raises(UsageError) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert "nothing was recorded" in message
    assert agent.seq == seq
    assert agent.state.carried_count == carried
    return message


# --------------------------------------------------------------------------- work item states


def test_activating_an_undeclared_work_item_is_refused_and_the_active_work_stays(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release 2.4.1", state="active")
        turn.add_work_item("W3", "triage", state="queued")
        _refused(
            agent,
            lambda: turn.activate("W2"),
            "turn.activate('W2')",
            f"in turn {turn.index}",
            "no work item 'W2'",
            "open work items: 'W1', 'W3'",
            "turn.add_work_item('W2', objective, state='active')",
            "turn.record(holon.records.WorkItemState(id='W2', state='active'))",
        )
        assert agent.state.active_work_item_id == "W1"


def test_finishing_or_moving_an_unknown_work_item_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release", state="active")
        _refused(agent, lambda: turn.finish_work("w1"), "turn.finish_work('w1')", "state='done'", "'W1'")
        _refused(
            agent,
            lambda: turn.set_work_state("W9", "abandoned", reason="dropped"),
            "turn.set_work_state('W9')",
            "state='abandoned'",
        )
        assert agent.state.active_work_item_id == "W1"


def test_a_work_item_declared_earlier_in_the_same_turn_is_accepted(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release")
        turn.activate("W1")
        turn.record_plan([r.PlanStep(id="s1", text="build")], work_item_id="W1")
        turn.record_decision("D1", "ship from main", work_item_id="W1")
        state = agent.state
        assert state.active_work_item_id == "W1"
        plan = state.plan_of("W1")
        assert plan is not None and [s.id for s in plan.steps] == ["s1"]
        assert [d.id for d in state.decisions["W1"]] == ["D1"]
        assert state.carried_count == 0


def test_a_recently_finished_work_item_can_be_reopened_or_finished_again(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            turn.add_work_item("W1", "release", state="active")
            turn.finish_work("W1", reason="published")
            turn.finish_work("W1", reason="published, and announced")  # done again: the new reason
            done = agent.state.find_work_item("W1")
            assert done is not None and done.state == "done"
            assert done.state_reason == "published, and announced"
        with agent.turn(input="the release broke, reopen it") as turn:
            turn.activate("W1", reason="regression")  # reopens a finished item
        state = agent.state
        assert state.active_work_item_id == "W1"
        assert [e.id for e in state.finished_work] == []
        assert state.carried_count == 0


def test_a_work_item_finished_too_long_ago_is_refused_until_declared_again(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        window = agent.config.projection.finished_window
        for i in range(window + 1):
            turn.add_work_item(f"W{i}", f"item {i}", state="active")
            turn.finish_work(f"W{i}")
        assert agent.state.find_work_item("W0") is None
        _refused(
            agent,
            lambda: turn.activate("W0"),
            "no work item 'W0' is open or recently finished",
            f"recently finished: 'W{window}', 'W{window - 1}'",
            "and ",
            "more",
        )
        turn.add_work_item("W0", "item 0, again", state="queued")
        turn.activate("W0")
        assert agent.state.active_work_item_id == "W0"


def test_a_long_list_of_open_items_is_cut_to_a_few(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        for i in range(8):
            turn.add_work_item(f"W{i}", f"item {i}")
        message = _refused(agent, lambda: turn.activate("X"), "'W0', 'W1', 'W2', 'W3', 'W4' and 3 more")
        assert "'W5'" not in message


def test_checks_come_after_the_turn_check(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            pass
        seq = agent.seq
        for late in (
            lambda: turn.activate("W9"),
            lambda: turn.resolve_wait("q"),
            lambda: turn.task_result("t", status="ok", summary="s"),
            lambda: turn.follow_up("f", "x", status="done"),
            lambda: turn.record_plan([r.PlanStep(id="s", text="t")], work_item_id="W9"),
            lambda: turn.record_decision("d", "t", work_item_id="W9"),
        ):
            with pytest.raises(UsageError, match="has ended"):
                late()
        assert agent.seq == seq


# --------------------------------------------------------------------------- plans and decisions


def test_a_plan_or_decision_for_an_undeclared_work_item_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release", state="active")
        _refused(
            agent,
            lambda: turn.record_plan([r.PlanStep(id="s1", text="build")], work_item_id="W2"),
            "turn.record_plan(work_item_id='W2')",
            "no open or recently finished work item is 'W2'",
            "open work items: 'W1'",
            "turn.add_work_item('W2', objective)",
            "turn.record(holon.records.WorkPlan(...))",
        )
        _refused(
            agent,
            lambda: turn.record_decision("D1", "ship", work_item_id="W2"),
            "turn.record_decision(work_item_id='W2')",
            "turn.record(holon.records.Decision(...))",
        )
        assert "W2" not in agent.state.plans
        assert "W2" not in agent.state.decisions


def test_a_plan_or_decision_for_a_finished_work_item_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.add_work_item("W1", "release", state="active")
        done_seq = turn.finish_work("W1")
        for call in (
            lambda: turn.record_plan([r.PlanStep(id="s1", text="x")], work_item_id="W1"),
            lambda: turn.record_decision("D1", "x", work_item_id="W1"),
        ):
            _refused(agent, call, f"work item 'W1' is done (since seq {done_seq})", "turn.activate('W1')")
        # The default target (no active item now) is still the unscoped plan.
        turn.record_plan([r.PlanStep(id="s1", text="x")])
        assert agent.state.unscoped_plan is not None


# --------------------------------------------------------------------------- waits


def test_resolving_a_wait_that_is_not_open_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.wait_for("qa-2.4.1", "QA sign-off")
        _refused(
            agent,
            lambda: turn.resolve_wait("qa"),
            "turn.resolve_wait('qa')",
            "no wait 'qa' is open",
            "open waits: 'qa-2.4.1'",
            "turn.wait_for('qa', waiting_on)",
            "turn.record(holon.records.WaitingResolved(id='qa', ...))",
        )
        assert "qa-2.4.1" in agent.state.waits


def test_resolving_a_wait_twice_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="go") as turn:
            turn.wait_for("qa", "QA sign-off")
        with agent.turn(input="signed off") as turn:
            seq = turn.resolve_wait("qa")  # opened in an earlier turn: accepted
            _refused(
                agent,
                lambda: turn.resolve_wait("qa", resolution="cancelled"),
                f"wait 'qa' was already resolved (arrived) at seq {seq}",
                "open waits: none",
            )


def test_a_wait_opened_earlier_in_the_same_turn_can_be_resolved(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.wait_for("qa", "QA sign-off")
        turn.resolve_wait("qa", resolution="timed_out")
        assert agent.state.waits == {}
        assert agent.state.carried_count == 0


# --------------------------------------------------------------------------- tasks


def test_a_result_for_a_task_never_started_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.start_task("build-1", "build the module")
        _refused(
            agent,
            lambda: turn.task_result("build1", status="ok", summary="built"),
            "turn.task_result('build1')",
            "no task 'build1' was started",
            "running tasks: 'build-1'",
            "turn.start_task('build1', description)",
            "turn.record(holon.records.TaskResult(id='build1', ...))",
        )
        assert "build-1" in agent.state.tasks


def test_a_second_result_for_a_task_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.start_task("t1", "build")
        seq = turn.task_result("t1", status="error", summary="failed")  # same turn: accepted
        _refused(
            agent,
            lambda: turn.task_result("t1", status="ok", summary="passed"),
            f"task 't1' already rejoined (error) at seq {seq}",
            "running tasks: none",
        )
        assert [t.id for t in agent.state.finished_tasks] == ["t1"]


# --------------------------------------------------------------------------- follow-ups


def test_closing_a_follow_up_that_is_not_open_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        turn.follow_up("F1", "tell the release channel")
        _refused(
            agent,
            lambda: turn.follow_up("F2", "tell them", status="done"),
            "turn.follow_up('F2', status='done')",
            "no follow-up 'F2' is open",
            "open follow-ups: 'F1'",
            "turn.follow_up('F2', text)",
            "turn.record(holon.records.FollowUp(id='F2', ..., status='done'))",
        )
        seq = turn.follow_up("F1", "told them", status="done")
        _refused(
            agent,
            lambda: turn.follow_up("F1", "told them", status="dropped"),
            f"follow-up 'F1' was already closed (done) at seq {seq}",
        )
        turn.follow_up("F1", "tell them again")  # declaring reopens it
        assert list(agent.state.follow_ups) == ["F1"]


# --------------------------------------------------------------------------- the raw path


def test_turn_record_still_records_what_the_fold_carries(tmp_path: Path) -> None:
    # Importers and replays record other tools' histories as they are: the raw path
    # stays permissive, and the fold keeps what it cannot place in state.carried.
    with _agent(tmp_path / "l") as agent, agent.turn(input="go") as turn:
        seq = agent.seq
        turn.record(r.WorkItemState(id="W2", state="active"))
        turn.record(r.WaitingResolved(id="qa", resolution="arrived"))
        turn.record(r.TaskResult(id="t0", status="ok", summary="imported"))
        assert agent.seq == seq + 3
        assert agent.state.carried_count == 2
        assert [t.id for t in agent.state.finished_tasks] == ["t0"]


# --------------------------------------------------------------------------- callers


def test_the_runtime_benchmark_probe_declares_its_work_item_on_any_ledger(tmp_path: Path) -> None:
    # benchmarks/runtime.py's cold-open probes start at i = 10**6 on a ledger that never
    # declared PROBE: their record_plan(work_item_id="PROBE") recorded a plan no prompt
    # showed (and is refused now). The probe declares the item on its first turn.
    with _agent(tmp_path / "l") as agent:
        for i in range(10**6, 10**6 + 3):  # 10**6 + 2 records the plan
            _probe_turn(agent, i)
        state = agent.state
        assert state.active_work_item_id == "PROBE"
        assert state.plan_of("PROBE") is not None
        assert state.carried_count == 0
