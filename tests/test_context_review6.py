"""Review regressions for holon.context (sixth review): each test names the bug it pins down."""

from __future__ import annotations

from pathlib import Path

import msgspec

from holon import records as r
from holon.context import Budget, build_context
from holon.ledger import Ledger
from tests.cli_support import invoke
from tests.live import LiveLedger, RecordsSource

# --------------------------------------------------------------------------- scope beyond the cap

_CAP_FULL = tuple(f"rule {i}" for i in range(12))
_BUDGET = Budget(context_window=8_000, output_reserve=1_000)


def _declared(scope: tuple[str, ...], *, plan: bool = True) -> tuple[LiveLedger, r.Record]:
    """W1 declared with ``scope`` (and a one-step plan) in turn 1; turn 2 open, refreshed."""
    live = LiveLedger()
    live.start_turn("operator", "go")
    declared = live.append(r.WorkItem(id="W1", objective="ship it", state="active", scope_constraints=scope))
    if plan:
        live.append(r.WorkPlan(work_item_id="W1", steps=(r.PlanStep(id="s1", text="write the migration"),)))
    live.end_turn()
    live.start_turn("operator", "continue")
    live.before_prompt()
    return live, declared


def test_active_work_does_not_repeat_working_memory_when_the_item_has_more_constraints_than_the_cap() -> None:
    # The live item was compared with the snapshot's first 12 constraints: with a 13th it
    # never matched, and active work repeated every constraint and the plan that working
    # memory had just shown. Now it points at working memory and adds only the 13th.
    live, _ = _declared((*_CAP_FULL, "never push to main"))
    prompt = build_context(live.state, _BUDGET, agent_id="a")
    active = prompt.section("active_work")
    assert active is not None
    assert "unchanged since working memory revision" in active.text, active.text
    assert "scope: never push to main" in active.text.splitlines()
    assert not any(f"scope: {c}" in active.text.splitlines() for c in _CAP_FULL), active.text
    assert "write the migration" not in active.text, active.text
    # Every rule is still in the prompt, none behind a recall.
    assert all(f"scope: {c}" in prompt.text.splitlines() for c in (*_CAP_FULL, "never push to main"))


def test_a_rule_beyond_the_cap_changed_mid_turn_is_shown_from_the_live_item() -> None:
    live, _ = _declared((*_CAP_FULL, "never push to main"))
    live.append(
        r.WorkItem(
            id="W1", objective="ship it", state="active", scope_constraints=(*_CAP_FULL, "push to main")
        )
    )
    active = build_context(live.state, _BUDGET, agent_id="a").section("active_work")
    assert active is not None and "unchanged since" not in active.text
    assert "scope: push to main" in active.text.splitlines()


def test_a_huge_list_of_constraints_beyond_the_cap_stays_bounded_and_restorable() -> None:
    # The pointer form's minimum lists at most 12 of the rest, each clipped, and names the
    # declaration for everything it cuts: a list of pages cannot make the minimum larger
    # than a window.
    rest = tuple(f"rule {i}: " + "do not touch the billing tables " * 40 for i in range(12, 400))
    live, declared = _declared((*_CAP_FULL, *rest))
    budget = Budget(context_window=12_000, output_reserve=1_000)
    prompt = build_context(live.state, budget, agent_id="a")
    assert prompt.total_tokens <= budget.available
    active = prompt.section("active_work")
    assert active is not None and active.form == "truncated"
    assert "unchanged since working memory revision" in active.text, active.text[:400]
    assert "write the migration" not in active.text
    ref = f"ledger:{declared.seq}"
    lines = active.text.splitlines()
    assert sum(line.startswith("scope: rule ") for line in lines) == 12
    assert any("+376 more scope constraints not shown" in line and ref in line for line in lines), lines
    cut = [o for o in prompt.plan.omitted if o.section == "active_work"]
    assert cut and all(o.ref == ref for o in cut)
    # The ref restores every rule.
    body = RecordsSource(live.records).record(declared.seq).body
    assert isinstance(body, r.WorkItem) and body.scope_constraints == (*_CAP_FULL, *rest)


def test_a_pointer_with_no_constraints_beyond_the_cap_reads_as_before() -> None:
    live, _ = _declared(_CAP_FULL)
    active = build_context(live.state, _BUDGET, agent_id="a").section("active_work")
    assert active is not None
    assert active.text.splitlines()[1:] == [
        "W1: unchanged since working memory revision 1 (objective, scope and plan are shown there)."
    ]


def _unscoped_plan() -> LiveLedger:
    """A plan of no work item from turn 1, and no active item; turn 2 open, refreshed."""
    live = LiveLedger()
    live.start_turn("operator", "go")
    steps = (r.PlanStep(id="s1", text="write the migration"), r.PlanStep(id="s2", text="run it"))
    live.append(r.WorkPlan(work_item_id=None, steps=steps))
    live.end_turn()
    live.start_turn("operator", "continue")
    live.before_prompt()
    return live


