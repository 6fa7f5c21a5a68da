"""Loading ledgers into the audit's DuckDB: bounded memory, a database file, fleets, and Ctrl-C.

A worker holds one chunk of records decoded, so chunks are capped; a memory limit spills
outside the working directory and a load too big for it says to raise it; a database file
holds the tables the in-memory load does, and a failed or interrupted load leaves none
behind (and never one inside a ledger). A fleet of small ledgers is read into one file per
kind, and Ctrl-C stops a load, its workers or a running query at once.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.audit import TABLES, AuditError, connect, run_sql
from holon.audit import load as audit_load
from holon.audit.extract import Chunk
from holon.audit.load import MAX_CHUNK_RECORDS, default_chunk_records, plan_jobs
from holon.audit.models import MODELS
from holon.audit.tables import Table
from holon.cli import EXIT_INTERRUPTED, EXIT_USAGE, main
from holon.errors import UsageError
from holon.ledger import Ledger
from tests.cli_support import invoke, tree_bytes
from tests.ledger_support import AGENT, message
from tests.test_audit_support import fixture_records, session_records, small_ledger, write_ledger


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[Any, ...]]]:
    return {name: con.execute(f"SELECT * FROM {name}").fetchall() for name in TABLES}


@pytest.fixture(scope="module")
def session_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("session") / "ledger"
    records, blobs = session_records(40)
    write_ledger(path, "agent-s", records, blobs=blobs, segment_bytes=16 << 10)
    return path


# --------------------------------------------------------------------------- bounded loading


def test_default_chunks_are_capped_so_a_worker_holds_a_bounded_number_of_records() -> None:
    # A worker holds its chunk decoded: chunks of records / (2 * CPUs) made a 10M-record
    # ledger on 2 CPUs into 2.5M-record chunks, gigabytes per worker.
    assert default_chunk_records(10_000_000, 2) == MAX_CHUNK_RECORDS
    assert default_chunk_records(10**9, 1) == MAX_CHUNK_RECORDS


def test_tables_in_a_database_file_equal_the_in_memory_ones_and_reopen(
    session_ledger: Path, tmp_path: Path
) -> None:
    in_memory = _tables(connect(session_ledger, workers=1))
    database = tmp_path / "audit.duckdb"
    con = connect(session_ledger, workers=2, chunk_records=100, database=database)
    assert _tables(con) == in_memory
    con.close()
    reopened = duckdb.connect(str(database), read_only=True)
    try:
        assert _tables(reopened) == in_memory
        names = reopened.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        # the tables, and the models built from them (holon.audit.models)
        assert [name for (name,) in names] == sorted([*TABLES, *MODELS])
    finally:
        reopened.close()


def test_a_memory_limit_gives_the_same_tables_and_spills_outside_the_working_directory(
    session_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    in_memory = _tables(connect(session_ledger))
    con = connect(session_ledger, memory_limit="200MB")
    assert _tables(con) == in_memory
    limit, spill = con.execute(
        "SELECT current_setting('memory_limit'), current_setting('temp_directory')"
    ).fetchone() or (None, None)
    assert limit is not None and "MiB" in limit
    # DuckDB's default for an in-memory database is `.tmp` in the working directory.
    assert Path(spill).is_relative_to(tempfile.gettempdir()) and not Path(spill).is_relative_to(tmp_path)
    con.close()
    assert os.listdir(tmp_path) == []


def test_an_existing_database_file_is_refused_and_left_alone(session_ledger: Path, tmp_path: Path) -> None:
    database = tmp_path / "audit.duckdb"
    database.write_bytes(b"mine")
    with pytest.raises(AuditError, match="exists"):
        connect(session_ledger, database=database)
    assert database.read_bytes() == b"mine"


def test_a_memory_limit_duckdb_does_not_understand_is_an_audit_error(session_ledger: Path) -> None:
    with pytest.raises(AuditError, match="memory limit"):
        connect(session_ledger, memory_limit="lots")


def test_a_memory_limit_too_small_to_load_says_to_raise_it(session_ledger: Path) -> None:
    # DuckDB's read buffers (32 MiB) do not spill: its bare "Out of Memory Error" named no fix.
    with pytest.raises(AuditError, match=r"Out of Memory.*give DuckDB more memory \(--memory-limit"):
        connect(session_ledger, memory_limit="10MB")


def test_a_failed_load_into_a_database_file_leaves_no_file(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    huge = r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**63)
    write_ledger(path, "a", [r.Record(body=huge, ts=1)])
    database = tmp_path / "audit.duckdb"
    with pytest.raises(AuditError):
        connect(path, database=database)
    assert sorted(os.listdir(tmp_path)) == ["ledger"]


def test_cli_database_option_writes_a_file_holding_the_tables(session_ledger: Path, tmp_path: Path) -> None:
    database = tmp_path / "audit.duckdb"
    sql = "SELECT count(*) AS n FROM records"
    plain = CliRunner().invoke(main, ["audit", str(session_ledger), "--sql", sql, "--json"])
    to_file = CliRunner().invoke(
        main,
        [
            "audit",
            str(session_ledger),
            "--sql",
            sql,
            "--json",
            "--database",
            str(database),
            "--memory-limit",
            "256MB",
        ],
    )
    assert plain.exit_code == 0 and to_file.exit_code == 0, to_file.output
    assert to_file.stdout == plain.stdout
    con = duckdb.connect(str(database), read_only=True)
    try:
        assert _tables(con) == _tables(connect(session_ledger))
    finally:
        con.close()


def test_cli_parquet_export_takes_a_memory_limit(session_ledger: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "pq"
    small = runner.invoke(
        main, ["export", str(session_ledger), str(out), "--format", "parquet", "--memory-limit", "10MB"]
    )
    assert small.exit_code == 2 and "give DuckDB more memory" in small.output
    done = runner.invoke(
        main, ["export", str(session_ledger), str(out), "--format", "parquet", "--memory-limit", "500MB"]
    )
    assert done.exit_code == 0, done.output
    assert any(out.rglob("*.parquet"))
    jsonl = runner.invoke(
        main, ["export", str(session_ledger), str(tmp_path / "x.jsonl"), "--memory-limit", "500MB"]
    )
    assert jsonl.exit_code == 2 and "--memory-limit is for --format parquet" in jsonl.output


# ----------------------------------------------------------------- glob characters in the temporary directory


def test_a_temporary_directory_with_glob_characters_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # DuckDB reads the extracted files through a glob: a `[` in $TMPDIR made the pattern
    # match nothing, and the load failed with a raw DuckDB IOException.
    write_ledger(tmp_path / "ledger", "a", fixture_records("boundary_turn_cap"))
    odd = tmp_path / "tmp [1] *?"
    odd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(odd))
    con = connect(tmp_path / "ledger")
    assert run_sql(con, "SELECT count(*) FROM records").rows == [(len(fixture_records("boundary_turn_cap")),)]


# --------------------------------------------------------------------------- fleets of small ledgers


def _fleet(tmp_path: Path, agents: int) -> list[Path]:
    records, blobs = session_records(6)
    paths = []
    for i in range(agents):
        path = tmp_path / f"l{i}"
        # Each agent's records differ (its own text), so a row given to the wrong agent shows.
        own = [r.Record(body=r.Message(role="user", text=f"agent {i}"), ts=1, turn=None), *records]
        write_ledger(path, f"agent-{i}", own, blobs=blobs)
        paths.append(path)
    return paths


def _extracted_files(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Patch the table build to note how many JSON files the load extracted."""
    counts: list[int] = []
    build: Callable[..., Any] = audit_load._build

    def counting(con: duckdb.DuckDBPyConnection, fleet: Any, tmp: Path, done: Any = None) -> None:
        counts.append(len(list(tmp.rglob("*.jsonl"))))
        build(con, fleet, tmp, done)

    monkeypatch.setattr(audit_load, "_build", counting)
    return counts


