"""Findings of a second adversarial review of the runtime facade, each pinned by a test.

A daemon must be able to trust what leaves a turn's `with` block: the daemon's own
exception or a holon error about its input, never an environmental failure of a cache,
and no record that says something the runtime does not know.
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from holon.errors import InvalidRecord, UsageError
from holon.ledger import Ledger
from holon.runtime import Agent, AgentConfig
from holon.runtime import checkpoints as ck
from tests.runtime_support import Tick


def test_a_checkpoint_that_cannot_be_written_does_not_fail_the_turn_that_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A full disk (or a read-only checkpoints/) raised OSError out of the turn's `with`
    # block after the turn was recorded: the daemon's own exception was replaced, the
    # summary lost, and a partial temp file stayed behind.
    real_write = ck.os.write

    def full(fd: int, data: bytes | memoryview) -> int:
        real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, "No space left on device")

    config = AgentConfig(checkpoint_every=1)
    with Agent.open(tmp_path / "l", agent_id="rv2", clock=Tick(), config=config) as agent:
        with agent.turn(input="one"):
            pass
        monkeypatch.setattr(ck.os, "write", full)
        with caplog.at_level(logging.WARNING, logger="holon.runtime"):
            with pytest.raises(ValueError, match="the daemon's own"), agent.turn(input="two") as turn:
                raise ValueError("the daemon's own error")
            with agent.turn(input="three") as ok:
                pass
        assert turn.summary is not None and turn.summary.outcome == "failed"
        assert turn.summary.checkpoint_seq is None
        assert ok.summary is not None and ok.summary.outcome == "completed"
        assert "checkpoint after turn 2 not written" in caplog.text
        assert not [p.name for p in (tmp_path / "l" / "checkpoints").iterdir() if p.name.endswith(".tmp")]
        # Asked for explicitly, the failure is the caller's to see.
        with pytest.raises(OSError, match="No space left"):
            agent.checkpoint()
        monkeypatch.undo()
    with Agent.open(tmp_path / "l", clock=Tick(), config=config) as agent:
        assert agent.report.checkpoint_seq is not None and agent.report.rejected == ()
        assert agent.state.turn is not None and agent.state.turn.index == 3


def test_a_value_run_cannot_record_leaves_the_call_open_not_an_error(tmp_path: Path) -> None:
    # execute() ran the effect and returned bytes (subprocess output not decoded): the
    # InvalidRecord was recorded as an `error` result, which says the effect did not
    # happen, and the key then replayed that error; a daemon retrying under a new key
    # deployed twice.
    with Agent.open(tmp_path / "l", agent_id="rv2", clock=Tick()) as agent:
        with agent.turn(input="deploy") as turn:
            call = turn.tool("sh", {"cmd": "make deploy"}, idempotency_key="deploy:1")
            head = agent.ledger.head()
            for value in (b"deployed\n", ("deployed", "0"), ("a", 0, "b"), "caf\udce9"):
                with pytest.raises(InvalidRecord, match=r"ran, but what it returned cannot be recorded"):
                    call.run(lambda value=value: value)  # type: ignore[misc]
            assert agent.ledger.head() == head and not call.done
            call.finish("deployed\n")
            assert call.result is not None and call.result.status == "ok"
            # An exception from execute() is still an error result, and propagates.
            failing = turn.tool("sh", {"cmd": "false"})
            with pytest.raises(RuntimeError, match="boom"):
                failing.run(lambda: (_ for _ in ()).throw(RuntimeError("boom")))
            assert failing.result is not None and failing.result.status == "error"
            assert failing.run(lambda: "again") is failing.result
            # Left open, the turn's end records the outcome as unknown.
            lost = turn.tool("sh", {"cmd": "make migrate"}, idempotency_key="migrate:1")
            with pytest.raises(InvalidRecord):
                lost.run(lambda: b"migrated")  # type: ignore[arg-type,return-value]
        assert lost.result is not None and lost.result.status == "unknown"
        assert agent.recorded_call("deploy:1") is not None
        assert agent.recorded_call("deploy:1").status == "ok"  # type: ignore[union-attr]


def test_a_clock_reading_that_is_not_integer_milliseconds_is_named_and_does_not_stick(tmp_path: Path) -> None:
    # `clock=lambda: time.time() * 1000` (a float) or an overflowing reading was kept as
    # the floor of every later timestamp: each append failed as an InvalidRecord about
    # field `ts`, and the agent stayed unusable after the clock was right again.
    # A microsecond and a nanosecond reading of today, and a negative one, too: each would
    # have stamped the append-only ledger wrong for good.
    readings: list[object] = [1.7e12, 1 << 64, True, 1_732_300_000_000_000, 1_732_300_000_000_000_000, -5]
    tick = Tick()

    def clock() -> int:
        return readings.pop(0) if readings else tick()  # type: ignore[return-value]

    with Agent.open(tmp_path / "l", agent_id="rv2", clock=clock) as agent:
        head = agent.ledger.head()
        for _ in range(6):
            with pytest.raises(UsageError, match=r"clock returned .*(integer milliseconds|not milliseconds)"):
                agent.turn(input="hello")
            assert agent.ledger.head() == head and agent.current_turn is None
        with agent.turn(input="hello") as turn:
            turn.record_message("hi")
        assert turn.summary is not None and turn.summary.outcome == "completed"
        assert agent.last_ts < 1 << 63


def test_a_turn_whose_end_could_not_be_recorded_is_not_nested_into_by_the_next(tmp_path: Path) -> None:
    # The clock failed (or returned garbage) as the turn ended: turn_ended was never
    # appended, yet the agent let the next turn start inside the open one; that turn
    # then stayed open in the ledger for good, and no open closed it.
    failing = [False]
    tick = Tick()

    def clock() -> int:
        if failing[0]:
            failing[0] = False
            raise RuntimeError("NTP unreachable")
        return tick()

    with Agent.open(tmp_path / "l", agent_id="rv2", clock=clock) as agent:
        with pytest.raises(RuntimeError, match="NTP"), agent.turn(input="one"):
            failing[0] = True
        head = agent.ledger.head()
        with pytest.raises(UsageError, match="turn 1 is still open in ledger"):
            agent.turn(input="two")
        assert agent.ledger.head() == head
    with Agent.open(tmp_path / "l", clock=clock) as agent:
        assert agent.report.interrupted_turn == 1
        with agent.turn(input="two") as turn:
            pass
        assert turn.index == 2
    with Ledger.open(tmp_path / "l", readonly=True) as ledger:
        ends = [(rec.turn, rec.kind) for rec in ledger.read(0) if rec.kind in ("turn_started", "turn_ended")]
    assert ends == [(1, "turn_started"), (1, "turn_ended"), (2, "turn_started"), (2, "turn_ended")]