def test_active_work_does_not_repeat_an_unscoped_plan_working_memory_shows() -> None:
    # With no active item, the section listed the whole unscoped plan under "No active work
    # item." at every turn, right after working memory had shown the same plan.
    live = _unscoped_plan()
    prompt = build_context(live.state, _BUDGET, agent_id="a")
    active, memory = prompt.section("active_work"), prompt.section("working_memory")
    assert active is not None and memory is not None
    assert "write the migration" in memory.text
    assert "write the migration" not in active.text, active.text
    assert active.text.splitlines()[1] == (
        "No active work item; the plan is unchanged since working memory revision 1 (shown there)."
    )


def test_an_unscoped_plan_edited_this_turn_is_shown_from_the_live_plan() -> None:
    live = _unscoped_plan()
    live.append(r.WorkPlan(work_item_id=None, steps=(r.PlanStep(id="s1", text="drop the table"),)))
    active = build_context(live.state, _BUDGET, agent_id="a").section("active_work")
    assert active is not None and "unchanged since" not in active.text
    assert "s1: drop the table" in active.text


# --------------------------------------------------------------------------- explain


def _shared_blob_ledger(path: Path) -> Path:
    """Two calls in one turn returning the same large output: one blob, two results."""
    output = "same listing line\n" * 3000  # over the result cap: both are previews in a small window
    bodies: list[r.Body] = [r.TurnStarted(trigger="user", input="go")]
    for call in ("c1", "c2"):
        bodies.append(r.ToolIntent(call_id=call, tool="bash", args={"command": "ls"}))
        bodies.append(r.ToolResult(call_id=call, tool="bash", status="ok", output=output))
    bodies.append(r.TurnEnded(outcome="completed"))
    with Ledger.create(path, agent_id="a", fsync="never", blob_threshold=1024) as ledger:
        ledger.append_many([r.Record(body=b, ts=i, turn=1) for i, b in enumerate(bodies)])
    return path


def test_explain_shows_two_results_stored_in_one_blob_as_one_row_with_a_count(tmp_path: Path) -> None:
    # Both rows read "history  blob:<h>  …  tool result over the size cap", which looked
    # like a mistake. One row says two items share the ref; --json keeps both (and the
    # reasons stay categories: the audit's evictions report groups by them).
    path = _shared_blob_ledger(tmp_path / "L")
    result = invoke("explain", path, "--budget", "8000", "--output-reserve", "1000")
    assert result.exit_code == 0, result.output
    rows = [line for line in result.stdout.splitlines() if "blob:" in line]
    assert len(rows) == 1, rows
    assert rows[0].endswith("tool result over the size cap (2 items share this ref)"), rows
    doc = msgspec.json.decode(
        invoke("explain", path, "--budget", "8000", "--output-reserve", "1000", "--json").stdout
    )
    reasons = [o["reason"] for o in doc["omitted"]]
    assert reasons == ["tool result over the size cap"] * 2, reasons


def test_explain_keeps_a_sections_why_cell_short_when_it_left_out_many_items(tmp_path: Path) -> None:
    # Reasons that name their item (a call's arguments over the cap) made one cell of
    # them all: dozens of calls made one line of the table wider than any terminal. The
    # list below has them all.
    bodies: list[r.Body] = [r.TurnStarted(trigger="user", input="go")]
    words = " ".join(f"w{i}" for i in range(3000))  # over the message cap
    for n in range(6):
        bodies.append(r.ToolIntent(call_id=f"c{n}", tool="bash", args={"command": f"echo {n} {words}"}))
        bodies.append(r.ToolResult(call_id=f"c{n}", tool="bash", status="ok", output="done"))
    bodies += [r.TurnEnded(outcome="completed"), r.TurnStarted(trigger="user", input="next")]
    path = tmp_path / "L"
    with Ledger.create(path, agent_id="a", fsync="never", blob_threshold=1024) as ledger:
        ledger.append_many([r.Record(body=b, ts=i, turn=1 if i < 14 else 2) for i, b in enumerate(bodies)])
    # A window the history does not fit whole: its units are capped.
    doc = msgspec.json.decode(
        invoke("explain", path, "--budget", "8000", "--output-reserve", "1000", "--json").stdout
    )
    history = next(row for row in doc["sections"] if row["section"] == "history")
    distinct = list(dict.fromkeys(o["reason"] for o in doc["omitted"] if o["section"] == "history"))
    assert sum(reason.startswith("arguments of c") for reason in distinct) == 6, distinct
    # The first three, then how many more.
    assert history["why"] == "; ".join(distinct[:3]) + f"; +{len(distinct) - 3} more (listed below)"