def test_a_fleet_of_small_ledgers_is_read_into_one_file_per_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every ledger wrote a file per kind of its own, and DuckDB spends about a millisecond
    # on each file it reads: 300 ledgers of ~160 records took 12 s to load (2.6 s now).
    paths = _fleet(tmp_path, 12)
    counts = _extracted_files(monkeypatch)
    con = connect(paths)
    kinds = con.sql("SELECT count(DISTINCT kind) FROM records").fetchall()[0][0]
    assert counts == [kinds]
    # Each agent's rows are its own: the fleet's tables are the single loads, side by side.
    for path in (paths[0], paths[5], paths[-1]):
        alone = connect(path)
        agent = alone.sql("SELECT agent_id FROM agents").fetchall()[0][0]
        for table in TABLES:
            if table == "agents":
                continue
            query = f"SELECT * FROM {table} WHERE agent_id = ?"
            assert con.execute(query, [agent]).fetchall() == alone.execute(query, [agent]).fetchall(), table


def test_jobs_group_small_chunks_up_to_the_chunk_size_and_keep_big_ones_alone() -> None:
    def chunk(agent_ix: int, records: int) -> Chunk:
        return Chunk(agent_ix=agent_ix, path=f"l{agent_ix}", from_seq=0, to_seq=records, link_next=False)

    chunks = [chunk(0, 40), chunk(1, 50), chunk(2, 20), chunk(3, 300), chunk(4, 10), chunk(5, 0)]
    jobs = plan_jobs(chunks, 100)
    assert [[c.agent_ix for c in job] for job in jobs] == [[0, 1], [2], [3], [4, 5]]


