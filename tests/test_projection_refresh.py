"""The post-turn refresh: delta reasons and precedence, revisions, merging, confirmation."""

from __future__ import annotations

from pathlib import Path

# The writers' contract below reads a generated session and writes real ledgers.
import msgspec
import pytest

from holon import records as r
from holon.context import Budget
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.projections import (
    DELTA_REASON_PRECEDENCE,
    DecisionRef,
    ProjectionConfig,
    SnapshotPlanStep,
    WaitRef,
    WorkingMemorySnapshot,
    delta_lines,
    derive_snapshot,
    derived_after,
    derived_before,
    post_turn_refresh,
    refresh_before_prompt,
    refresh_working_memory,
    superseded_fields,
    verify_derivations,
)
from holon.replay import append_evidence
from holon.testing import AGENT, evidence_of, replay_live, run_session, with_real_blobs
from tests.live import LiveLedger


def _deltas(records: tuple[r.Record, ...]) -> list[r.WorkingMemoryDelta]:
    return [rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta)]


def _turn(
    live: LiveLedger, *bodies: r.Body, outcome: str = "completed", render: bool = True
) -> list[r.WorkingMemoryDelta]:
    live.start_turn()
    before: tuple[r.Record, ...] = ()
    if render:
        before = live.before_prompt()  # what the turn's prompt must not show any more
        live.render()
    for body in bodies:
        live.append(body)
    return _deltas(before + live.end_turn(outcome))


def _working(live: LiveLedger) -> None:
    _turn(live, r.WorkItem(id="W1", objective="o", state="active"))


def test_no_change_no_delta_and_no_revision_bump() -> None:
    live = LiveLedger()
    _working(live)
    revision = live.state.memory.revision
    assert _turn(live, r.Message(role="user", text="hello")) == []
    assert live.state.memory.revision == revision


def test_reason_active_work_changed() -> None:
    live = LiveLedger()
    (delta,) = _turn(live, r.WorkItem(id="W1", objective="o", state="active"))
    assert delta.reason == "active_work_changed"
    assert (delta.from_revision, delta.to_revision) == (0, 1)
    assert delta.changed_fields[0] == "active_work_item_id"
    assert delta.lines[0] == "active work: None → W1"


def test_reason_task_rejoined() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live, r.TaskStarted(id="t", description="build", work_item_id="W1"))
    live.append(r.TaskResult(id="t", status="ok", summary="built"), in_turn=False)
    # The result arrived before the turn's prompt, which must show it: a delta before the
    # prompt tells it (working memory showed the task running), then the turn's own.
    before_prompt, delta = _turn(live, r.Decision(id="d", text="ship", work_item_id="W1"))
    assert before_prompt.reason == delta.reason == "task_rejoined"
    assert before_prompt.lines == ("task t finished (ok): built",)


def test_reason_wake_resumed_after_a_waiting_turn() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live, r.Message(role="assistant", text="waiting"), outcome="waiting")
    (delta,) = _turn(live, r.FollowUp(id="f", text="check"))
    assert delta.reason == "wake_resumed"


def test_reason_wake_resumed_by_a_resolved_wait() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live, r.WaitingIntent(id="w", waiting_on="ci"))
    _turn(live, outcome="waiting")  # its prompt showed "waiting on ci"
    live.append(r.WaitingResolved(id="w"), in_turn=False)
    # Working memory still says "waiting on ci": the wake turn's first prompt refreshes it.
    (delta,) = _turn(live)
    assert delta.reason == "wake_resumed"
    assert delta.changed_fields == ("waiting_on",)
    assert delta.lines == ("-waiting on w (arrived)",)
    assert live.records[-1].kind == "turn_ended"  # nothing left for the post-turn refresh


def test_reason_plan_changed() -> None:
    live = LiveLedger()
    _working(live)
    steps = (r.PlanStep(id="a", text="first"), r.PlanStep(id="b", text="second"))
    (delta,) = _turn(live, r.WorkPlan(work_item_id="W1", steps=steps))
    assert delta.reason == "plan_changed"
    assert delta.lines == ("+plan step a [ ]: first", "+plan step b [ ]: second")
    done = (r.PlanStep(id="a", text="first", status="done"), steps[1])
    (edit,) = _turn(live, r.WorkPlan(work_item_id="W1", steps=done))
    assert edit.reason == "plan_changed" and edit.lines == ("plan step a: pending → done",)


