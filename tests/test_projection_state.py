"""RuntimeState: every record kind lands where it should; windows stay bounded; nothing is dropped."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.errors import UsageError
from holon.projections import (
    ProjectionConfig,
    ProjectionState,
    RuntimeState,
    apply_runtime,
    encode_checkpoint,
    fold,
    queued_work,
    restore_checkpoint,
    verify_derivations,
    waiting_work,
)
from holon.replay import ledger_stats, replay_turns, state_after
from tests.live import LiveLedger
from tests.strategies import AgentRun, agent_runs


def _fold(*bodies: r.Body, config: ProjectionConfig | None = None) -> RuntimeState:
    state = RuntimeState()
    cfg = config if config is not None else ProjectionConfig()
    for seq, body in enumerate(bodies):
        state = apply_runtime(state, r.Record(body=body, ts=1000 + seq, turn=1, seq=seq), cfg)
    return state


def test_activation_stack_picks_most_recently_activated() -> None:
    state = _fold(
        r.WorkItem(id="A", objective="a", state="active"),
        r.WorkItem(id="B", objective="b", state="active"),
    )
    assert state.active_work_item_id == "B"
    state = apply_runtime(state, r.Record(body=r.WorkItemState(id="B", state="done"), ts=9, seq=2))
    assert state.active_work_item_id == "A"
    assert "B" not in state.work_items
    assert [e.id for e in state.finished_work] == ["B"]
    assert state.find_work_item("B") is not None


def test_redeclaring_an_active_item_keeps_its_place() -> None:
    state = _fold(
        r.WorkItem(id="A", objective="a", state="active"),
        r.WorkItem(id="B", objective="b", state="active"),
        r.WorkItem(id="A", objective="a, refined", state="active"),
    )
    assert state.active_work_item_id == "B"
    assert state.work_items["A"].objective == "a, refined"
    # Redeclared without a state change: the state still dates from the first declaration.
    assert state.work_items["A"].seqs == (0, 2)


def test_work_item_provenance_keeps_declaration_and_state_change() -> None:
    state = _fold(r.WorkItem(id="A", objective="a"), r.WorkItemState(id="A", state="active", reason="go"))
    entry = state.work_items["A"]
    assert entry.seqs == (0, 1)
    assert entry.state_reason == "go"


def test_queued_and_waiting_work_are_ordered_by_state_change_then_id() -> None:
    state = _fold(
        r.WorkItem(id="C", objective="c"),
        r.WorkItem(id="B", objective="b"),
        r.WorkItem(id="A", objective="a", state="waiting"),
        r.WorkItemState(id="C", state="waiting"),
    )
    assert [e.id for e in queued_work(state)] == ["B"]
    assert [e.id for e in waiting_work(state)] == ["A", "C"]


def test_tool_intent_joins_result_by_call_id_and_keeps_both_seqs() -> None:
    state = _fold(
        r.ToolIntent(call_id="c1", tool="bash", args={"command": "ls"}),
        r.ToolIntent(call_id="c2", tool="edit", args={"path": "a.py"}),
        r.ToolResult(call_id="c1", tool="bash", status="ok"),
    )
    first, second = state.tools
    assert (first.call_id, first.intent_seq, first.result_seq, first.outcome) == ("c1", 0, 2, "ok")
    assert first.seqs == (0, 2)
    assert (second.outcome, second.result) == ("in_flight", None)


def test_result_without_intent_is_kept_as_an_orphan_execution() -> None:
    state = _fold(r.ToolResult(call_id="zz", tool="bash", status="error"))
    (execution,) = state.tools
    assert execution.intent is None and execution.result_seq == 0 and execution.outcome == "error"


def test_windows_are_bounded_and_keep_the_newest() -> None:
    config = ProjectionConfig(messages_window=3, tools_window=2, briefs_window=2)
    bodies: list[r.Body] = [r.Message(role="user", text=str(i)) for i in range(10)]
    bodies += [r.ToolIntent(call_id=f"c{i}", tool="t") for i in range(5)]
    bodies += [r.Brief(status="ack", text=str(i)) for i in range(4)]
    state = _fold(*bodies, config=config)
    assert [m.message.text for m in state.messages] == ["7", "8", "9"]
    assert [t.call_id for t in state.tools] == ["c3", "c4"]
    assert [b.brief.text for b in state.briefs] == ["2", "3"]
    assert state.applied == len(bodies)


def test_files_come_from_touched_files_and_file_arguments() -> None:
    state = _fold(
        r.WorkItem(id="A", objective="a", state="active"),
        r.ToolIntent(call_id="c1", tool="read", args={"path": "./src/a.py", "paths": ["x.py", 3]}),
        r.ToolResult(call_id="c1", tool="read", status="ok", touched_files=("src/b.py", "src/a.py")),
    )
    assert list(state.files) == ["x.py", "src/b.py", "src/a.py"]
    a = state.files["src/a.py"]
    assert (a.first_seq, a.last_seq, a.via, a.work_item_id) == (1, 2, "touched", "A")


def test_files_window_evicts_least_recently_touched() -> None:
    config = ProjectionConfig(files_window=2)
    state = _fold(
        r.ToolResult(call_id="1", tool="t", status="ok", touched_files=("a",)),
        r.ToolResult(call_id="2", tool="t", status="ok", touched_files=("b",)),
        r.ToolResult(call_id="3", tool="t", status="ok", touched_files=("a",)),
        r.ToolResult(call_id="4", tool="t", status="ok", touched_files=("c",)),
        config=config,
    )
    assert list(state.files) == ["a", "c"]


def test_waits_tasks_and_follow_ups_move_from_open_to_finished() -> None:
    state = _fold(
        r.WaitingIntent(id="w1", waiting_on="operator"),
        r.TaskStarted(id="t1", description="build"),
        r.FollowUp(id="f1", text="later"),
        r.WaitingResolved(id="w1", resolution="timed_out"),
        r.TaskResult(id="t1", status="ok", summary="built"),
        r.FollowUp(id="f1", text="later", status="done"),
    )
    assert not state.waits and not state.tasks and not state.follow_ups
    assert state.resolved_waits[0].resolution == "timed_out" and state.resolved_waits[0].resolved_seq == 3
    assert (state.finished_tasks[0].started_seq, state.finished_tasks[0].result_seq) == (1, 4)
    assert state.closed_follow_ups[0].seqs == (2, 5)
    assert state.latest_result is not None and state.latest_result.source == "task"


def _sub_agent_run() -> tuple[r.Body, ...]:
    """The agent delegates t1 while it works on W1 itself; t1 calls, fails, plans and reports."""
    return (
        r.ExecutionEnvironment(workspace="/repo"),
        r.WorkItem(id="W1", objective="fix the parser", state="active"),
        r.WorkPlan(work_item_id="W1", steps=(r.PlanStep(id="s1", text="delegate the search"),)),
        r.ToolIntent(call_id="c0", tool="Task", args={"prompt": "find the bug"}),
        r.TaskStarted(id="t1", description="find the bug", work_item_id="W1"),
        r.Message(role="user", text="find the bug", task_id="t1"),
        r.ToolIntent(call_id="s1", tool="Read", args={"file_path": "/repo/src/parser.py"}, task_id="t1"),
        r.ToolIntent(call_id="s2", tool="Bash", args={"command": "pytest -q"}, task_id="t1"),
        r.ToolResult(call_id="s1", tool="Read", status="ok", output="...", task_id="t1"),
        r.ToolResult(
            call_id="s2",
            tool="Bash",
            status="error",
            exit_code=1,
            output="collected 3 items\n\nFAILED tests/test_parser.py::test_empty\n",
            task_id="t1",
        ),
        r.WorkPlan(
            work_item_id=None,
            steps=(r.PlanStep(id="1", text="read", status="done"), r.PlanStep(id="2", text="report")),
            task_id="t1",
        ),
        r.ToolIntent(call_id="s3", tool="Edit", args={"file_path": "src/lexer.py"}, task_id="t1"),
        r.ToolIntent(call_id="s4", tool="Read", args={"file_path": "./src/parser.py"}, task_id="t1"),
        r.Message(role="assistant", text="the bug is in the lexer", task_id="t1"),
    )


def test_a_sub_agents_evidence_folds_into_its_task_not_into_the_agents_windows() -> None:
    bodies = _sub_agent_run()
    state = _fold(*bodies)
    # The agent's own: its Task call (in flight), its plan, no file, no sub-agent message.
    assert [t.call_id for t in state.tools] == ["c0"]
    assert state.messages == ()
    assert state.files == {}
    assert state.plans["W1"].steps == bodies[2].steps  # type: ignore[union-attr]
    assert state.unscoped_plan is None
    task = state.tasks["t1"]
    assert (task.tool_calls, task.errors) == (4, 1)
    assert task.commands == (
        "Read /repo/src/parser.py",
        "pytest -q",
        "Edit src/lexer.py",
        "Read ./src/parser.py",
    )
    # Keyed as the working set keys files: the editor's absolute path and `./` are one file.
    assert task.files == ("src/lexer.py", "src/parser.py") and task.files_omitted == 0
    assert task.last_error == "pytest -q: error, exit 1: FAILED tests/test_parser.py::test_empty"
    assert task.last_error_seq == 9
    assert [s.id for s in task.plan] == ["1", "2"] and task.plan_seq == 10
    assert task.last_seq == 13
    # Two calls are still without a result; once the task rejoins, none is.
    assert task.calls == (("s3", "Edit src/lexer.py"), ("s4", "Read ./src/parser.py"))
    done = apply_runtime(
        state, r.Record(body=r.TaskResult(id="t1", status="ok", summary="lexer"), ts=2000, seq=14)
    )
    (finished,) = done.finished_tasks
    assert (finished.tool_calls, finished.errors, finished.calls) == (4, 1, ())


def test_a_tasks_lists_are_capped_and_say_what_they_dropped() -> None:
    calls = [
        r.ToolIntent(call_id=f"s{i}", tool="Read", args={"path": f"f{i}.py"}, task_id="t1") for i in range(5)
    ]
    steps = tuple(
        r.PlanStep(id=str(i), text=f"step {i}", status="done" if i < 2 else "pending") for i in range(5)
    )
    state = _fold(
        r.TaskStarted(id="t1", description="read"),
        *calls,
        r.WorkPlan(work_item_id=None, steps=steps, task_id="t1"),
        config=ProjectionConfig(task_list_cap=3),
    )
    task = state.tasks["t1"]
    assert task.tool_calls == 5
    assert task.files == ("f2.py", "f3.py", "f4.py") and task.files_omitted == 2
    assert len(task.commands) == 3 and len(task.calls) == 3
    # Done steps go first, as working memory caps a plan.
    assert [s.id for s in task.plan] == ["2", "3", "4"] and task.plan_omitted == 2


def test_evidence_of_a_task_that_is_not_running_is_carried() -> None:
    state = _fold(
        r.Message(role="assistant", text="early", task_id="t9"),
        r.TaskStarted(id="t1", description="x"),
        r.TaskResult(id="t1", status="ok", summary="done"),
        r.ToolIntent(call_id="late", tool="Bash", args={"command": "ls"}, task_id="t1"),
    )
    assert state.messages == () and state.tools == ()
    assert [(c.seq, c.note) for c in state.carried] == [
        (0, "evidence of task 't9', which is not running"),
        (3, "evidence of task 't1', which already rejoined"),
    ]


def test_unplaceable_records_are_carried_not_dropped() -> None:
    state = _fold(
        r.WorkItemState(id="ghost", state="active"),
        r.WaitingResolved(id="nobody"),
        config=ProjectionConfig(carried_window=1),
    )
    assert state.carried_count == 2
    (carried,) = state.carried
    assert (carried.seq, carried.kind, carried.body) == (1, "waiting_resolved", {"id": "nobody"})


def test_plans_and_decisions_for_work_that_is_not_open_are_carried() -> None:
    config = ProjectionConfig(finished_window=1)
    state = _fold(
        r.WorkItem(id="A", objective="a", state="done"),
        r.WorkItem(id="B", objective="b", state="done"),  # pushes A out of the finished window
        r.WorkPlan(work_item_id="typo", steps=(r.PlanStep(id="s1", text="x"),)),
        r.Decision(id="d1", text="t", work_item_id="typo"),
        r.Decision(id="d2", text="t", work_item_id="A"),
        r.WorkPlan(work_item_id="B", steps=()),
        config=config,
    )
    # No bucket is opened for an id no open item has: nothing would ever close it.
    assert state.plans == {} and state.decisions == {}
    assert state.carried_count == 4
    assert [c.note for c in state.carried[-4:]] == [
        "plan for unknown work item 'typo'",
        "decision for unknown work item 'typo'",
        "decision for unknown work item 'A'",
        "plan for finished work item 'B'",
    ]


def test_a_decision_moved_to_another_item_leaves_the_first() -> None:
    state = _fold(
        r.WorkItem(id="A", objective="a", state="active"),
        r.WorkItem(id="B", objective="b", state="queued"),
        r.Decision(id="d1", text="use sqlite", work_item_id="A"),
        r.Decision(id="d2", text="pin versions", work_item_id="A"),
        r.Decision(id="d1", text="use postgres", work_item_id="B"),
    )
    assert [d.text for d in state.decisions["A"]] == ["pin versions"]
    assert [d.text for d in state.decisions["B"]] == ["use postgres"]
    # Moved out of any item, too: only the unscoped copy remains.
    state = apply_runtime(state, r.Record(body=r.Decision(id="d2", text="float versions"), ts=9, seq=5))
    assert "A" not in state.decisions
    assert [d.text for d in state.unscoped_decisions] == ["float versions"]
    # Moved to an item that is not open: carried, and no older copy stays behind.
    state = apply_runtime(
        state, r.Record(body=r.Decision(id="d2", text="lock versions", work_item_id="gone"), ts=9, seq=6)
    )
    assert state.unscoped_decisions == () and state.carried[-1].seq == 6


def test_turn_state_tracks_open_and_outcome() -> None:
    state = _fold(r.TurnStarted(trigger="user", input="hi"))
    assert state.turn is not None and state.turn.open
    state = apply_runtime(state, r.Record(body=r.TurnEnded(outcome="waiting"), ts=5, turn=1, seq=1))
    assert state.turn is not None and not state.turn.open and state.turn.outcome == "waiting"
    assert state.turn.started_seq == 0 and state.turn.ended_seq == 1


def test_singletons_keep_the_latest_with_seq() -> None:
    state = _fold(
        r.SystemPolicy(text="p1"),
        r.SystemPolicy(text="p2"),
        r.ExecutionEnvironment(cwd="/x"),
        r.ContextSummary(text="old summary"),
    )
    assert state.policy is not None and (state.policy.seq, state.policy.policy.text) == (1, "p2")
    assert state.environment is not None and state.environment.seq == 2
    assert state.context_summary is not None and state.context_summary.summary.text == "old summary"


def test_apply_does_not_mutate_its_input() -> None:
    before = _fold(r.WorkItem(id="A", objective="a", state="active"), r.FollowUp(id="f", text="x"))
    items, follow_ups = dict(before.work_items), dict(before.follow_ups)
    apply_runtime(before, r.Record(body=r.WorkItemState(id="A", state="done"), ts=1, seq=2))
    apply_runtime(before, r.Record(body=r.FollowUp(id="f", text="x", status="done"), ts=1, seq=2))
    assert before.work_items == items and before.follow_ups == follow_ups


# --------------------------------------------------------------------------- the operator's requests


def _request(text: str, role: str = "user") -> r.Message:
    return r.Message(role=role, text=text)  # type: ignore[arg-type]


def test_the_operators_requests_are_the_session_mandate_first_and_newest_kept() -> None:
    config = ProjectionConfig(requests_window=2, request_chars=10)
    state = _fold(
        _request("port it to rust and keep the Justfile"),
        r.Message(role="assistant", text="on it"),
        r.Message(role="channel", text="Stop hook feedback: uncommitted changes"),
        _request("also add CI", role="operator"),
        _request("no, use GitHub Actions"),
        config=config,
    )
    mandate = state.mandate
    assert mandate is not None
    # The first request stays; the newest two after it are kept; the one between is counted.
    assert [q.seq for q in mandate.requests] == [0, 3, 4]
    assert mandate.count == 3 and mandate.omitted == 0
    first = mandate.first
    assert first.text == "port it to" and first.chars == len("port it to rust and keep the Justfile")
    assert first.clipped
    assert [q.text for q in mandate.recent] == ["also add C", "no, use Gi"]
    # Past the window, the older half goes at once (of a window of two, all but the new one).
    later = apply_runtime(state, r.Record(body=_request("and delete the python"), ts=9, seq=5), config)
    assert later.mandate is not None and [q.seq for q in later.mandate.requests] == [0, 5]
    assert later.mandate.count == 4 and later.mandate.omitted == 2


def test_a_request_sent_again_is_held_once_so_nudges_do_not_push_corrections_out() -> None:
    config = ProjectionConfig(requests_window=2)
    state = _fold(
        _request("port it"),
        _request("keep going"),
        _request("no unsafe code"),
        _request("keep going"),
        _request("keep going"),
        config=config,
    )
    mandate = state.mandate
    assert mandate is not None
    # The correction stays in a window of two: the nudge is held once, at its newest sending.
    assert [(q.seq, q.text, q.asked) for q in mandate.recent] == [
        (2, "no unsafe code", 1),
        (4, "keep going", 3),
    ]
    assert mandate.count == 5 and mandate.omitted == 0
    # Pushed out, a repeated request counts every sending among the omitted.
    pushed = _fold(
        _request("port it"),
        _request("keep going"),
        _request("keep going"),
        _request("a"),
        _request("b"),
        config=config,
    )
    assert pushed.mandate is not None and [q.text for q in pushed.mandate.recent] == ["b"]
    assert pushed.mandate.omitted == 3


def test_work_is_derived_from_the_first_request_where_the_session_declares_none() -> None:
    state = _fold(_request("Port this project to Rust.   Keep the Justfile."), _request("use 2021 edition"))
    work = state.current_work
    assert work is not None and work.id == "request:0" and work.state == "active"
    assert work.objective == "Port this project to Rust. Keep the Justfile."  # on one line
    assert state.active_work_item_id is None  # nothing was declared
    # A session that declares a work item is the agent's to describe: nothing is derived,
    # before, while or after that item is active.
    declared = _fold(
        _request("fix the parser"),
        r.WorkItem(id="w1", objective="fix the parser", state="active"),
        r.WorkItemState(id="w1", state="done"),
        _request("now the lexer"),
    )
    assert declared.current_work is None and declared.mandate is not None
    assert [q.seq for q in declared.mandate.requests] == [0, 3]


def test_a_new_session_starts_new_work_and_naming_the_first_session_does_not() -> None:
    state = _fold(
        _request("downgrade my flights"),
        r.ExecutionEnvironment(extra={"session_id": "run 1"}),  # names the session it is in
        _request("my id is omar_3817"),
        r.ToolIntent(call_id="c1", tool="bash", args={"command": "pytest -q"}),
        r.ToolResult(call_id="c1", tool="bash", status="error", exit_code=1, output="FAILED t::x"),
        r.ExecutionEnvironment(cwd="/w"),  # no session id: the same session
        r.ExecutionEnvironment(extra={"session_id": "run 2"}),
    )
    assert state.session == "run 2"
    assert state.mandate is None and state.current_work is None and not state.failing
    after = apply_runtime(state, r.Record(body=_request("change my return flight"), ts=9, turn=2, seq=7))
    assert after.current_work is not None and after.current_work.id == "request:7"
    assert after.mandate is not None and after.mandate.session == "run 2"
    before = _fold(_request("downgrade my flights"), r.ExecutionEnvironment(extra={"session_id": "run 1"}))
    assert before.mandate is not None and before.mandate.session == "run 1"


def test_a_failing_check_is_kept_until_the_same_command_passes() -> None:
    def run(
        n: int, command: str, status: str, output: str = "", exit_code: int | None = None
    ) -> list[r.Body]:
        return [
            r.ToolIntent(call_id=f"c{n}", tool="bash", args={"command": command}),
            r.ToolResult(call_id=f"c{n}", tool="bash", status=status, output=output, exit_code=exit_code),  # type: ignore[arg-type]
        ]

    summary = "..F.\n\nFAILED tests/test_refunds.py::test_rounding - AssertionError\n1 failed, 3 passed\n"
    state = _fold(
        _request("make the tests pass"),
        *run(1, "pytest -q", "error", summary, 1),
        *run(2, "ls src", "error", "no such file", 2),  # not a check: not tracked
        *run(3, "mypy holon", "ok", "error: bad", 1),  # a non-zero exit fails
    )
    assert [f.command for f in state.failing] == ["pytest -q", "mypy holon"]
    first = state.failing[0]
    assert first.exit_code == 1 and first.tail == (
        "..F. | FAILED tests/test_refunds.py::test_rounding - AssertionError | 1 failed, 3 passed"
    )
    assert first.work_item_id == "request:0"
    # Failing again replaces it (newest last); passing clears it.
    state = _fold(
        _request("make the tests pass"),
        *run(1, "pytest -q", "error", summary, 1),
        *run(2, "mypy holon", "error", "x", 1),
        *run(3, "pytest -q", "error", "FAILED other", 1),
    )
    assert [(f.command, f.seq) for f in state.failing] == [("mypy holon", 4), ("pytest -q", 6)]
    state = apply_runtime(
        apply_runtime(
            state,
            r.Record(
                body=r.ToolIntent(call_id="c9", tool="bash", args={"command": "pytest -q"}),
                ts=9,
                turn=1,
                seq=7,
            ),
        ),
        r.Record(body=r.ToolResult(call_id="c9", tool="bash", status="ok", exit_code=0), ts=9, turn=1, seq=8),
    )
    assert [f.command for f in state.failing] == ["mypy holon"]


def test_failing_checks_are_capped_and_a_blob_output_keeps_its_tail() -> None:
    bodies: list[r.Body] = []
    for n in range(6):
        bodies.append(r.ToolIntent(call_id=f"c{n}", tool="bash", args={"command": f"pytest tests/t{n}.py"}))
        blob = r.BlobRef(hash="0" * 64, size=9000, preview="collected 9 items", tail=f"\n\nFAILED t{n}::x\n")
        bodies.append(r.ToolResult(call_id=f"c{n}", tool="bash", status="error", blob=blob, exit_code=1))
    state = _fold(*bodies, config=ProjectionConfig(failing_cap=3))
    assert [f.tail for f in state.failing] == ["FAILED t3::x", "FAILED t4::x", "FAILED t5::x"]


# --------------------------------------------------------------------------- continuity of folding


CONFIG = ProjectionConfig(turn_cap=1)


def _three_turns() -> list[r.Record]:
    """Three turns, each finalizing an episode: seqs 0-4, 5-9 and 10-14."""
    live = LiveLedger(CONFIG)
    for n in range(3):
        live.start_turn()
        live.append(r.WorkItem(id=f"W{n}", objective="o", state="active"))
        live.end_turn()
    assert [rec.seq for rec in live.records] == list(range(15))
    return live.records


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans().flatmap(lambda open_turn: agent_runs(max_turns=8, open_turn=open_turn)))
def test_folding_in_two_pieces_at_every_split_equals_folding_whole(run: AgentRun) -> None:
    # The earlier property drew one split per run; this one checks every split, inside
    # turns, between a turn_ended and its derived records, and at the end of a ledger
    # cut mid-turn, through a checkpoint round trip too (what Agent.open resumes from).
    whole = fold(run.records, config=run.config)
    encoded = msgspec.msgpack.encode(whole)
    head = fold((), config=run.config)
    for k in range(len(run.records) + 1):
        if k:
            head = fold(run.records[k - 1 : k], head)
        restored = restore_checkpoint(
            encode_checkpoint(head, head_hash="h"), hash_at=lambda seq: "h", config=run.config
        )
        assert isinstance(restored, ProjectionState)
        for start in (head, restored):
            resumed = fold(run.records[k:], start)
            assert resumed == whole, k
            assert msgspec.msgpack.encode(resumed) == encoded, k


def test_fold_refuses_records_that_repeat_what_the_state_holds() -> None:
    # fold(records, state) folded whatever it was given on top of the state: the whole
    # ledger with a checkpoint's state (the easy mistake) was folded twice, giving a
    # state with every revision, episode and window doubled, and no error.
    records = _three_turns()
    head = fold(records[:5], config=CONFIG)
    repeated = (
        r"record seq 0 does not continue the state; expected seq 5; it was already folded "
        r"\(the state is folded to seq 4\): pass the records from seq 5 on"
    )
    with pytest.raises(UsageError, match=repeated):
        fold(records, head)
    assert fold(records[5:], head) == fold(records, config=CONFIG)


def test_fold_refuses_records_after_a_gap() -> None:
    # A gap (records[7:] after a state folded to seq 4) gave a state no ledger ever had:
    # a turn_ended without its turn, derived records confirming nothing they came from.
    records = _three_turns()
    head = fold(records[:5], config=CONFIG)
    with pytest.raises(UsageError, match=r"record seq 7 .* expected seq 5; it skips seqs 5\.\.6"):
        fold(records[7:], head)
    # ... also further into the records, not only at the first one.
    with pytest.raises(UsageError, match=r"record seq 10 .* expected seq 7; it skips seqs 7\.\.9"):
        fold([*records[5:7], *records[10:]], head)
    with pytest.raises(UsageError, match=r"record seq 3 .* expected seq 0"):
        fold(records[3:], config=CONFIG)


def test_fold_refuses_a_record_that_was_never_appended() -> None:
    # A record built in memory has seq -1: folded, the state's seq went back to -1 and the
    # entries it made cited ledger:-1.
    with pytest.raises(UsageError, match=r"record seq -1 .* never appended to a ledger"):
        fold([r.Record(body=r.Message(role="user", text="hi"), ts=1)])


def test_verification_refuses_a_gap_or_a_repeat_after_the_first_record() -> None:
    # verify_derivations checked that the first record continues the state, but not the
    # others: records with a turn left out, or repeated, were reported as a divergence
    # at a seq where the ledger differs from nothing ("body.to_revision: expected 2,
    # found 3" at seq 13 for a ledger with turn 2 left out).
    records = _three_turns()
    with pytest.raises(UsageError, match=r"verify_derivations: record seq 10 .* expected seq 5"):
        verify_derivations([*records[:5], *records[10:]], config=CONFIG)
    with pytest.raises(UsageError, match=r"verify_derivations: record seq 5 .* expected seq 10"):
        verify_derivations([*records[:10], *records[5:]], config=CONFIG)
    assert verify_derivations(records, config=CONFIG).ok


def test_replay_helpers_refuse_records_that_do_not_start_at_seq_0() -> None:
    # state_after / replay_turns / ledger_stats fold from the initial state: given the
    # records from the middle of a ledger (ledger.read(5)), they reported the memory of
    # a ledger that does not exist.
    records = _three_turns()
    with pytest.raises(UsageError, match="expected seq 0"):
        state_after(records[5:], CONFIG)
    with pytest.raises(UsageError, match="expected seq 0"):
        list(replay_turns(records[5:], config=CONFIG))
    with pytest.raises(UsageError, match="expected seq 0"):
        ledger_stats(records[5:], projection=CONFIG)
    with pytest.raises(UsageError, match=r"record seq 6 .* expected seq 5; it skips seq 5:"):
        ledger_stats([*records[:5], *records[6:]], projection=CONFIG)
    assert state_after(records, CONFIG) == fold(records, config=CONFIG)
    assert len(list(replay_turns(records, config=CONFIG))) == 3
