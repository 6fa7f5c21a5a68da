"""Parquet export: every table, partitioned by agent, reads back with the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from holon.audit import TABLES, AuditError, connect, export_parquet
from holon.ledger import Ledger
from holon.simulate import simulate_ledger, simulation_budget
from tests.test_audit_support import fixture_records, session_records, write_ledger

# Agent ids are free text: the partition directory must survive '/', '=' and spaces.
AGENTS = ("agent-7", "ops/agent=2 b", "agent-7 simulated")


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("parquet")
    records, blobs = session_records(30)
    write_ledger(root / "one", AGENTS[0], records, blobs=blobs)
    write_ledger(root / "two", AGENTS[1], fixture_records("session_multi_work"))
    # `holon simulate` of the first, for the simulated_calls table.
    with Ledger.open(root / "one", readonly=True) as one:
        simulate_ledger(one, root / "three", simulation_budget(6_000), agent_id=AGENTS[2])
    return [root / "one", root / "two", root / "three"]


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


def _read_back(out: Path, name: str) -> list[tuple[Any, ...]]:
    columns = list(TABLES[name].columns)
    return _rows(
        duckdb.connect(), f"read_parquet('{out / name}/*/*.parquet', hive_partitioning = true)", columns
    )


def test_agents_exported_one_at_a_time_build_the_fleet_dataset(ledgers: list[Path], tmp_path: Path) -> None:
    export_parquet(ledgers, tmp_path / "fleet")
    for path in ledgers:
        export_parquet([path], tmp_path / "shared")
    for name in TABLES:
        assert _read_back(tmp_path / "shared", name) == _read_back(tmp_path / "fleet", name), name
    assert not [p for p in (tmp_path / "shared").iterdir() if p.name.startswith(".")]  # no staging left


def test_an_agent_already_exported_is_refused_unless_overwrite(ledgers: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_parquet(ledgers, out)
    before = {p: p.read_bytes() for p in out.rglob("*.parquet")}
    with pytest.raises(AuditError, match="already holds these agents' tables"):
        export_parquet(ledgers[:1], out)
    assert {p: p.read_bytes() for p in out.rglob("*.parquet")} == before  # nothing touched
    # overwrite replaces that agent's partitions only; the other agent's stay as they were.
    files = export_parquet(ledgers[:1], out, overwrite=True)
    assert {f.parent.name for f in files} == {"agent_id=agent-7"}
    assert {d.name for d in (out / "records").iterdir()} == {
        "agent_id=agent-7",
        "agent_id=ops%2Fagent%3D2%20b",
        "agent_id=agent-7%20simulated",
    }
    other = {p: b for p, b in before.items() if "agent-7" not in p.parent.name}
    assert other and all(p.read_bytes() == b for p, b in other.items())


def test_export_to_a_file_is_refused(ledgers: list[Path], tmp_path: Path) -> None:
    target = tmp_path / "file.parquet"
    target.write_bytes(b"")
    with pytest.raises(AuditError, match="not a directory"):
        export_parquet(ledgers, target)


def test_export_reports_progress_through_the_load_and_each_table(ledgers: list[Path], tmp_path: Path) -> None:
    calls: list[tuple[int, int]] = []
    export_parquet(ledgers, tmp_path / "out", progress=lambda *call: calls.append(call))
    total = calls[0][1]
    assert total > 2 * len(TABLES)  # a chunk per ledger, every table built, every table written
    assert calls == [(done, total) for done in range(1, total + 1)]