def test_reason_turn_completed() -> None:
    live = LiveLedger()
    _working(live)
    (delta,) = _turn(live, r.ToolResult(call_id="c", tool="edit", status="ok", touched_files=("a.py",)))
    assert delta.reason == "turn_completed" and delta.lines == ("files: +a.py",)


def test_precedence_active_work_beats_task_and_plan() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live, r.TaskStarted(id="t", description="x"))
    (delta,) = _turn(
        live,
        r.TaskResult(id="t", status="ok", summary="done"),
        r.WorkItem(id="W2", objective="next", state="active"),
        r.WorkPlan(work_item_id="W2", steps=(r.PlanStep(id="a", text="go"),)),
    )
    assert delta.reason == "active_work_changed"
    assert DELTA_REASON_PRECEDENCE.index("task_rejoined") < DELTA_REASON_PRECEDENCE.index("plan_changed")


def test_unconfirmed_delta_merges_keeping_from_revision() -> None:
    live = LiveLedger()
    (first,) = _turn(live, r.WorkItem(id="W1", objective="o", state="active"), render=False)
    assert live.state.memory.pending == first
    (second,) = _turn(live, r.FollowUp(id="f", text="later"), render=False)
    assert (second.from_revision, second.to_revision) == (0, 2)
    assert second.reason == "active_work_changed"  # the merged reason keeps the higher precedence
    assert "active_work_item_id" in second.changed_fields and "follow_ups" in second.changed_fields
    assert second.evidence_from_seq == first.evidence_from_seq
    assert "+follow-up f: later" in second.lines
    assert live.state.memory.pending == second


def test_prompt_rendered_confirms_only_at_or_above_target() -> None:
    live = LiveLedger()
    _turn(live, r.WorkItem(id="W1", objective="o", state="active"), render=False)
    live.start_turn()
    live.append(
        r.PromptRendered(
            working_memory_revision=0,
            compression_epoch=0,
            cache_key="k",
            prompt_hash="h",
            total_tokens=1,
            budget=2,
            estimator="e",
        )
    )
    assert live.state.memory.pending is not None
    assert live.state.memory.confirmed_revision == 0
    live.render()
    assert live.state.memory.pending is None and live.state.memory.confirmed_revision == 1
    live.end_turn()


def test_after_confirmation_a_new_delta_starts_from_the_confirmed_revision() -> None:
    live = LiveLedger()
    _working(live)
    (delta,) = _turn(live, r.FollowUp(id="f", text="later"))
    assert (delta.from_revision, delta.to_revision) == (1, 2)


def test_delta_carries_evidence_range_and_version() -> None:
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    (record,) = live.end_turn()
    assert isinstance(record.body, r.WorkingMemoryDelta)
    assert (record.body.evidence_from_seq, record.body.evidence_to_seq) == (0, 2)
    assert record.body.projection_version == live.state.projection_version
    assert (record.ts, record.turn) == (live.records[2].ts, 1)


def test_delta_lines_are_capped_with_a_count_of_the_rest() -> None:
    live = LiveLedger(ProjectionConfig(delta_lines_cap=3))
    steps = tuple(r.PlanStep(id=f"s{i}", text="x") for i in range(6))
    _turn(live, r.WorkItem(id="W1", objective="o", state="active"))
    # A plan written for the active item (a switch sums the new item's plan up in one line).
    (delta,) = _turn(live, r.WorkPlan(work_item_id="W1", steps=steps))
    assert len(delta.lines) == 3 and delta.lines[-1] == "(+4 more changes)"


def test_delta_lines_of_identical_snapshots_are_empty() -> None:
    live = LiveLedger()
    _working(live)
    snapshot = live.state.memory.snapshot
    assert delta_lines(snapshot, snapshot, ("plan", "files"), 5) == ()


def test_refresh_outside_a_turn_end_is_a_usage_error() -> None:
    live = LiveLedger()
    live.start_turn()
    with pytest.raises(UsageError, match="turn_ended"):
        refresh_working_memory(live.state)
    live.end_turn()
    live.append(r.Message(role="user", text="late"), in_turn=False)
    with pytest.raises(UsageError):
        post_turn_refresh(live.state)


# --------------------------------------------------------------------------- the write rule


