"""Third audit review: ledgers from before the ledger checked ``ts``, and an empty ledger."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.audit import REPORTS, TABLES, connect, run_sql
from holon.audit.reports import run_report
from holon.cli import main
from tests.ledger_support import without_ts_check
from tests.test_audit_support import write_ledger

_LOW, _HIGH = -(2**63), 2**63 - 1


def _call(call_id: str, intent_ts: int, result_ts: int, turn: int) -> list[r.Record]:
    return [
        r.Record(body=r.ToolIntent(call_id=call_id, tool="bash", args={"x": 1}), ts=intent_ts, turn=turn),
        r.Record(body=r.ToolResult(call_id=call_id, tool="bash", status="ok"), ts=result_ts, turn=turn),
    ]


def _legacy_ledger(path: Path) -> None:
    """Turns and calls whose ts are 2**64 - 1 ms apart, beside ordinary ones."""
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=_LOW, turn=0),
        *_call("far", _LOW, _HIGH, 0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=_HIGH, turn=0),
        r.Record(body=r.TurnStarted(trigger="user"), ts=1_000, turn=1),
        *_call("near", 1_000, 1_250, 1),
        *_call("negative", -500, -200, 1),  # before 1970, but the difference fits
        r.Record(body=r.TurnEnded(outcome="completed"), ts=1_300, turn=1),
    ]
    with without_ts_check():
        write_ledger(path, "legacy", records)


def test_durations_of_timestamps_2_63_apart_are_null_not_an_overflow(tmp_path: Path) -> None:
    # `holon audit` failed for the whole ledger: "Overflow in subtraction of INT64", an
    # AuditError naming no record.
    _legacy_ledger(tmp_path / "l")
    con = connect(tmp_path / "l")
    calls = run_sql(con, "SELECT call_id, duration_ms FROM tool_calls ORDER BY intent_seq").rows
    assert calls == [("far", None), ("near", 250), ("negative", 300)]
    turns = run_sql(con, "SELECT turn, started_ts, ended_ts, duration_ms FROM turns").rows
    assert turns == [(0, _LOW, _HIGH, None), (1, 1_000, 1_300, 300)]
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE tool_calls)").fetchall())
    assert types["duration_ms"] == "BIGINT"  # the schema did not widen
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE turns)").fetchall())
    assert types["duration_ms"] == "BIGINT"
    for name in REPORTS:  # every report runs over them too
        run_report(con, name)


def test_the_cli_audits_a_legacy_ledger_and_verify_warns_about_its_ts(tmp_path: Path) -> None:
    _legacy_ledger(tmp_path / "l")
    runner = CliRunner()
    audited = runner.invoke(main, ["audit", str(tmp_path / "l"), "--report", "tools", "--json"])
    assert audited.exit_code == 0, audited.output
    verified = runner.invoke(main, ["verify", str(tmp_path / "l")])
    assert verified.exit_code == 0, verified.output
    assert "holon: warning: 6 record(s) hold a ts outside 0..99999999999999" in verified.stderr
    assert "seq 0 (ts -9223372036854775808)" in verified.stderr


def test_duplicates_compares_turn_numbers_2_63_apart_without_overflow(tmp_path: Path) -> None:
    # Two calls with the same arguments at turns -2**63 and 2**63 - 1: `turn - previous_turn`
    # overflowed in the duplicates report.
    records = [*_call("a", 1, 2, _LOW), *_call("b", 3, 4, _HIGH)]
    write_ledger(tmp_path / "l", "a", records)
    con = connect(tmp_path / "l")
    rows = run_report(con, "duplicates", window=5).rows
    assert rows == []


def test_an_empty_ledger_audits_to_empty_tables_and_reports(tmp_path: Path) -> None:
    write_ledger(tmp_path / "l", "empty", [])
    con = connect(tmp_path / "l")
    assert run_sql(con, "SELECT agent_id, records, head_seq FROM agents").rows == [("empty", 0, -1)]
    for name in TABLES:
        if name != "agents":
            assert run_sql(con, f"SELECT count(*) FROM {name}").rows == [(0,)], name
    for name in REPORTS:
        assert run_report(con, name).rows == [], name
    listed = CliRunner().invoke(main, ["audit", str(tmp_path / "l"), "--json"])
    assert listed.exit_code == 0, listed.output
    assert {row["table"]: row["rows"] for row in json.loads(listed.stdout)}["records"] == 0


def test_ctrl_c_stops_a_running_query(tmp_path: Path) -> None:
    # DuckDB never returns to Python while a statement runs, so SIGINT only took effect
    # when the query ended: a runaway query could only be killed.
    con = duckdb.connect()
    stopped = threading.Event()
    watchdog_fired = []

    def keep_interrupting() -> None:
        # SIGINT until the query stops; past a minute, stop it another way and fail.
        for _ in range(300):
            if stopped.wait(0.2):
                return
            os.kill(os.getpid(), signal.SIGINT)
        watchdog_fired.append(True)
        con.interrupt()

    # Outside the query, a SIGINT only counts here (a KeyboardInterrupt would end pytest).
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    sender = threading.Thread(target=keep_interrupting)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sql(con, "SELECT sum(a.range * 2 + 1) FROM range(100000000000) a")
    finally:
        stopped.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
        con.close()
    assert not watchdog_fired
