"""WorkingMemorySnapshot: caps, deterministic orders, provenance, and the text rendering."""

from __future__ import annotations

from holon import records as r
from holon.projections import (
    ProjectionConfig,
    RuntimeState,
    WorkingMemorySnapshot,
    apply_runtime,
    derive_snapshot,
    snapshot_lines,
)


def _state(*bodies: r.Body, config: ProjectionConfig | None = None) -> RuntimeState:
    state = RuntimeState()
    cfg = config if config is not None else ProjectionConfig()
    for seq, body in enumerate(bodies):
        state = apply_runtime(state, r.Record(body=body, ts=seq, turn=1, seq=seq), cfg)
    return state


def _steps(*statuses: str) -> tuple[r.PlanStep, ...]:
    return tuple(r.PlanStep(id=f"s{i}", text=f"step {i}", status=s) for i, s in enumerate(statuses))  # type: ignore[arg-type]


def test_empty_state_gives_empty_snapshot_and_no_lines() -> None:
    snapshot = derive_snapshot(RuntimeState())
    assert snapshot == WorkingMemorySnapshot() and snapshot.empty
    assert snapshot_lines(snapshot) == ()


def test_active_work_fields_and_provenance() -> None:
    state = _state(
        r.WorkItem(
            id="W1",
            objective="ship it",
            delivery_target="PR #1",
            scope_constraints=("a", "b", "c"),
            summary="half done",
        ),
        r.WorkItemState(id="W1", state="active"),
    )
    snapshot = derive_snapshot(state, ProjectionConfig(scope_cap=2))
    assert snapshot.active_work_item_id == "W1" and snapshot.work_state == "active"
    assert snapshot.objective == "ship it"
    assert (snapshot.delivery_target, snapshot.work_summary) == ("PR #1", "half done")
    assert snapshot.scope_constraints == ("a", "b")
    assert snapshot.work_item_seqs == (0, 1)


def test_plan_over_cap_drops_done_steps_first_then_the_tail() -> None:
    state = _state(
        r.WorkItem(id="W", objective="o", state="active"),
        r.WorkPlan(
            work_item_id="W", steps=_steps("done", "skipped", "done", "in_progress", "pending", "pending")
        ),
    )
    snapshot = derive_snapshot(state, ProjectionConfig(plan_cap=3))
    assert [s.id for s in snapshot.plan] == ["s3", "s4", "s5"]
    assert snapshot.plan_omitted == 3 and snapshot.plan_seq == 1
    tight = derive_snapshot(state, ProjectionConfig(plan_cap=2))
    assert [s.id for s in tight.plan] == ["s3", "s4"] and tight.plan_omitted == 4


def test_unscoped_plan_is_used_without_an_active_plan() -> None:
    state = _state(r.WorkPlan(work_item_id=None, steps=_steps("pending")))
    assert [s.id for s in derive_snapshot(state).plan] == ["s0"]


def test_files_membership_by_recent_use_order_by_entry_then_path() -> None:
    state = _state(
        r.WorkItem(id="W", objective="o", state="active"),
        r.ToolResult(call_id="1", tool="t", status="ok", touched_files=("b.py", "a.py")),
        r.ToolResult(call_id="2", tool="t", status="ok", touched_files=("c.py",)),
        r.ToolResult(call_id="3", tool="t", status="ok", touched_files=("b.py",)),
    )
    snapshot = derive_snapshot(state, ProjectionConfig(files_cap=2))
    # b.py (used at seq 3) and c.py (seq 2) are the two most recently used; b.py keeps
    # the seq that brought it in (1), so c.py sorts first.
    assert [(f.path, f.seq) for f in snapshot.files] == [("c.py", 2), ("b.py", 1)]
    full = derive_snapshot(state)
    assert [f.path for f in full.files] == ["c.py", "a.py", "b.py"]


def test_files_of_other_work_items_are_not_in_the_working_set() -> None:
    state = _state(
        r.WorkItem(id="A", objective="a", state="active"),
        r.ToolResult(call_id="1", tool="t", status="ok", touched_files=("a.py",)),
        r.WorkItem(id="B", objective="b", state="active"),
        r.ToolResult(call_id="2", tool="t", status="ok", touched_files=("b.py",)),
    )
    assert [f.path for f in derive_snapshot(state).files] == ["b.py"]


