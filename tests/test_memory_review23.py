"""Working memory read the way the model reads it, over a long run: caps that hid entries
without a word, deltas that read a capped-out decision as withdrawn or an entry coming
into view as new, and an item switch whose one-line-per-rule removals crowded out the
delta's later lines."""

from __future__ import annotations

from holon import records as r
from holon.context import Budget, RenderConfig, build_context
from holon.projections import (
    DEFAULT_CONFIG,
    derive_snapshot,
    encode_checkpoint,
    fold,
    restore_checkpoint,
    snapshot_lines,
)
from tests.live import LiveLedger


def _decide(live: LiveLedger, ids: range, item: str | None = "W1") -> None:
    for i in ids:
        live.append(r.Decision(id=f"D{i}", text=f"decision {i}", work_item_id=item))


def _started() -> LiveLedger:
    live = LiveLedger()
    live.start_turn("user", "go")
    live.append(r.WorkItem(id="W1", objective="Build the exporter", state="active"))
    _decide(live, range(1, 9))  # exactly the cap: nothing pushed out yet
    live.end_turn()
    live.render()
    return live


def _delta_lines(records: tuple[r.Record, ...]) -> tuple[str, ...]:
    (delta,) = (rec.body for rec in records if isinstance(rec.body, r.WorkingMemoryDelta))
    return delta.lines


def test_a_decision_the_cap_pushes_out_still_holds_and_working_memory_counts_it() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 11))
    lines = _delta_lines(live.end_turn())
    # D1 and D2 were not withdrawn: newer decisions pushed them out of the newest eight.
    assert "decision D1: still holds, not shown (over the cap)" in lines
    assert "decision D2: still holds, not shown (over the cap)" in lines
    assert not any(line.startswith("-decision") for line in lines)
    snapshot = live.state.memory.snapshot
    assert snapshot.decisions_omitted == 2
    assert "(+2 older decisions not shown)" in snapshot_lines(snapshot)


def test_a_decision_redeclared_elsewhere_reads_withdrawn_and_says_where() -> None:
    live = _started()
    live.start_turn("user", "reorganise")
    live.append(r.WorkItem(id="W2", objective="Second", state="queued"))
    live.append(r.WorkItem(id="W9", objective="Old", state="done"))
    live.append(r.Decision(id="D3", text="decision 3", work_item_id="W2"))
    live.append(r.Decision(id="D4", text="decision 4", work_item_id="W9"))
    _decide(live, range(9, 13))  # two refill the bucket, two push out D1 and D2
    lines = _delta_lines(live.end_turn())
    assert "-decision D3 (moved to W2)" in lines
    assert "-decision D4 (moved to W9, which is not open)" in lines
    assert "decision D1: still holds, not shown (over the cap)" in lines
    assert "decision D2: still holds, not shown (over the cap)" in lines
    assert live.state.memory.snapshot.decisions_omitted == 2


def test_an_entry_coming_into_view_is_not_reported_as_new() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    for i in range(10):
        live.append(r.FollowUp(id=f"F{i}", text=f"follow {i}", status="open"))
    live.end_turn()
    live.render()
    assert live.state.memory.snapshot.follow_ups_omitted == 2
    live.start_turn("user", "close one")
    live.append(r.FollowUp(id="F9", text="follow 9", status="done"))
    lines = _delta_lines(live.end_turn())
    # F1 was open all along, over the cap: "+follow-up F1" read as a new follow-up.
    assert lines == ("follow-up F1 (was over the cap, now shown): follow 1", "-follow-up F9 (done)")


def test_closing_an_entry_over_the_cap_is_a_change_working_memory_states() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    for i in range(8):
        live.append(r.WaitingIntent(id=f"w{i}", waiting_on=f"thing {i}"))
    live.end_turn("waiting")
    live.render()
    live.start_turn("user", "one arrived")
    live.append(r.WaitingResolved(id="w0", resolution="arrived"))  # over the cap of 6
    lines = _delta_lines(live.end_turn())
    assert lines == ("older open waits not shown: 2 → 1",)


def test_the_prompt_names_every_count_a_cap_leaves_out() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 10))
    for i in range(10):
        live.append(r.FollowUp(id=f"F{i}", text=f"follow {i}", status="open", work_item_id="W1"))
    for i in range(7):
        live.append(r.WaitingIntent(id=f"w{i}", waiting_on=f"thing {i}", work_item_id="W1"))
    live.end_turn()
    live.start_turn("user", "next")
    prompt = build_context(live.state, Budget(context_window=50_000), RenderConfig(), agent_id="a")
    (memory,) = (s.text for s in prompt.sections if s.name == "working_memory")
    cap = "(over the working-memory cap)"
    assert f"(+1 older decision not shown {cap}: in force unless revised since)" in memory
    assert f"(+2 older open follow-ups not shown {cap})" in memory
    assert f"(+1 older open wait not shown {cap})" in memory


def test_an_item_switch_sums_up_the_previous_item_and_keeps_what_ended() -> None:
    live = LiveLedger()
    live.start_turn("user", "go")
    rules = tuple(f"rule {i}" for i in range(14))
    live.append(r.WorkItem(id="W1", objective="Build", state="active", scope_constraints=rules))
    steps = tuple(r.PlanStep(id=f"s{i}", text="x") for i in range(5))
    live.append(r.WorkPlan(work_item_id="W1", steps=steps))
    _decide(live, range(1, 4))
    live.append(r.WaitingIntent(id="ci", waiting_on="the CI run"))
    live.end_turn("waiting")
    live.render()
    live.start_turn("user", "switch")
    live.append(r.WaitingResolved(id="ci", resolution="arrived"))
    live.append(r.WorkItemState(id="W1", state="queued"))
    live.append(r.WorkItem(id="W2", objective="Second", state="active"))
    lines = _delta_lines(live.end_turn())
    # W1's rules were not dropped, nor its decisions withdrawn: they are W1's. One line
    # for them all left room for the wait that ended (it was cut off by "(+N more changes)").
    # (Review 24: one line, not one per list; W2's objective is in working memory.)
    assert lines == (
        "active work: W1 → W2 (W1 is now queued)",
        "W1's 14 scope constraints, 5 plan steps, 3 decisions not shown (W1 is not the active item)",
        "-waiting on ci (arrived)",
    )


def test_the_counts_survive_a_checkpoint_and_a_piecewise_fold() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 12))
    _decide(live, range(20, 30), item=None)
    live.end_turn()
    whole = fold(live.records)
    assert whole.runtime.decisions_over_cap == {"W1": 3}
    assert whole.runtime.unscoped_decisions_over_cap == 2
    half = len(live.records) // 2
    assert fold(live.records[half:], fold(live.records[:half])) == whole
    data = encode_checkpoint(whole, head_hash="00" * 32)
    restored = restore_checkpoint(data, hash_at=lambda seq: "00" * 32, config=DEFAULT_CONFIG)
    assert restored == whole
    # 3 pushed out of W1's bucket, 2 of the unscoped one, 8 kept but over the cap.
    assert derive_snapshot(whole.runtime).decisions_omitted == 13


def test_an_item_finishing_drops_its_count_with_its_bucket() -> None:
    live = _started()
    live.start_turn("user", "more")
    _decide(live, range(9, 11))
    live.append(r.WorkItemState(id="W1", state="done"))
    live.end_turn()
    assert live.state.runtime.decisions_over_cap == {}