def test_a_turn_ended_brings_the_post_turn_refresh_after_it() -> None:
    live = LiveLedger(ProjectionConfig(turn_cap=1))
    live.start_turn()
    message = live.append(r.Message(role="user", text="hello"))
    assert derived_after(live.state, message) == ()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    ended = live.append(r.TurnEnded(outcome="completed"))  # folded alone: end_turn would refresh
    delta, episode = derived_after(live.state, ended)
    assert (delta.kind, episode.kind) == ("working_memory_delta", "context_episode")
    assert [(d.ts, d.turn, d.seq) for d in (delta, episode)] == [(ended.ts, ended.turn, -1)] * 2
    assert isinstance(delta.body, r.WorkingMemoryDelta) and delta.body.reason == "active_work_changed"
    assert isinstance(episode.body, r.ContextEpisodeRecord) and episode.body.to_seq == ended.seq


def _decided_then_rendered() -> LiveLedger:
    """W1 active with decision d1 from turn 1; turn 2 open and its prompt rendered."""
    live = LiveLedger()
    _turn(
        live,
        r.WorkItem(id="W1", objective="o", state="active"),
        r.Decision(id="d1", text="dump", work_item_id="W1"),
    )
    live.start_turn()
    live.render()
    return live


def test_a_prompt_rendered_brings_the_refresh_first_when_working_memory_is_untrue() -> None:
    live = _decided_then_rendered()
    assert derived_before(live.state, "prompt_rendered", tail_ts=1) == ()  # nothing untrue yet
    live.append(r.Decision(id="d1", text="replicate", work_item_id="W1"))
    (record,) = derived_before(live.state, "prompt_rendered", tail_ts=123)
    assert (record.kind, record.ts, record.turn, record.seq) == ("working_memory_delta", 123, live.turn, -1)
    assert isinstance(record.body, r.WorkingMemoryDelta) and record.body.reason == "superseded"
    assert record.body.lines == ("decision d1 revised: replicate",)
    # Only a prompt brings it: any other record is written as it comes.
    assert derived_before(live.state, "message", tail_ts=123) == ()
    assert derived_before(live.state, tail_ts=123) == ()


def test_an_owed_refresh_comes_before_any_record() -> None:
    live = LiveLedger(ProjectionConfig(turn_cap=1))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    ended = live.append(r.TurnEnded(outcome="completed"))  # folded alone: end_turn would refresh
    owed = derived_after(live.state, ended)
    # Its writer died right after the turn_ended: whatever comes next, the refresh comes first.
    for kind in (None, "turn_started", "prompt_rendered"):
        assert derived_before(live.state, kind, tail_ts=ended.ts) == owed
    # Died between the delta and the episode: the episode is still owed.
    live.append(owed[0].body, step_ms=0)
    (episode,) = derived_before(live.state, "turn_started", tail_ts=ended.ts)
    assert episode.body == owed[1].body and (episode.ts, episode.turn) == (ended.ts, ended.turn)
    live.append(episode.body, step_ms=0)
    assert derived_before(live.state, "prompt_rendered", tail_ts=ended.ts) == ()


# --------------------------------------------------------------------------- before a prompt


def _snapshot(**fields: object) -> WorkingMemorySnapshot:
    base: dict[str, object] = {
        "active_work_item_id": "W1",
        "work_state": "active",
        "objective": "migrate",
        "scope_constraints": ("no downtime",),
        "plan": (
            SnapshotPlanStep(id="a", text="export", status="done"),
            SnapshotPlanStep(id="b", text="copy"),
        ),
        "decisions": (DecisionRef(id="d1", text="dump", seq=3),),
        "waiting_on": (WaitRef(id="w", waiting_on="ci", seq=4),),
    }
    base.update(fields)
    return WorkingMemorySnapshot(**base)  # type: ignore[arg-type]


