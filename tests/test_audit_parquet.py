"""Parquet export: every table, partitioned by agent, reads back with the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from holon.audit import TABLES, AuditError, connect, export_parquet
from tests.test_audit_support import fixture_records, session_records, write_ledger

# Agent ids are free text: the partition directory must survive '/', '=' and spaces.
AGENTS = ("agent-7", "ops/agent=2 b")


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("parquet")
    records, blobs = session_records(30)
    write_ledger(root / "one", AGENTS[0], records, blobs=blobs)
    write_ledger(root / "two", AGENTS[1], fixture_records("session_multi_work"))
    return [root / "one", root / "two"]


def _rows(con: duckdb.DuckDBPyConnection, source: str, columns: list[str]) -> list[tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    return con.execute(f"SELECT {cols} FROM {source} ORDER BY ALL").fetchall()


def test_export_round_trips_every_table(ledgers: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    files = export_parquet(ledgers, out)
    assert files and all(f.suffix == ".parquet" and f.is_relative_to(out) for f in files)
    con = connect(ledgers)
    reader = duckdb.connect()
    for name, table in TABLES.items():
        columns = list(table.columns)
        want = _rows(con, name, columns)
        assert want, f"{name} has no rows: the round trip would prove nothing"
        # Any Parquet engine: a Hive-partitioned tree, agent_id restored from the directory.
        source = f"read_parquet('{out / name}/*/*.parquet', hive_partitioning = true)"
        assert _rows(reader, source, columns) == want, name
        agents = {d.name for d in (out / name).iterdir()}
        assert len(agents) == len({row[columns.index("agent_id")] for row in want}), name
    records = f"read_parquet('{out}/records/*/*.parquet', hive_partitioning = true)"
    found = reader.execute(f"SELECT DISTINCT agent_id FROM {records} ORDER BY 1").fetchall()
    assert [row[0] for row in found] == sorted(AGENTS)


def test_parquet_files_are_zstd_compressed(ledgers: list[Path], tmp_path: Path) -> None:
    files = export_parquet(ledgers[:1], tmp_path / "out")
    codecs = (
        duckdb.connect()
        .execute(f"SELECT DISTINCT compression FROM parquet_metadata('{files[0]}')")
        .fetchall()
    )
    assert codecs == [("ZSTD",)]


def test_export_refuses_to_mix_with_an_earlier_export_unless_asked(
    ledgers: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    export_parquet(ledgers, out)
    with pytest.raises(AuditError, match="already holds exported tables"):
        export_parquet(ledgers[:1], out)
    # overwrite replaces each table whole: the second agent's partitions are gone.
    files = export_parquet(ledgers[:1], out, overwrite=True)
    assert {f.parent.name for f in files} == {"agent_id=agent-7"}
    assert {d.name for d in (out / "records").iterdir()} == {"agent_id=agent-7"}


def test_export_to_a_file_is_refused(ledgers: list[Path], tmp_path: Path) -> None:
    target = tmp_path / "file.parquet"
    target.write_bytes(b"")
    with pytest.raises(AuditError, match="not a directory"):
        export_parquet(ledgers, target)
