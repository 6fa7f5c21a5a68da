"""Review 23 of the offline audit: Parquet exports in seq order and byte-stable; fleets of small ledgers."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest

from benchmarks.audit import generate
from holon import records as r
from holon.audit import TABLES, AuditError, connect, export_parquet
from holon.audit import tables as audit_tables
from holon.audit.extract import Chunk
from holon.audit.tables import plan_jobs
from tests.test_audit_support import session_records, write_ledger

# --------------------------------------------------------------------------- Parquet order


def _digests(out: Path) -> dict[str, str]:
    files = sorted(out.rglob("*.parquet"))
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_parquet_export_keeps_each_agents_rows_in_seq_order_and_is_byte_stable(tmp_path: Path) -> None:
    # Past one row group (122,880 rows), DuckDB's partitioned COPY wrote rows in the order
    # its threads handed them over: the records of an agent came out shuffled, and two
    # exports of the same ledger differed in their bytes.
    ledger = tmp_path / "big"
    records = generate(ledger, 130_000)
    first, second = tmp_path / "one", tmp_path / "two"
    export_parquet([ledger], first)
    export_parquet([ledger], second)
    assert _digests(first) == _digests(second)
    seqs = [
        row[0]
        for row in duckdb.sql(f"SELECT seq FROM read_parquet('{first}/records/*/*/*.parquet')").fetchall()
    ]
    assert seqs == list(range(records))


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
    build: Callable[..., Any] = audit_tables._build

    def counting(con: duckdb.DuckDBPyConnection, fleet: Any, tmp: Path, done: Any = None) -> None:
        counts.append(len(list(tmp.rglob("*.jsonl"))))
        build(con, fleet, tmp, done)

    monkeypatch.setattr(audit_tables, "_build", counting)
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