def test_decisions_are_relevant_newest_first_and_capped() -> None:
    state = _state(
        r.WorkItem(id="A", objective="a", state="active"),
        r.Decision(id="d1", text="global"),
        r.Decision(id="d2", text="for A", work_item_id="A"),
        r.Decision(id="d3", text="for B", work_item_id="B"),
        r.Decision(id="d4", text="also A", work_item_id="A"),
    )
    assert [d.id for d in derive_snapshot(state).decisions] == ["d4", "d2", "d1"]
    assert [(d.id, d.seq) for d in derive_snapshot(state, ProjectionConfig(decisions_cap=2)).decisions] == [
        ("d4", 4),
        ("d2", 2),
    ]


def test_follow_ups_are_open_ones_newest_first() -> None:
    state = _state(
        r.WorkItem(id="A", objective="a", state="active"),
        r.FollowUp(id="f-other", text="x", work_item_id="B"),
        r.FollowUp(id="f-global", text="y"),
        r.FollowUp(id="f-a", text="z", work_item_id="A"),
        r.FollowUp(id="f-gone", text="w"),
        r.FollowUp(id="f-gone", text="w", status="dropped"),
    )
    snapshot = derive_snapshot(state)
    assert [f.id for f in snapshot.follow_ups] == ["f-a", "f-global", "f-other"]
    assert snapshot.follow_ups[0].seqs == (3,) and snapshot.follow_ups[2].work_item_id == "B"
    assert [f.id for f in derive_snapshot(state, ProjectionConfig(follow_ups_cap=1)).follow_ups] == ["f-a"]


def test_waiting_on_is_open_waits_newest_first_capped() -> None:
    state = _state(
        r.WaitingIntent(id="w1", waiting_on="ci"),
        r.WaitingIntent(id="w2", waiting_on="operator", resume_hint="ping me"),
        r.WaitingIntent(id="w3", waiting_on="timer"),
        r.WaitingResolved(id="w3"),
    )
    assert [w.id for w in derive_snapshot(state).waiting_on] == ["w2", "w1"]
    assert [w.id for w in derive_snapshot(state, ProjectionConfig(waiting_cap=1)).waiting_on] == ["w2"]


def test_snapshot_lines_cite_ledger_seqs() -> None:
    state = _state(
        r.WorkItem(id="W", objective="ship", state="active", delivery_target="PR"),
        r.WorkPlan(work_item_id="W", steps=_steps("done", "in_progress")),
        r.ToolResult(call_id="1", tool="t", status="ok", touched_files=("a.py",)),
        r.Decision(id="d", text="use msgpack", rationale="fast"),
        r.FollowUp(id="f", text="bench it"),
        r.WaitingIntent(id="w", waiting_on="review", resume_hint="merge"),
    )
    assert snapshot_lines(derive_snapshot(state)) == (
        "active work: W (active) — ship [ledger:0]",
        "delivery target: PR",
        "plan: [ledger:1]",
        "  [x] s0: step 0",
        "  [>] s1: step 1",
        "files: a.py [ledger:2]",
        "decision d: use msgpack — because fast [ledger:3]",
        "follow-up f: bench it [ledger:4]",
        "waiting on w: review (resume: merge) [ledger:5]",
    )


def _task(tid: str, work: str | None = None) -> r.TaskStarted:
    return r.TaskStarted(id=tid, description=f"job {tid}", work_item_id=work)


