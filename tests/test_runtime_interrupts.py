"""A KeyboardInterrupt anywhere in a turn: the daemon sees it, and the ledger stays whole.

An interrupt (or any exception) may arrive anywhere; whatever it cuts short, the daemon
sees its own exception, the ledger still verifies, and the agent either goes on correctly
or refuses with a UsageError saying to reopen, after which the ledger is whole again. A
second thread appending while one appends is refused the same way: an agent is driven by
one thread at a time.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from holon import records as r
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.ledger import writer as ledger_writer
from holon.projections import verify_derivations
from holon.runtime import Agent, Turn
from holon.runtime import core as core_module
from tests.runtime_support import Tick

# --------------------------------------------------------------------------- cut short anywhere


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="rv3", clock=Tick())


def _work(turn: Turn) -> None:
    # Enough for the post-turn refresh to derive a working-memory delta.
    turn.add_work_item("w1", "ship it", state="active")
    turn.record_decision("d1", "use blue")


def _assert_whole(path: Path) -> list[r.Record]:
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok
        records = list(ledger.read(0))
    report = verify_derivations(records)
    assert report.ok, report
    return records


def _reopen_and_use(path: Path) -> Agent:
    agent = Agent.open(path, clock=Tick())
    with agent.turn(input="after") as turn:
        turn.context()
        turn.record_message("fine")
    assert turn.summary is not None and turn.summary.outcome == "completed"
    return agent


def test_an_interrupt_that_cuts_a_flush_short_is_what_leaves_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C during the fsync of turn.context() failed the ledger writer; the turn's end
    # then raised "an earlier write failed" out of the `with` block, so the daemon's
    # `except KeyboardInterrupt` (its shutdown path) never saw the interrupt.
    real_sync = ledger_writer.sync_file

    def interrupted(fd: int) -> None:
        monkeypatch.setattr(ledger_writer, "sync_file", real_sync)
        raise KeyboardInterrupt

    with _agent(tmp_path / "l") as agent:
        with pytest.raises(KeyboardInterrupt), agent.turn(input="one") as turn:
            _work(turn)
            monkeypatch.setattr(ledger_writer, "sync_file", interrupted)
            turn.context()
        with pytest.raises(UsageError, match="turn 1 is still open in ledger"):
            agent.turn(input="two")
    _assert_whole(tmp_path / "l")
    with _reopen_and_use(tmp_path / "l") as agent:
        assert agent.report.interrupted_turn == 1
    _assert_whole(tmp_path / "l")


def test_a_post_turn_refresh_cut_short_stops_the_agent_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Interrupted after turn_ended and before its derived records, the agent let the next
    # turn start: the refresh of turn 1 was then missing for good and `holon verify`
    # reported the ledger divergent ("expected a derived working_memory_delta").
    real_refresh = core_module.derived_after

    def interrupted(state: object, record: r.Record) -> tuple[r.Record, ...]:
        monkeypatch.setattr(core_module, "derived_after", real_refresh)
        raise KeyboardInterrupt

    with _agent(tmp_path / "l") as agent:
        with pytest.raises(KeyboardInterrupt), agent.turn(input="one") as turn:
            _work(turn)
            turn.context()
            monkeypatch.setattr(core_module, "derived_after", interrupted)
        head = agent.ledger.head()
        with pytest.raises(UsageError, match=r"refresh of turn 1 was cut short.*open the ledger again"):
            agent.turn(input="two")
        with pytest.raises(UsageError, match="cut short"):
            agent.checkpoint()
        assert agent.ledger.head() == head
    with _reopen_and_use(tmp_path / "l") as agent:
        assert agent.report.completed_refresh == 1 and agent.report.interrupted_turn is None
    _assert_whole(tmp_path / "l")


def test_an_interrupt_between_an_append_and_its_fold_stops_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The record was in the ledger but not in the live state; the turn's refresh was
    # derived from that state, so the ledger failed verification from then on.
    real_apply = core_module.apply

    def interrupted(state: object, record: r.Record) -> object:
        if isinstance(record.body, r.Decision):
            monkeypatch.setattr(core_module, "apply", real_apply)
            raise KeyboardInterrupt
        return real_apply(state, record)  # type: ignore[arg-type]

    with _agent(tmp_path / "l") as agent:
        monkeypatch.setattr(core_module, "apply", interrupted)
        with pytest.raises(KeyboardInterrupt), agent.turn(input="one") as turn:
            turn.context()
            _work(turn)
        with pytest.raises(UsageError, match="was appended but not folded"):
            agent.turn(input="two")
    _assert_whole(tmp_path / "l")
    with _reopen_and_use(tmp_path / "l") as agent:
        assert agent.report.interrupted_turn == 1
        assert agent.state.decisions  # the decision appended before the interrupt is folded now
    _assert_whole(tmp_path / "l")


# --------------------------------------------------------------------------- a second thread


def test_a_second_thread_appending_while_one_appends_is_refused(tmp_path: Path) -> None:
    # Nothing stopped two threads appending at once: run with a tiny switch interval, a
    # thread recording messages beside one running tools broke the hash chain
    # ("broken hash chain: frame commits to ..."), and the ledger no longer opened.
    inside, release = threading.Event(), threading.Event()
    tick = Tick()
    hold = [False]

    def clock() -> int:
        if hold[0] and threading.current_thread() is not threading.main_thread():
            hold[0] = False
            inside.set()
            assert release.wait(timeout=60)
        return tick()

    with Agent.open(tmp_path / "l", agent_id="rv3", clock=clock) as agent, agent.turn(input="one") as turn:
        turn.context()
        hold[0] = True
        other = threading.Thread(target=turn.record_message, args=("from the other thread",))
        other.start()
        assert inside.wait(timeout=60)  # the other thread is inside its append now
        head = agent.ledger.head()
        try:
            with pytest.raises(UsageError, match="in use by another thread; nothing was recorded"):
                turn.record_message("from the main thread")
            with pytest.raises(UsageError, match="in use by another thread"):
                turn.tool("sh", {"cmd": "ls"})
            assert agent.ledger.head() == head
        finally:
            release.set()
            other.join()
        turn.record_message("after the hand-back")
    records = _assert_whole(tmp_path / "l")
    texts = [rec.body.text for rec in records if isinstance(rec.body, r.Message)]
    assert texts == ["one", "from the other thread", "after the hand-back"]
