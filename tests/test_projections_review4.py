"""Review regressions for holon.projections (fourth review): each test names the bug it pins down."""

from __future__ import annotations

from holon import records as r
from holon.projections import refresh_before_prompt
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