def test_a_value_beyond_64_bits_in_a_shared_file_names_its_own_ledger(tmp_path: Path) -> None:
    paths = _fleet(tmp_path, 3)
    bad = tmp_path / "bad"
    write_ledger(
        bad,
        "agent-bad",
        [
            r.Record(body=r.Message(role="user", text="fine"), ts=1),
            r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**64 - 1), ts=2),
        ],
    )
    with pytest.raises(AuditError) as caught:
        connect([*paths[:2], bad, paths[2]])
    message = str(caught.value)
    assert f"cannot audit {bad.resolve()}: the tool_result record at seq 1 holds {2**64 - 1}" in message
    assert "body.exit_code" in message


# A statement that runs for hours unless interrupted.
_RUNAWAY = "SELECT sum(a.range * 2 + 1) AS s FROM range(100000000000) a"


@pytest.fixture
def runaway_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[duckdb.DuckDBPyConnection]]:
    """One more audit table whose build never ends; yields the load's connections (for the watchdog)."""
    monkeypatch.setitem(TABLES, "runaway", Table("runaway", "a statement that does not end", {}, _RUNAWAY))
    opened: list[duckdb.DuckDBPyConnection] = []
    open_database = audit_load._open_database

    def recording(database: Any, memory_limit: str | None) -> duckdb.DuckDBPyConnection:
        con = open_database(database, memory_limit)
        opened.append(con)
        return con

    monkeypatch.setattr(audit_load, "_open_database", recording)
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


# ----------------------------------------------------------------------- Ctrl-C: a query, a load, its workers


def test_ctrl_c_stops_a_running_query(tmp_path: Path) -> None:
    # DuckDB never returns to Python while a statement runs, so SIGINT only took effect
    # when the query ended: a runaway query could only be killed.
    con = duckdb.connect()

    def query() -> type[BaseException] | None:
        try:
            run_sql(con, _RUNAWAY)
        except BaseException as exc:  # which one is the point
            return type(exc)
        return None

    try:
        raised, fired = _interrupting(query, [con])
    finally:
        con.close()
    assert not fired
    assert raised is KeyboardInterrupt


def test_ctrl_c_stops_building_a_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runaway_table: list[duckdb.DuckDBPyConnection]
) -> None:
    # A table of a big ledger takes DuckDB seconds to build (minutes when it spills); Ctrl-C
    # waited for the statement to end, and then DuckDB's own check of the signal raised
    # RuntimeError("Query interrupted"), which `holon audit` reported as a bug in holon.
    ledger = small_ledger(tmp_path / "l")
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
    ledger = small_ledger(tmp_path / "l")
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
    monkeypatch.setattr(audit_load, "extract_chunk", _stuck_chunk(started))
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


# ---------------------------------------------------------------------- never a database file inside a ledger


@pytest.mark.parametrize("inside", ["audit.duckdb", "segments/audit.duckdb"])
def test_a_database_file_inside_the_ledger_is_refused_and_the_ledger_untouched(
    tmp_path: Path, inside: str
) -> None:
    # `holon audit L --database L/segments/audit.duckdb` wrote the DuckDB file (and its
    # .wal) into the ledger being audited, which audit promises never to write to.
    ledger = small_ledger(tmp_path / "l")
    before = tree_bytes(ledger)
    result = invoke("audit", ledger, "--database", ledger / inside)
    assert result.exit_code == EXIT_USAGE, result.output
    assert f"audit database {ledger / inside} is inside the ledger {ledger}" in result.stderr
    assert tree_bytes(ledger) == before
    with pytest.raises(UsageError):
        connect([tmp_path / "other-ledger-first", ledger], database=ledger / inside)
    assert tree_bytes(ledger) == before


# --------------------------------------------------------------------------- a negative memory limit


def test_connect_refuses_a_negative_memory_limit_before_loading(tmp_path: Path) -> None:
    # DuckDB reads "-5GB" as no limit at all; connect passed it on.
    from holon.audit import AuditError, connect  # noqa: PLC0415

    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    with pytest.raises(AuditError, match="'-5GB' is negative"):
        connect(path, memory_limit="-5GB")