def test_progress_and_additions_do_not_supersede_working_memory() -> None:
    before = _snapshot()
    after = _snapshot(
        plan=(
            SnapshotPlanStep(id="b", text="copy", status="done"),  # finished; the done step "a" dropped
            SnapshotPlanStep(id="c", text="verify"),
        ),
        decisions=(DecisionRef(id="d2", text="replicate", seq=9), DecisionRef(id="d1", text="dump", seq=3)),
        waiting_on=(WaitRef(id="w", waiting_on="ci", seq=4), WaitRef(id="w2", waiting_on="dba", seq=8)),
        scope_constraints=("no downtime", "py311"),
    )
    assert superseded_fields(before, after) == ()
    assert superseded_fields(WorkingMemorySnapshot(), before) == ()  # a first active item is an addition


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"active_work_item_id": "W2"}, "active_work_item_id"),
        ({"objective": "migrate twice"}, "objective"),
        ({"scope_constraints": ()}, "scope_constraints"),
        (
            {
                "plan": (
                    SnapshotPlanStep(id="a", text="export", status="done"),
                    SnapshotPlanStep(id="b", text="X"),
                )
            },
            "plan",
        ),
        (
            {"plan": (SnapshotPlanStep(id="a", text="export", status="done"),)},
            "plan",
        ),  # an open step withdrawn
        ({"decisions": (DecisionRef(id="d1", text="replicate", seq=9),)}, "decisions"),
        ({"waiting_on": ()}, "waiting_on"),
    ],
)
def test_a_withdrawn_or_changed_statement_supersedes_it(change: dict[str, object], field: str) -> None:
    assert field in superseded_fields(_snapshot(), _snapshot(**change))


def test_before_a_prompt_a_revised_decision_is_refreshed_out_of_working_memory() -> None:
    live = _decided_then_rendered()
    revision = live.state.memory.revision
    assert refresh_before_prompt(live.state, ts=1) == ()  # nothing superseded yet
    live.append(r.Decision(id="d1", text="replicate", work_item_id="W1"))
    (record,) = refresh_before_prompt(live.state, ts=123)
    delta = record.body
    assert isinstance(delta, r.WorkingMemoryDelta)
    assert (record.ts, record.turn, record.seq) == (123, live.turn, -1)
    assert delta.reason == "superseded" and delta.to_revision == revision + 1
    assert delta.lines == ("decision d1 revised: replicate",)
    live.before_prompt()
    assert [d.text for d in live.state.memory.snapshot.decisions] == ["replicate"]
    live.end_turn()
    assert live.records[-1].kind == "turn_ended"  # the turn end has nothing more to say


def test_no_refresh_before_a_prompt_outside_a_turn() -> None:
    live = LiveLedger()
    _turn(
        live,
        r.WorkItem(id="W1", objective="o", state="active"),
        r.Decision(id="d1", text="dump", work_item_id="W1"),
    )
    live.append(r.Decision(id="d1", text="replicate", work_item_id="W1"), in_turn=False)
    assert refresh_before_prompt(live.state, ts=1) == ()


# --------------------------------------------------------------------------- tasks


def _sub_agent_step(task_id: str, call_id: str, command: str, status: str = "ok") -> tuple[r.Body, r.Body]:
    return (
        r.ToolIntent(call_id=call_id, tool="Bash", args={"command": command}, task_id=task_id),
        r.ToolResult(
            call_id=call_id, tool="Bash", status=status, exit_code=int(status != "ok"), task_id=task_id
        ),  # type: ignore[arg-type]
    )


def test_a_delta_tells_a_task_started_its_progress_and_its_result() -> None:
    live = LiveLedger()
    _working(live)
    (started,) = _turn(live, r.TaskStarted(id="t1", description="find the bug", work_item_id="W1"))
    assert started.lines == ("+task t1 (running): find the bug",)
    (progress,) = _turn(live, *_sub_agent_step("t1", "s1", "pytest -q", "error"))
    assert progress.lines == ("task t1 (running): 1 tool call, 1 error",)
    # A sub-agent's message changes nothing working memory shows: no delta, no revision.
    assert _turn(live, r.Message(role="assistant", text="looking", task_id="t1")) == []
    (rejoined,) = _turn(live, r.TaskResult(id="t1", status="ok", summary="the lexer drops empty input"))
    assert rejoined.reason == "task_rejoined"
    assert rejoined.lines == ("task t1 finished (ok): the lexer drops empty input",)
    assert [(t.id, t.status) for t in live.state.memory.snapshot.tasks] == [("t1", "ok")]