def test_tasks_are_the_active_items_and_unscoped_running_then_newest_results() -> None:
    state = _state(
        r.WorkItem(id="W1", objective="o", state="active"),
        _task("t1", "W1"),
        _task("t2"),
        _task("t3", "W2"),  # another item's: not W1's working memory
        _task("t4", "W1"),
        r.TaskResult(id="t1", status="ok", summary="done 1"),
        r.TaskResult(id="t3", status="ok", summary="done 3"),
        _task("t5", "W1"),
        r.TaskResult(id="t5", status="error", summary="failed 5"),
    )
    snapshot = derive_snapshot(state)
    assert [(t.id, t.status) for t in snapshot.tasks] == [
        ("t2", "running"),
        ("t4", "running"),
        ("t1", "ok"),
        ("t5", "error"),
    ]
    assert snapshot.tasks_omitted == 0
    assert (snapshot.tasks[3].ref_seq, snapshot.tasks[0].ref_seq) == (8, 2)  # the result, else the start
    # Over the cap: the newest started of the running ones, the newest results; the rest counted.
    capped = derive_snapshot(state, ProjectionConfig(tasks_cap=1))
    assert [t.id for t in capped.tasks] == ["t4", "t5"] and capped.tasks_omitted == 1


def test_a_job_run_again_shows_only_its_newest_result() -> None:
    # A sub-agent re-run with the same description (a test job after a fix) would show its
    # old failure beside its new pass, and the old one reads as current. While it runs
    # again, its last result is still the latest known.
    def run(tid: str, status: str) -> tuple[r.TaskStarted, r.TaskResult]:
        return r.TaskStarted(id=tid, description="run tests"), r.TaskResult(
            id=tid, status=status, summary=status
        )

    state = _state(*run("t1", "error"), *run("t2", "ok"), r.TaskStarted(id="t3", description="lint"))
    assert [(t.id, t.status) for t in derive_snapshot(state).tasks] == [("t3", "running"), ("t2", "ok")]
    again = _state(*run("t1", "error"), r.TaskStarted(id="t2", description="run tests"))
    assert [(t.id, t.status) for t in derive_snapshot(again).tasks] == [("t2", "running"), ("t1", "error")]


def test_a_burst_of_results_keeps_each_through_the_turn_after_it_arrived() -> None:
    # Six jobs fanned out and rejoined at once: beyond tasks_cap (4) each stays through
    # the turn after the one it arrived in, then only the cap's newest do.
    cap = ProjectionConfig().tasks_cap
    jobs = [f"job {n}" for n in range(cap + 2)]
    started = [r.TaskStarted(id=f"t{n}", description=job) for n, job in enumerate(jobs)]
    results = [r.TaskResult(id=f"t{n}", status="ok", summary=f"done {n}") for n in range(len(jobs))]
    start, end = r.TurnStarted(trigger="task"), r.TurnEnded(outcome="completed")

    def shown(*bodies: r.Body) -> list[str]:
        return [t.id for t in derive_snapshot(_state(*started, *bodies)).tasks]

    everyone = [f"t{n}" for n in range(len(jobs))]
    assert shown(start, *results, end) == everyone  # the turn they arrived in, at its end
    assert shown(start, *results, end, start) == everyone  # the turn after it
    assert shown(start, *results, end, start, end) == everyone[-cap:]  # after that: the cap
    # Arrived while the agent was idle, they are the turn's before the one they woke.
    assert shown(start, end, *results, start) == everyone
    assert shown(start, end, *results, start, end) == everyone[-cap:]


def test_a_task_line_says_what_its_sub_agent_did_and_cites_its_records() -> None:
    state = _state(
        r.TaskStarted(id="t1", description="find   the\nbug"),
        r.ToolIntent(call_id="s1", tool="Read", args={"path": "a.py"}, task_id="t1"),
        r.ToolIntent(call_id="s2", tool="Bash", args={"command": "pytest -q"}, task_id="t1"),
        r.ToolResult(call_id="s2", tool="Bash", status="error", exit_code=1, output="1 failed", task_id="t1"),
        r.ToolResult(call_id="s3", tool="Edit", status="ok", touched_files=("b.py",), task_id="t1"),
        r.TaskResult(id="t1", status="ok", summary="the bug is in b.py " + "x" * 400),
    )
    (none, head, result, activity, error) = snapshot_lines(derive_snapshot(state))
    assert none == "active work: none"
    assert head == "task t1 finished (ok): find the bug [ledger:5]"
    assert result.startswith("  result: the bug is in b.py x") and len(result) == len("  result: ") + 300
    assert activity == "  2 tool calls, 1 error, files: b.py, a.py"
    assert error == "  last error: pytest -q: error, exit 1: 1 failed [ledger:3]"
