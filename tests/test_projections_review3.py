"""Third review of holon.projections and holon.replay: each test names the bug it pins down."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon import records as r
from holon.errors import InvalidRecord, UsageError
from holon.ledger import Ledger
from holon.projections import (
    ProjectionConfig,
    ProjectionState,
    encode_checkpoint,
    fold,
    restore_checkpoint,
    verify_derivations,
)
from holon.replay import append_evidence, ledger_stats, replay_turns, state_after
from tests.live import LiveLedger
from tests.strategies import AgentRun, agent_runs

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


# --------------------------------------------------------------------------- continuity of folding


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


# --------------------------------------------------------------------------- append_evidence: turn numbers


def _turn_three(tmp_path: Path) -> Ledger:
    """A ledger whose turn 3 is open (a work item, then a result brief: the refresh closes an episode)."""
    ledger = Ledger.create(tmp_path / "L", agent_id="a", fsync="never")
    append_evidence(
        ledger,
        [
            r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=3),
            r.Record(body=r.WorkItem(id="W1", objective="o", state="active"), ts=2, turn=3),
            r.Record(body=r.Brief(status="result", text="done"), ts=3, turn=3),
        ],
    )
    return ledger


@pytest.mark.parametrize("turn", [1, None])
def test_append_evidence_refuses_a_turn_ended_naming_another_turn(tmp_path: Path, turn: int | None) -> None:
    # The runtime closes turn N with a turn_ended of turn N. One of turn 1 (a turn number
    # going backwards in an imported history) or of no turn was appended, and the refresh
    # closed the turn's episode with summary "turns 3-1" (last_turn 1) or "turns 3-None"
    # (last_turn -1), the episode record itself filed under turn 1 or no turn.
    with _turn_three(tmp_path) as ledger:
        head = ledger.head()
        with pytest.raises(InvalidRecord, match=r"turn_ended of turn .* while turn 3 is open"):
            append_evidence(ledger, [r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=turn)])
        assert ledger.head() == head  # refused before anything was written
        append_evidence(ledger, [r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=3)])
        episodes = [rec for rec in ledger.read() if isinstance(rec.body, r.ContextEpisodeRecord)]
    assert [(e.body.first_turn, e.body.last_turn, e.turn) for e in episodes] == [(3, 3, 3)]


def test_append_evidence_refuses_a_record_naming_another_turn_inside_a_turn(tmp_path: Path) -> None:
    # A message of turn 1 inside turn 3 was filed under turn 1: not the turn's input, and
    # shown in the history as a turn of its own. A record without a turn stays accepted.
    with _turn_three(tmp_path) as ledger:
        with pytest.raises(InvalidRecord, match="message of turn 1 while turn 3 is open"):
            append_evidence(ledger, [r.Record(body=r.Message(role="user", text="hi"), ts=4, turn=1)])
        append_evidence(ledger, [r.Record(body=r.Message(role="user", text="hi"), ts=4)])
        assert verify_derivations(ledger.read()).ok


def _prompt(revision: int, epoch: int) -> r.PromptRendered:
    return r.PromptRendered(
        working_memory_revision=revision, compression_epoch=epoch, cache_key="k", prompt_hash="h",
        total_tokens=1, budget=1, estimator="holon-heuristic",
    )  # fmt: skip


@pytest.mark.parametrize(("revision", "epoch", "field"), [(9, 0, "revision 9"), (0, 5, "epoch 5")])
def test_append_evidence_refuses_a_prompt_showing_what_was_not_derived_yet(
    tmp_path: Path, revision: int, epoch: int, field: str
) -> None:
    # A prompt confirms the working-memory revision it showed. One claiming revision 9 of a
    # ledger at revision 1 was accepted: the fold's confirmed revision went past the
    # ledger's, and the next change (revision 2) counted as shown before any prompt showed it.
    with _turn_three(tmp_path) as ledger:
        folded = state_after(ledger.read())
        head = ledger.head()
        with pytest.raises(InvalidRecord, match=f"the prompt records .*{field}.*but the ledger has reached"):
            append_evidence(ledger, [r.Record(body=_prompt(revision, epoch), ts=4, turn=3)])
        assert ledger.head() == head
        current = _prompt(folded.memory.revision, folded.memory.compression_epoch)
        append_evidence(ledger, [r.Record(body=current, ts=4, turn=3)])
        assert verify_derivations(ledger.read()).ok
