"""Review regressions for holon.projections: each test names the bug it pins down."""

from __future__ import annotations

import msgspec
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.projections import (
    CheckpointRejected,
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    read_checkpoint_key,
    restore_checkpoint,
    verify_derivations,
)
from holon.projections.checkpoint import CHECKPOINT_MAGIC
from tests.live import LiveLedger
from tests.strategies import AgentRun, agent_runs


def _live_state() -> ProjectionState:
    live = LiveLedger()
    live.start_turn("user", "hi")
    live.append(r.WorkItem(id="W1", objective="marker-objective", state="active"))
    live.end_turn()
    return live.state


def test_a_checkpoint_key_with_invalid_utf8_is_rejected_as_corrupt_not_raised() -> None:
    # A damaged byte inside a string of the key (here the head hash) is not valid UTF-8:
    # msgspec raises UnicodeDecodeError, not DecodeError, and it used to escape
    # read_checkpoint_key / restore_checkpoint (and so crash Agent.open) instead of
    # rejecting the checkpoint so the ledger is folded from an older one.
    data = bytearray(encode_checkpoint(_live_state(), head_hash="headhash-marker"))
    at = bytes(data).index(b"headhash-marker")
    data[at] = 0xFF
    damaged = bytes(data)
    key = read_checkpoint_key(damaged)
    assert isinstance(key, CheckpointRejected) and key.reason == "corrupt", key
    restored = restore_checkpoint(damaged, hash_at=lambda seq: "headhash-marker")
    assert isinstance(restored, CheckpointRejected) and restored.reason == "corrupt", restored


def test_a_checkpoint_state_with_invalid_utf8_is_rejected_as_corrupt_not_raised() -> None:
    state = _live_state()
    good = encode_checkpoint(state, head_hash="h")
    length = int.from_bytes(good[len(CHECKPOINT_MAGIC) : len(CHECKPOINT_MAGIC) + 4], "big")
    header = good[: len(CHECKPOINT_MAGIC) + 4 + length]
    payload = bytearray(msgspec.msgpack.encode(state))
    payload[bytes(payload).index(b"marker-objective")] = 0xFF
    # A well-formed zstd frame (its checksum matches) around a damaged msgpack payload.
    damaged = header + zstandard.ZstdCompressor(write_checksum=True).compress(bytes(payload))
    restored = restore_checkpoint(damaged, hash_at=lambda seq: "h")
    assert isinstance(restored, CheckpointRejected) and restored.reason == "corrupt", restored


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


# --------------------------------------------------------------------------- waits


def _episodes_of(records: tuple[r.Record, ...]) -> list[r.ContextEpisodeRecord]:
    return [rec.body for rec in records if isinstance(rec.body, r.ContextEpisodeRecord)]


def test_a_wait_opened_and_resolved_in_a_turn_is_no_boundary_while_an_older_wait_is_open() -> None:
    # docs/memory-model.md: wait_boundary fires when "a waiting intent opened in the
    # interval is still open". It fired whenever the turn opened a wait and *any* wait was
    # open, so a long-standing wait turned every turn that opened and resolved a short one
    # into an episode boundary (and a compression_epoch bump, i.e. a cache-prefix rewrite).
    live = LiveLedger()
    live.start_turn()
    live.append(r.WaitingIntent(id="w1", waiting_on="operator approval"))
    (first,) = _episodes_of(live.end_turn("waiting"))
    assert first.boundary_reason == "wait_boundary"
    live.start_turn()
    live.append(r.WaitingIntent(id="w2", waiting_on="ci run"))
    live.append(r.WaitingResolved(id="w2"))
    assert _episodes_of(live.end_turn()) == []
    # A wait the turn opened and left open still is one, whatever else is open.
    live.start_turn()
    live.append(r.WaitingIntent(id="w3", waiting_on="review"))
    (third,) = _episodes_of(live.end_turn())
    assert third.boundary_reason == "wait_boundary"


def test_a_second_resolution_of_a_wait_does_not_make_the_turn_a_wake() -> None:
    # A wait resolved twice (the operator answered, then its timer fired) is carried the
    # second time, but it was still counted as a resolution: the turn's delta claimed
    # "wake_resumed" although nothing was waiting any more.
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.append(r.WaitingIntent(id="w", waiting_on="operator"))
    live.end_turn()
    live.append(r.WaitingResolved(id="w", resolution="arrived"), in_turn=False)
    live.start_turn()
    live.render()  # refreshes "waiting on w" away: the wake is shown here
    live.end_turn()
    live.start_turn()
    live.append(r.WaitingResolved(id="w", resolution="timed_out"))
    steps = (r.PlanStep(id="a", text="first"),)
    live.append(r.WorkPlan(work_item_id="W1", steps=steps))
    deltas = [rec.body for rec in live.end_turn() if isinstance(rec.body, r.WorkingMemoryDelta)]
    assert [d.reason for d in deltas] == ["plan_changed"]
    assert live.state.runtime.carried_count == 1
