"""Bad use of the Agent gets a clear error from holon.errors and leaves the ledger unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from holon import records as r
from holon.errors import InvalidRecord, LedgerLocked, NotALedger, UsageError
from holon.ledger import Ledger
from holon.runtime import Agent
from tests.ledger_support import child_env, without_ts_check
from tests.runtime_support import ROOT, Tick


def _agent(path: Path) -> Agent:
    return Agent.open(path, agent_id="e1", clock=Tick())


def test_turns_do_not_nest(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="outer") as outer:
        seq = agent.seq
        with pytest.raises(UsageError, match=f"turn {outer.index} is still open"):
            agent.turn(input="inner")
        assert agent.seq == seq
        outer.record_message("the outer turn goes on")


def test_recording_outside_a_turn_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="one") as turn:
            pass
        seq = agent.seq
        for attempt in (
            lambda: turn.record_message("late"),
            lambda: turn.tool("bash", {"cmd": "ls"}),
            turn.context,
            lambda: turn.record_plan([r.PlanStep(id="s", text="t")]),
        ):
            with pytest.raises(UsageError, match="outside a turn"):
                attempt()
        assert agent.seq == seq


def test_runtime_records_cannot_be_forged_through_a_turn(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        seq = agent.seq
        with pytest.raises(UsageError, match="written by the runtime"):
            turn.record(r.TurnEnded(outcome="completed"))
        with pytest.raises(UsageError, match=r"turn\.tool"):
            turn.record(r.ToolResult(call_id="c", tool="bash", status="ok"))
        assert agent.seq == seq


def test_a_second_process_cannot_open_the_ledger_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "l"
    code = (
        "import sys\n"
        "from holon.errors import LedgerLocked\n"
        "from holon.runtime import Agent\n"
        "try:\n"
        f"    Agent.open({str(path)!r})\n"
        "except LedgerLocked as exc:\n"
        "    print(exc); sys.exit(3)\n"
    )
    with _agent(path) as agent:
        head = agent.seq
        proc = subprocess.run(
            [sys.executable, "-c", code],
            check=False,
            capture_output=True,
            text=True,
            env=child_env(),
            cwd=ROOT,
        )
        assert proc.returncode == 3, proc.stderr
        assert "locked for writing by process" in proc.stdout
        with pytest.raises(LedgerLocked):  # and not from this process either
            Agent.open(path)
        assert agent.seq == head
    with Agent.open(path) as again:  # released on close
        assert again.seq == head


def test_a_path_that_is_not_a_ledger_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("buy milk")
    with pytest.raises(NotALedger):
        Agent.open(folder, agent_id="e1")
    assert sorted(p.name for p in folder.iterdir()) == ["todo.txt"]
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(NotALedger, match="is a file"):
        Agent.open(file, agent_id="e1")


def test_creating_needs_an_agent_id_and_resuming_needs_the_right_one(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="agent_id"):
        Agent.open(tmp_path / "new")
    assert not (tmp_path / "new").exists()
    _agent(tmp_path / "l").close()
    with pytest.raises(UsageError, match="belongs to agent 'e1'"):
        Agent.open(tmp_path / "l", agent_id="someone-else")
    Agent.open(tmp_path / "l").close()  # the lock was released by the failed open


def test_a_closed_agent_refuses_turns(tmp_path: Path) -> None:
    agent = _agent(tmp_path / "l")
    agent.close()
    with pytest.raises(UsageError, match="closed"):
        agent.turn(input="x")


def test_checkpointing_inside_a_turn_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="x"), pytest.raises(UsageError, match="between"):
        agent.checkpoint()


def test_an_invalid_record_is_refused_before_it_reaches_the_ledger(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent, agent.turn(input="x") as turn:
        seq = agent.seq
        with pytest.raises(InvalidRecord, match="role"):
            turn.record_message("hi", role="robot")
        with pytest.raises(InvalidRecord):
            turn.tool("bash", {"cmd": object()})
        assert agent.seq == seq
        turn.record_message("still fine")
    with Ledger.open(tmp_path / "l", readonly=True) as ledger:  # and the ledger reads back cleanly
        texts = [rec.body.text for rec in ledger.read(0) if isinstance(rec.body, r.Message)]
    assert texts == ["x", "still fine"]


def test_an_idempotency_key_reused_for_a_different_call_is_refused(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        with agent.turn(input="refund") as turn:
            turn.tool("refund", {"order": "8812", "amount": 5}, idempotency_key="refund-8812").run(
                lambda: "ok"
            )
        with agent.turn(input="again") as turn:
            seq = agent.seq
            with pytest.raises(UsageError, match="a key names one effect"):
                turn.tool("refund", {"order": "8812", "amount": 50}, idempotency_key="refund-8812")
            with pytest.raises(UsageError, match="a key names one effect"):
                turn.tool("charge", {"order": "8812", "amount": 5}, idempotency_key="refund-8812")
            assert agent.seq == seq
            same = turn.tool("refund", {"amount": 5, "order": "8812"}, idempotency_key="refund-8812")
            assert same.replayed and same.output == "ok"


def test_a_bad_turn_input_appends_nothing(tmp_path: Path) -> None:
    with _agent(tmp_path / "l") as agent:
        seq = agent.seq
        with pytest.raises(InvalidRecord):
            agent.turn(input=12345)  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="input role"):
            agent.turn(input="hi", role="robot")
        assert agent.seq == seq and agent.current_turn is None
        with agent.turn(input="a real input") as turn:  # and the next turn opens normally
            assert turn.index == 1


def test_a_missing_ledger_is_not_created_when_create_is_false(tmp_path: Path) -> None:
    with pytest.raises(NotALedger, match="create=False"):
        Agent.open(tmp_path / "typo", agent_id="e1", create=False)
    assert not (tmp_path / "typo").exists()
    with _agent(tmp_path / "l"):
        pass
    with Agent.open(tmp_path / "l", create=False) as agent:  # an existing one opens as usual
        assert agent.agent_id == "e1"


def test_a_ledger_is_not_created_inside_another_ledger(tmp_path: Path) -> None:
    with _agent(tmp_path / "l"):
        pass
    with pytest.raises(UsageError, match="inside the ledger at"):
        Agent.open(tmp_path / "l" / "blobs" / "x", agent_id="e2")
    assert not (tmp_path / "l" / "blobs" / "x").exists()


def test_a_legacy_out_of_range_ts_does_not_become_the_floor_of_later_timestamps(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A ledger written before the ledger checked ts may end in a nanosecond reading; as the
    # floor of later timestamps it made every append after it fail (the ledger refuses it).
    path = tmp_path / "l"
    with _agent(path) as agent, agent.turn(input="first"):
        pass
    with without_ts_check(), Ledger.open(path) as ledger:
        bad = ledger.append(
            r.Record(body=r.Message(role="user", text="clocked in ns"), ts=1_700_000_000_000_000_000)
        )
    with caplog.at_level("WARNING"), Agent.open(path, clock=Tick()) as agent:
        with agent.turn(input="second") as turn:
            turn.record_message("still recording")
        assert r.MIN_TS <= agent.last_ts <= r.MAX_TS
    assert f"seq {bad} has ts 1700000000000000000, outside" in caplog.text
