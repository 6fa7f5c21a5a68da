"""Review regressions for holon.projections (fourth review): each test names the bug it pins down."""

from __future__ import annotations

import pytest

from holon import records as r
from holon.errors import HolonError, ProjectionConfigMismatch
from holon.projections import (
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    refresh_before_prompt,
    restore_checkpoint,
    verify_derivations,
)
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


# --------------------------------------------------------------------------- another config


def _folded_under_turn_cap_3() -> tuple[ProjectionState, list[r.Record]]:
    live = LiveLedger(ProjectionConfig(turn_cap=3))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.end_turn()
    return live.state, live.records


@pytest.mark.parametrize("call", ["fold", "verify_derivations"])
def test_another_config_than_the_states_is_a_holon_error_naming_the_fields(call: str) -> None:
    # A plain ValueError("config differs") said neither which knob differed nor what to do.
    state, _ = _folded_under_turn_cap_3()
    given = ProjectionConfig(turn_cap=5, files_cap=4)
    with pytest.raises(ProjectionConfigMismatch) as caught:
        if call == "fold":
            fold([], state, config=given)
        else:
            verify_derivations([], state=state, config=given)
    error = caught.value
    assert isinstance(error, HolonError) and isinstance(error, ValueError)
    message = str(error)
    assert message.startswith(f"{call}:"), message
    assert "turn_cap: the state's 3, given 5" in message, message
    assert "files_cap: the state's 16, given 4" in message, message
    assert "plan_cap" not in message, message
    assert "from seq 0" in message, message  # what to do
    assert error.differences == ("turn_cap", "files_cap")


def test_a_checkpoint_of_another_config_names_the_fields_that_differ() -> None:
    state, _ = _folded_under_turn_cap_3()
    data = encode_checkpoint(state, head_hash="h")
    rejected = restore_checkpoint(data, hash_at=lambda seq: "h", config=ProjectionConfig())
    assert isinstance(rejected, CheckpointRejected) and rejected.reason == "config"
    assert "turn_cap: the checkpoint's 3, given 12" in rejected.detail, rejected.detail
    assert "plan_cap" not in rejected.detail, rejected.detail
