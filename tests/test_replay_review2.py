"""Second review of replay and the projections: each test names the bug it pins down."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon import records as r
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.projections import ProjectionConfig, fold, owed_refresh, verify_derivations
from holon.replay import append_evidence, state_after
from tests.live import LiveLedger


def _turn_with_delta_and_episode() -> LiveLedger:
    """One turn whose refresh derives a delta and an episode (a result brief is a checkpoint)."""
    live = LiveLedger()
    live.start_turn()
    live.append(r.WorkItem(id="W1", objective="o", state="active"))
    live.append(r.Brief(status="result", text="shipped"))
    derived = live.end_turn()
    assert [d.kind for d in derived] == [r.WorkingMemoryDelta.KIND, r.ContextEpisodeRecord.KIND]
    return live


def test_append_evidence_appends_the_episode_a_writer_died_before(tmp_path: Path) -> None:
    # The runtime appends a refresh's derived records one by one, so a crash can leave the
    # delta without its episode. append_evidence (holon append / import) only made up a
    # refresh owed as a whole, so the evidence it appended stood where the episode belonged
    # and the ledger no longer verified ("expected a derived context_episode").
    live = _turn_with_delta_and_episode()
    episode = live.records[-1]
    later = r.Record(body=r.TurnStarted(trigger="user"), ts=live.ts + 5, turn=2)
    with Ledger.create(tmp_path / "L", agent_id="a", fsync="never") as ledger:
        ledger.append_many(live.records[:-1])
        assert owed_refresh(state_after(ledger.read())) == (
            r.Record(body=episode.body, ts=episode.ts, turn=episode.turn),
        )
        append_evidence(ledger, [later])
        stored = list(ledger.read())
    assert [rec.kind for rec in stored[-2:]] == [r.ContextEpisodeRecord.KIND, r.TurnStarted.KIND]
    assert stored[-2].body == episode.body
    report = verify_derivations(stored)
    assert report.ok and not report.pending_refresh, report


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
