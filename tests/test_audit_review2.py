"""Audit review 2: loading in bounded memory, integers beyond 64 bits, odd-but-valid ledgers."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner

from holon import records as r
from holon.audit import TABLES, AuditError, connect
from holon.audit.tables import MAX_CHUNK_RECORDS, default_chunk_records
from holon.cli import main
from tests.ledger_support import without_ts_check
from tests.test_audit_support import session_records, write_ledger


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
        assert [name for (name,) in names] == sorted(TABLES)
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


# --------------------------------------------------------------------------- integers beyond 64 bits


@pytest.mark.parametrize(
    ("record", "field", "value"),
    [
        (
            r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**64 - 1), ts=2),
            "body.exit_code",
            2**64 - 1,
        ),
        (r.Record(body=r.Message(role="user", text="hi"), ts=2**63), "ts", 2**63),
        (
            r.Record(
                body=r.PromptRendered(
                    working_memory_revision=0,
                    compression_epoch=0,
                    cache_key="k",
                    prompt_hash="h",
                    total_tokens=1,
                    budget=1,
                    estimator="e",
                    omitted=(r.Omission(section="history", ref="ledger:0", reason="r", tokens=2**63),),
                ),
                ts=2,
            ),
            "body.omitted[0].tokens",
            2**63,
        ),
    ],
)
def test_an_integer_beyond_64_bits_is_an_error_naming_seq_and_field(
    tmp_path: Path, record: r.Record, field: str, value: int
) -> None:
    # The ledger holds integers up to 2**64 - 1; the audit's integer columns are BIGINT.
    # The error named the seq but not which of the record's fields held the value.
    path = tmp_path / "ledger"
    with without_ts_check():  # a ts beyond 64 bits is refused on append now; older ledgers hold them
        write_ledger(path, "a", [r.Record(body=r.Message(role="user", text="hi"), ts=1), record])
    with pytest.raises(AuditError) as caught:
        connect(path)
    message = str(caught.value)
    assert "seq 1" in message and f"{value} in {field}," in message and str(path.resolve()) in message


def test_cli_parquet_export_takes_a_memory_limit(session_ledger: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "pq"
    small = runner.invoke(main, ["export", str(session_ledger), str(out), "--format", "parquet",
                                 "--memory-limit", "10MB"])
    assert small.exit_code == 2 and "give DuckDB more memory" in small.output
    done = runner.invoke(main, ["export", str(session_ledger), str(out), "--format", "parquet",
                                "--memory-limit", "500MB"])
    assert done.exit_code == 0, done.output
    assert any(out.rglob("*.parquet"))
    jsonl = runner.invoke(main, ["export", str(session_ledger), str(tmp_path / "x.jsonl"),
                                 "--memory-limit", "500MB"])
    assert jsonl.exit_code == 2 and "--memory-limit is for --format parquet" in jsonl.output
