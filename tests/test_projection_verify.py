"""Replay verification: a clean ledger passes; a changed, missing or extra derived record is named."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.errors import UsageError
from holon.projections import ProjectionConfig, fold, verify_derivations
from tests.live import LiveLedger
from tests.strategies import AgentRun, agent_runs


def _ledger() -> list[r.Record]:
    live = LiveLedger(ProjectionConfig(turn_cap=2))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.end_turn()
    live.start_turn()
    live.render()
    live.append(r.ToolResult(call_id="c", tool="edit", status="ok", touched_files=("a.py",)))
    live.end_turn()
    return live.records


def _index(records: list[r.Record], kind: str) -> int:
    return next(i for i, rec in enumerate(records) if rec.kind == kind)


def _renumbered(records: list[r.Record]) -> list[r.Record]:
    """Records with gapless seqs again after a list edit, as a ledger (its seqs are gapless) holds them."""
    return [msgspec.structs.replace(rec, seq=seq) for seq, rec in enumerate(records)]


def test_a_live_ledger_verifies() -> None:
    records = _ledger()
    report = verify_derivations(records, config=ProjectionConfig(turn_cap=2))
    assert report.ok and report.divergence is None
    assert (report.records, report.refreshes, report.derived_checked) == (len(records), 2, 3)
    assert not report.pending_refresh


def test_a_changed_field_is_reported_at_its_seq_with_a_field_diff() -> None:
    records = _ledger()
    i = _index(records, "context_episode")
    body = records[i].body
    assert isinstance(body, r.ContextEpisodeRecord)
    records[i] = msgspec.structs.replace(
        records[i], body=msgspec.structs.replace(body, touched_files=("b.py",))
    )
    report = verify_derivations(records, config=ProjectionConfig(turn_cap=2))
    assert not report.ok and report.divergence is not None
    divergence = report.divergence
    assert (divergence.seq, divergence.kind) == (records[i].seq, "mismatch")
    assert [(d.field, d.expected, d.found) for d in divergence.diffs] == [
        ("body.touched_files", ("a.py",), ("b.py",))
    ]
    assert f"seq {records[i].seq}" in divergence.describe() and "body.touched_files" in divergence.describe()


def test_a_different_config_is_a_divergence() -> None:
    # Derived records state their config (projection version 9): the first one differs there,
    # before the episode the other turn cap would not have finalized.
    report = verify_derivations(_ledger(), config=ProjectionConfig(turn_cap=5))
    assert report.divergence is not None and report.divergence.kind == "mismatch"
    assert [d.field for d in report.divergence.diffs] == ["body.projection"]
    described = report.divergence.describe()
    assert "expected ProjectionConfig(turn_cap=5), found ProjectionConfig(turn_cap=2)" in described


def test_a_missing_derived_record_is_reported_where_it_should_be() -> None:
    records = _ledger()
    i = _index(records, "working_memory_delta")
    del records[i]
    records = _renumbered(records)
    report = verify_derivations(records, config=ProjectionConfig(turn_cap=2))
    assert report.divergence is not None
    assert (report.divergence.kind, report.divergence.seq) == ("missing", records[i].seq)
    assert report.divergence.expected_kind == "working_memory_delta"


def test_an_extra_derived_record_is_unexpected() -> None:
    records = _ledger()
    i = _index(records, "working_memory_delta")
    records.insert(1, records[i])
    records = _renumbered(records)
    report = verify_derivations(records, config=ProjectionConfig(turn_cap=2))
    assert report.divergence is not None
    assert (report.divergence.kind, report.divergence.seq) == ("unexpected", records[1].seq)


def test_an_older_projection_version_is_a_field_divergence() -> None:
    records = _ledger()
    i = _index(records, "working_memory_delta")
    body = records[i].body
    assert isinstance(body, r.WorkingMemoryDelta)
    records[i] = msgspec.structs.replace(records[i], body=msgspec.structs.replace(body, projection_version=0))
    report = verify_derivations(records, config=ProjectionConfig(turn_cap=2))
    assert report.divergence is not None
    assert [d.field for d in report.divergence.diffs] == ["body.projection_version"]


def test_a_ledger_cut_before_its_last_refresh_is_pending_not_divergent() -> None:
    records = _ledger()
    cut = records[: _index(records, "turn_ended") + 1]
    report = verify_derivations(cut, config=ProjectionConfig(turn_cap=2))
    assert report.ok and report.pending_refresh


def test_verification_resumes_from_a_state() -> None:
    records = _ledger()
    config = ProjectionConfig(turn_cap=2)
    split = _index(records, "turn_ended") + 1  # right after the turn_ended, before its delta
    state = fold(records[:split], config=config)
    assert verify_derivations(records[split:], state=state).ok
    records[split] = msgspec.structs.replace(records[split], ts=0)
    report = verify_derivations(records[split:], state=state)
    assert report.divergence is not None and report.divergence.diffs[0].field == "ts"
    with pytest.raises(ValueError, match="config"):
        verify_derivations(records, state=state, config=ProjectionConfig())


# --------------------------------------------------------------------------- before a prompt


def _revised_mid_turn() -> list[r.Record]:
    """A decision revised in the middle of a turn, then another prompt of the same turn."""
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="migrate", state="active"))
    live.append(r.Decision(id="d1", text="dump and restore", work_item_id="W1"))
    live.end_turn()
    live.start_turn()
    live.render()
    live.append(r.Decision(id="d1", text="logical replication", work_item_id="W1"))
    live.render()  # the refresh before it derives the delta that drops "dump and restore"
    live.end_turn()
    return renumbered(live.records)


def renumbered(records: list[r.Record]) -> list[r.Record]:
    return [msgspec.structs.replace(rec, seq=i) for i, rec in enumerate(records)]


def test_a_refresh_before_a_prompt_verifies() -> None:
    records = _revised_mid_turn()
    i = max(i for i, rec in enumerate(records) if rec.kind == "prompt_rendered")
    derived = records[i - 1]
    assert isinstance(derived.body, r.WorkingMemoryDelta) and derived.body.reason == "superseded"
    assert derived.ts == records[i - 2].ts and derived.turn == records[i].turn
    report = verify_derivations(records)
    assert report.ok, report.divergence


def test_a_prompt_without_its_refresh_is_missing_it() -> None:
    records = _revised_mid_turn()
    i = max(i for i, rec in enumerate(records) if rec.kind == "prompt_rendered")
    del records[i - 1]
    records = renumbered(records)
    report = verify_derivations(records)
    divergence = report.divergence
    assert divergence is not None and (divergence.kind, divergence.seq) == ("missing", i - 1)
    assert (divergence.expected_kind, divergence.found_kind) == ("working_memory_delta", "prompt_rendered")


def test_a_refresh_where_nothing_was_superseded_is_unexpected() -> None:
    records = _revised_mid_turn()
    i = max(i for i, rec in enumerate(records) if rec.kind == "prompt_rendered")
    extra = records[i - 1]
    # The same delta again, before the turn ends: nothing is superseded any more.
    records.insert(i + 1, extra)
    records = renumbered(records)
    report = verify_derivations(records)
    divergence = report.divergence
    assert divergence is not None and (divergence.kind, divergence.seq) == ("unexpected", i + 1)


# --------------------------------------------------------------------------- verification from a state


def _superseding_ledger() -> list[r.Record]:
    """Turn 2 revises decision D1 and then renders: a pre-prompt delta precedes the prompt;
    every turn end finalizes an episode (turn_cap 1) after its delta."""
    live = LiveLedger(ProjectionConfig(turn_cap=1))
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.append(r.Decision(id="D1", text="use postgres", work_item_id="W1"))
    live.end_turn()
    live.start_turn()
    live.append(r.Decision(id="D1", text="use sqlite", work_item_id="W1"))
    live.render()
    live.end_turn()
    return live.records


def test_verification_from_a_state_just_before_a_pre_prompt_delta_passes() -> None:
    # The pre-prompt delta carries the ts of the record before it; a state does not keep
    # that ts, so verifying from a state folded up to that record used to compare the
    # delta with ts 0 and report a ts mismatch in a ledger that is fine.
    records = _superseding_ledger()
    config = ProjectionConfig(turn_cap=1)
    assert verify_derivations(records, config=config).ok
    delta_at = next(
        i for i, rec in enumerate(records) if rec.kind == r.WorkingMemoryDelta.KIND and rec.turn == 2
    )
    assert records[delta_at + 1].kind == r.PromptRendered.KIND  # the pre-prompt delta
    report = verify_derivations(records[delta_at:], state=fold(records[:delta_at], config=config))
    assert report.ok, report.divergence and report.divergence.describe()


def test_verification_from_a_state_between_a_refresh_delta_and_its_episode_passes() -> None:
    # A state folded up to the delta of a post-turn refresh still owes the episode of
    # the same refresh; verifying from it used to call that episode "unexpected".
    records = _superseding_ledger()
    config = ProjectionConfig(turn_cap=1)
    delta_at = next(i for i, rec in enumerate(records) if rec.kind == r.WorkingMemoryDelta.KIND)
    assert records[delta_at - 1].kind == r.TurnEnded.KIND
    assert records[delta_at + 1].kind == r.ContextEpisodeRecord.KIND
    report = verify_derivations(records[delta_at + 1 :], state=fold(records[: delta_at + 1], config=config))
    assert report.ok, report.divergence and report.divergence.describe()
    assert report.derived_checked == len(
        [rec for rec in records[delta_at + 1 :] if rec.kind in r.DERIVED_KINDS]
    )
    # ... and a wrong episode there is still caught, at its seq.
    body = records[delta_at + 1].body
    assert isinstance(body, r.ContextEpisodeRecord)
    forged = msgspec.structs.replace(records[delta_at + 1], body=msgspec.structs.replace(body, objective="x"))
    report = verify_derivations(
        [forged, *records[delta_at + 2 :]], state=fold(records[: delta_at + 1], config=config)
    )
    assert report.divergence is not None and report.divergence.seq == forged.seq
    assert report.divergence.kind == "mismatch"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(agent_runs(open_turn=True), st.data())
def test_verification_from_any_folded_prefix_equals_verification_of_the_whole(
    run: AgentRun, data: st.DataObject
) -> None:
    whole = verify_derivations(run.records, config=run.config)
    assert whole.ok
    split = data.draw(st.integers(0, len(run.records)))
    head = fold(run.records[:split], config=run.config)
    report = verify_derivations(run.records[split:], state=head)
    assert report.ok, report.divergence and report.divergence.describe()
    assert report.pending_refresh == whole.pending_refresh


def test_verification_refuses_records_that_do_not_continue_the_given_state() -> None:
    # verify_derivations(records, state=checkpoint) folded whatever it was given on top
    # of the state: the whole ledger with a checkpoint's state (an easy mistake) was
    # folded twice and reported ok, or a divergence at a seq where nothing differs; a
    # gap after the state was reported ok too.
    live = LiveLedger(ProjectionConfig(turn_cap=1))
    for n in range(3):
        live.start_turn()
        live.append(r.WorkItem(id=f"W{n}", objective="o", state="active"))
        live.end_turn()
    records = live.records
    assert verify_derivations(records, config=live.state.config).ok
    state = fold(records[:5], config=live.state.config)
    assert verify_derivations(records[5:], state=state).ok
    with pytest.raises(UsageError, match="first record is seq 0, but the state is folded to seq 4"):
        verify_derivations(records, state=state)
    with pytest.raises(UsageError, match="first record is seq 7"):
        verify_derivations(records[7:], state=state)
    with pytest.raises(UsageError, match="first record is seq 5, but the state is folded to seq -1"):
        verify_derivations(records[5:], config=live.state.config)