def test_a_burst_of_results_is_told_once_and_shown_through_the_next_turn() -> None:
    # Working memory shows the results of this turn and of the one before beyond
    # tasks_cap: each of a burst is told as it arrives, and none is "not shown" before
    # the model has had the turn after it.
    live = LiveLedger(ProjectionConfig(tasks_cap=1))
    _working(live)
    _turn(live, *(r.TaskStarted(id=f"t{i}", description=f"job {i}") for i in range(3)))
    (delta,) = _turn(live, *(r.TaskResult(id=f"t{i}", status="ok", summary=f"result {i}") for i in range(3)))
    assert sorted(delta.lines) == [
        "task t0 finished (ok): result 0",
        "task t1 finished (ok): result 1",
        "task t2 finished (ok): result 2",
    ]
    assert [t.id for t in live.state.memory.snapshot.tasks] == ["t0", "t1", "t2"]
    seqs = {rec.body.id: rec.seq for rec in live.records if isinstance(rec.body, r.TaskResult)}
    # After the next turn only the cap's newest stays: the delta says the others left,
    # not that they were withdrawn.
    (later,) = _turn(live, r.Message(role="assistant", text="working on it"))
    assert later.lines == tuple(
        f"task {t}: result no longer shown (newer task results) [ledger:{seqs[t]}]" for t in ("t0", "t1")
    )
    assert [t.id for t in live.state.memory.snapshot.tasks] == ["t2"]


def test_a_result_arriving_before_a_prompt_reaches_that_prompt() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live, r.TaskStarted(id="t1", description="build", work_item_id="W1"))
    live.start_turn()
    live.append(r.TaskResult(id="t1", status="ok", summary="built"))
    (record,) = refresh_before_prompt(live.state, ts=5)
    delta = record.body
    assert isinstance(delta, r.WorkingMemoryDelta)
    assert delta.reason == "task_rejoined" and delta.lines == ("task t1 finished (ok): built",)
    # Shown running before it rejoined: that statement is no longer true.
    assert "tasks" in superseded_fields(
        live.state.memory.snapshot, derive_snapshot(live.state.runtime), runtime=live.state.runtime
    )


def test_a_task_started_and_finished_within_a_turn_reaches_its_next_prompt() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live)  # its prompt confirms W1's delta
    live.start_turn()
    live.append(r.TaskStarted(id="t1", description="lint"))
    live.append(r.TaskResult(id="t1", status="ok", summary="clean"))
    (record,) = refresh_before_prompt(live.state, ts=5)
    assert record.body.lines == ("task t1 finished (ok): clean",)  # type: ignore[union-attr]


def test_at_a_switch_tasks_are_counted_with_what_each_item_brings() -> None:
    live = LiveLedger()
    _working(live)
    _turn(live, r.TaskStarted(id="t1", description="job", work_item_id="W1"))
    (switch,) = _turn(live, r.WorkItem(id="W2", objective="other", state="active"))
    assert switch.lines == (
        "active work: W1 → W2 (W1 is still active; W2 was activated after it)",
        "W1's 1 running task not shown (W1 is not the active item)",
    )
    (back,) = _turn(live, r.WorkItemState(id="W2", state="done"))
    assert back.lines == (
        "active work: W2 → W1 (W2 is now done)",
        "W1's 1 running task: see working memory",
    )


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


@pytest.mark.parametrize("turns", [8, 45])
def test_every_writer_appends_what_the_one_rule_derives(tmp_path: Path, turns: int) -> None:
    # One writer contract (issue #33): a session as the runtime's loop writes it (the fake
    # renders each turn's prompt, as Turn.context does), its evidence appended to a real
    # ledger as `holon append` and `holon import` do, and replayed through the fake one
    # record at a time: the same derived records at the same places, every one of which
    # replay verification re-derives.
    session = run_session(turns, Budget(context_window=16_000, output_reserve=1_000))
    written = session.live.records
    with Ledger.create(tmp_path / "ledger", agent_id=AGENT, fsync="never") as ledger:
        generated = evidence_of(written)
        evidence = [msgspec.structs.replace(with_real_blobs(ledger, record), seq=-1) for record in generated]
        append_evidence(ledger, evidence)
        appended = list(ledger.read())
    replayed = replay_live(evidence).records

    def shape(records: list[r.Record]) -> list[tuple[str, int, int, int | None]]:
        return [(record.kind, record.seq, record.ts, record.turn) for record in records]

    assert sum(record.kind in r.DERIVED_KINDS for record in written) >= 3  # the rule wrote records
    assert shape(appended) == shape(replayed) == shape(written)
    assert [record.body for record in appended] == [record.body for record in replayed]
    assert verify_derivations(appended).ok
