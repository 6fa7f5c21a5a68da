"""Fourth audit review: Ctrl-C during the load, and what `holon verify --json` says."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.audit import connect, tables
from holon.audit.tables import TABLES, Table
from holon.cli import EXIT_INTERRUPTED, main
from tests.test_audit_support import write_ledger

# A statement that runs for hours unless interrupted.
_RUNAWAY = "SELECT sum(a.range * 2 + 1) AS s FROM range(100000000000) a"


def _small_ledger(path: Path) -> Path:
    records = [
        r.Record(body=r.TurnStarted(trigger="user"), ts=1, turn=0),
        r.Record(body=r.Message(role="user", text="hello"), ts=2, turn=0),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=3, turn=0),
    ]
    write_ledger(path, "a", records)
    return path


@pytest.fixture
def runaway_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[duckdb.DuckDBPyConnection]]:
    """One more audit table whose build never ends; yields the load's connections (for the watchdog)."""
    monkeypatch.setitem(TABLES, "runaway", Table("runaway", "a statement that does not end", {}, _RUNAWAY))
    opened: list[duckdb.DuckDBPyConnection] = []
    open_database = tables._open_database

    def recording(database: Any, memory_limit: str | None) -> duckdb.DuckDBPyConnection:
        con = open_database(database, memory_limit)
        opened.append(con)
        return con

    monkeypatch.setattr(tables, "_open_database", recording)
    yield opened


def _interrupting(call: Callable[[], Any], opened: list[duckdb.DuckDBPyConnection]) -> tuple[Any, bool]:
    """Run ``call`` while another thread sends SIGINT until it returns; (its result, watchdog fired).

    Past a minute the watchdog stops the statement another way (``interrupt()`` on the
    load's connection): only a failing test ever waits for it.
    """
    stopped = threading.Event()
    fired: list[bool] = []

    def keep_interrupting() -> None:
        for _ in range(300):
            if stopped.wait(0.2):
                return
            os.kill(os.getpid(), signal.SIGINT)
        fired.append(True)
        for con in opened:
            con.interrupt()

    # Outside a statement, a SIGINT only counts here (a KeyboardInterrupt would end pytest).
    previous = signal.signal(signal.SIGINT, lambda signum, frame: None)
    sender = threading.Thread(target=keep_interrupting)
    sender.start()
    try:
        result = call()
    finally:
        stopped.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    return result, bool(fired)


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("holon-audit"))


# --------------------------------------------------------------------------- Ctrl-C in the load


def test_ctrl_c_stops_building_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runaway_table: list[duckdb.DuckDBPyConnection]
) -> None:
    # A table of a big ledger takes DuckDB seconds to build (minutes when it spills); Ctrl-C
    # waited for the statement to end, and then DuckDB's own check of the signal raised
    # RuntimeError("Query interrupted"), which `holon audit` reported as a bug in holon.
    ledger = _small_ledger(tmp_path / "l")
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spool))
    database = tmp_path / "audit.duckdb"

    def load() -> type[BaseException] | None:
        try:
            connect(ledger, database=database)
        except BaseException as exc:  # which one is the point
            return type(exc)
        return None

    raised, fired = _interrupting(load, runaway_table)
    assert not fired
    assert raised is KeyboardInterrupt
    assert not database.exists() and not Path(f"{database}.wal").exists()  # no half-built file
    assert _leftovers(spool) == []  # the extracted JSON is gone too


def test_ctrl_c_in_the_cli_load_exits_130_and_leaves_no_database_file(
    tmp_path: Path, runaway_table: list[duckdb.DuckDBPyConnection]
) -> None:
    ledger = _small_ledger(tmp_path / "l")
    database = tmp_path / "audit.duckdb"
    runner = CliRunner()
    result, fired = _interrupting(
        lambda: runner.invoke(main, ["audit", str(ledger), "--database", str(database)]), runaway_table
    )
    assert not fired
    assert result.exit_code == EXIT_INTERRUPTED, result.output
    assert result.stderr == "holon: error: interrupted\n"
    assert not database.exists()


def _stuck_chunk(started: Path) -> Callable[..., Any]:
    """An extract_chunk for the worker processes that says it started, then never ends."""

    def stuck(chunk: Any, out_dir: str) -> Any:
        (started / f"{os.getpid()}-{chunk.from_seq}").touch()
        threading.Event().wait()

    return stuck


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers inherit the patch by fork")
def test_ctrl_c_while_workers_extract_stops_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The parent stopped on Ctrl-C, but leaving the process pool waited for every chunk in
    # flight to be extracted (and a SIGINT sent to the parent alone, as by `kill -INT` or a
    # supervisor, never reaches the workers): seconds per chunk on a big ledger.
    records = [r.Record(body=r.Message(role="user", text=f"m{i}"), ts=i) for i in range(400)]
    write_ledger(tmp_path / "l", "a", records, segment_bytes=4 << 10)
    started = tmp_path / "started"
    started.mkdir()
    monkeypatch.setattr(tables, "extract_chunk", _stuck_chunk(started))
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(spool))
    fired: list[bool] = []
    stopped = threading.Event()

    def interrupt_once_extracting() -> None:
        # One SIGINT once a worker is extracting; past a minute, end the workers another way.
        for _ in range(300):
            if stopped.wait(0.2):
                return
            if any(started.iterdir()):
                os.kill(os.getpid(), signal.SIGINT)
                break
        else:
            fired.append(True)
        if not stopped.wait(60):
            fired.append(True)
            for child in multiprocessing.active_children():
                child.kill()

    sender = threading.Thread(target=interrupt_once_extracting)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            connect(tmp_path / "l", workers=2, chunk_records=50)
    finally:
        stopped.set()
        sender.join()
    assert not fired
    assert multiprocessing.active_children() == []
    assert _leftovers(spool) == []
