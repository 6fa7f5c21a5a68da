"""Review 23 of the offline audit: Parquet exports in seq order and byte-stable; fleets of small ledgers."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb

from benchmarks.audit import generate
from holon.audit import export_parquet

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
        for row in duckdb.sql(f"SELECT seq FROM read_parquet('{first}/records/*/*.parquet')").fetchall()
    ]
    assert seqs == list(range(records))
