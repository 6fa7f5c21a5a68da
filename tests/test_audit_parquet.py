"""Parquet export: every table, partitioned by agent and UTC date, reads back with the same rows.

Read back by DuckDB, pyarrow and polars as each reads Parquet (timestamps, JSON as text,
Hive partitions); an incremental export writes only the partitions a grown ledger changed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from benchmarks.audit import generate
from holon import records as r
from holon.audit import REPORTS, TABLES, AuditError, connect, export_parquet, open_export, run_report
from holon.audit.layout import LAYOUTS, NULL_PARTITION, time_column
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.simulate import simulate_ledger, simulation_budget
from tests.test_audit_support import fixture_records, session_records, write_ledger

# Agent ids are free text: the partition directory must survive '/', '=' and spaces.
AGENTS = ("agent-7", "ops/agent=2 b", "agent-7 simulated")


def _with_usage(records: list[r.Record], *, calls: int) -> list[r.Record]:
    """``records`` with the provider's usage after the first ``calls`` prompts (for model_calls).

    The ledger renumbers from 0: a record's seq is its place in the list.
    """
    out: list[r.Record] = []
    for rec in records:
        out.append(rec)
        if isinstance(rec.body, r.PromptRendered) and calls:
            calls -= 1
            usage = r.ModelCall(
                provider="anthropic", model="m", prompt_seq=len(out) - 1, round=1, input_tokens=1_000
            )
            out.append(r.Record(body=usage, ts=rec.ts, turn=rec.turn))
    return out


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("parquet")
    records, blobs = session_records(30)
    write_ledger(root / "one", AGENTS[0], _with_usage(records, calls=3), blobs=blobs)
    write_ledger(root / "two", AGENTS[1], fixture_records("session_multi_work"))
    # `holon simulate` of the first, for the simulated_calls table.
    with Ledger.open(root / "one", readonly=True) as one:
        simulate_ledger(one, root / "three", simulation_budget(6_000), agent_id=AGENTS[2])
    return [root / "one", root / "two", root / "three"]


@pytest.fixture(scope="module")
def exported(ledgers: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The two ledgers exported once, for the tests that only read the tree."""
    out = tmp_path_factory.mktemp("exported") / "out"
    export_parquet(ledgers, out)
    return out


@pytest.fixture(scope="module")
def loaded(ledgers: list[Path]) -> duckdb.DuckDBPyConnection:
    """The two ledgers as connect() loads them: what the export must hold."""
    return connect(ledgers)


def _rows(con: duckdb.DuckDBPyConnection, source: str, columns: list[str]) -> list[tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    return con.execute(f"SELECT {cols} FROM {source} ORDER BY ALL").fetchall()


def test_export_round_trips_every_table(exported: Path, loaded: duckdb.DuckDBPyConnection) -> None:
    out, con = exported, loaded
    files = list(out.rglob("*.parquet"))
    assert files and all(f.name == "data_0.parquet" for f in files)
    reader = duckdb.connect()
    for name, table in TABLES.items():
        columns = list(table.columns)
        want = _rows(con, name, columns)
        assert want, f"{name} has no rows: the round trip would prove nothing"
        # Any Parquet engine: a Hive-partitioned tree, agent_id restored from the directory.
        assert _rows(reader, _reader_source(out, name), columns) == want, name
        # Every agent has a partition in every table, its rows or an empty file with the schema.
        assert len({d.name for d in (out / name).iterdir()}) == len(AGENTS), name
    found = reader.execute(f"SELECT DISTINCT agent_id FROM {_reader_source(out, 'records')} ORDER BY 1")
    found = found.fetchall()
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
    return _rows(duckdb.connect(), _reader_source(out, name), list(TABLES[name].columns))


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
    assert {f.relative_to(out).parts[1] for f in files} == {"agent_id=agent-7"}
    assert {d.name for d in (out / "records").iterdir()} == {
        "agent_id=agent-7",
        "agent_id=ops%2Fagent%3D2%20b",
        "agent_id=agent-7%20simulated",
    }
    other = {p: b for p, b in before.items() if "agent_id=agent-7" not in p.parts}
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


# --------------------------------------------------------------------------- engines, dates, times


def _by_agent(name: str) -> bool:
    """Whether the table is partitioned by agent only (no date directories)."""
    return LAYOUTS[name].dated_by is None


def _reader_source(out: Path, name: str) -> str:
    depth = "*" if _by_agent(name) else "*/*"
    types = "{'agent_id': 'VARCHAR'}" if _by_agent(name) else "{'agent_id': 'VARCHAR', 'date': 'DATE'}"
    return f"read_parquet('{out / name}/{depth}/*.parquet', hive_partitioning = true, hive_types = {types})"


def _describe(out: Path, name: str) -> str:
    return f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {_reader_source(out, name)})"


def _counts(con: duckdb.DuckDBPyConnection, source: str) -> dict[str, int]:
    rows = con.execute(f"SELECT agent_id, count(*) FROM {source} GROUP BY ALL").fetchall()
    return {str(agent): int(n) for agent, n in rows}


def test_duckdb_pyarrow_and_polars_read_the_export_with_typed_times_json_and_dates(
    exported: Path, loaded: duckdb.DuckDBPyConnection
) -> None:
    out, con = exported, loaded
    reader = duckdb.connect()
    for name, table in TABLES.items():
        want = _counts(con, name)
        described = con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {name})").fetchall()
        json_columns = [c for c, t in described if t == "JSON"]
        times = [time_column(c) for c in table.columns if time_column(c) is not None]
        # DuckDB
        duck = dict(reader.execute(_describe(out, name)).fetchall())
        assert _counts(reader, _reader_source(out, name)) == want, name
        assert all(duck[t] == "TIMESTAMP WITH TIME ZONE" for t in times), (name, duck)
        assert all(duck[c] == "VARCHAR" for c in json_columns), (name, duck)
        # pyarrow, Hive partitions with the types _schema.json gives.
        fields = [pa.field("agent_id", pa.string())] + (
            [] if _by_agent(name) else [pa.field("date", pa.date32())]
        )
        dataset = ds.dataset(
            out / name, format="parquet", partitioning=ds.partitioning(pa.schema(fields), flavor="hive")
        )
        arrow = dataset.to_table()
        assert dict(Counter(arrow.column("agent_id").to_pylist())) == want, name
        assert all(arrow.schema.field(t).type == pa.timestamp("us", tz="UTC") for t in times), name
        assert all(arrow.schema.field(c).type == pa.string() for c in json_columns), name
        # polars: its own Hive reading, every file of the table.
        depth = "*" if _by_agent(name) else "*/*"
        frame = pl.read_parquet(
            f"{out / name}/{depth}/*.parquet",
            hive_partitioning=True,
            hive_schema={"agent_id": pl.String, **({} if _by_agent(name) else {"date": pl.Date})},
        )
        assert dict(frame.group_by("agent_id").len().iter_rows()) == want, name
        assert all(frame.schema[t] == pl.Datetime("us", "UTC") for t in times), name
        assert all(frame.schema[c] == pl.String for c in json_columns), name
        if not _by_agent(name):
            assert frame.schema["date"] == pl.Date
    # The instants and dates are the integer ms, read as UTC.
    ts, time, date = reader.execute(
        f"SELECT ts, time, date FROM {_reader_source(out, 'records')} ORDER BY ts DESC LIMIT 1"
    ).fetchone() or (0, None, None)
    stamp = datetime.fromtimestamp(ts / 1000, tz=UTC)
    assert time == stamp and date == stamp.date()
    body = pl.read_parquet(f"{out}/records/*/*/*.parquet", hive_partitioning=True)["body"][0]
    assert isinstance(json.loads(body), dict)  # polars reads the JSON as text, not Binary


def _day(day: int, hour: int = 12) -> int:
    """A ts (ms) on day ``day`` after 2026-01-01 UTC, at ``hour``."""
    return int(datetime(2026, 1, 1 + day, hour, tzinfo=UTC).timestamp() * 1000)


def _turn(turn: int, ts: int, *, result: bool = True, prompt: bool = False) -> list[r.Record]:
    """A turn at ``ts``: start, a message, a tool call (its result when ``result``), a prompt, the end."""
    bodies: list[r.Body] = [r.TurnStarted(trigger="operator"), r.Message(role="operator", text=f"do {turn}")]
    if prompt:
        bodies.append(
            r.PromptRendered(
                working_memory_revision=0,
                compression_epoch=0,
                cache_key="k",
                prompt_hash=f"h{turn}",
                total_tokens=10,
                budget=100,
                estimator="e",
                sections=(r.SectionTokens(section="history", tokens=10),),
                omitted=(r.Omission(section="history", ref="ledger:0", reason="over budget", tokens=3),),
            )
        )
    bodies.append(r.ToolIntent(call_id=f"c{turn}", tool="bash", args={"cmd": f"make {turn}"}))
    if result:
        bodies += [
            r.ToolResult(call_id=f"c{turn}", tool="bash", status="ok", output="ok"),
            r.TurnEnded(outcome="completed"),
        ]
    return [r.Record(body=body, ts=ts + i, turn=turn) for i, body in enumerate(bodies)]


def _append(path: Path, records: list[r.Record]) -> None:
    with Ledger.open(path, fsync="never") as ledger:
        ledger.append_many(records)


def _stamps(out: Path) -> dict[Path, tuple[int, bytes]]:
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.rglob("*.parquet")}


def _same_rows(out: Path, ledger: Path) -> None:
    """Every table of the export holds what connect() loads of the ledger now."""
    con, back = connect(ledger), open_export(out)
    for name, table in TABLES.items():
        assert _rows(back, name, list(table.columns)) == _rows(con, name, list(table.columns)), name


def test_rows_are_partitioned_by_their_utc_date(tmp_path: Path) -> None:
    # 23:59:59.999 and 00:00 the next day: a date read in any other zone would move one.
    write_ledger(tmp_path / "L", "dated", [*_turn(0, _day(0, 23) + 3_599_990), *_turn(1, _day(1, 0))])
    export_parquet([tmp_path / "L"], tmp_path / "out")
    dates = sorted(p.name for p in (tmp_path / "out" / "records" / "agent_id=dated").iterdir())
    assert dates == ["date=2026-01-01", "date=2026-01-02"]
    back = open_export(tmp_path / "out")
    rows = back.execute("SELECT seq, ts, date FROM records ORDER BY seq").fetchall()
    assert [d for _, _, d in rows] == [datetime.fromtimestamp(ts / 1000, tz=UTC).date() for _, ts, d in rows]
    # A turn stays on the day it started on, though it ends the next.
    assert back.execute("SELECT turn, date::VARCHAR FROM turns ORDER BY turn").fetchall() == [
        (0, "2026-01-01"),
        (1, "2026-01-02"),
    ]


def test_a_table_without_rows_is_an_empty_file_with_its_schema(ledgers: list[Path], tmp_path: Path) -> None:
    # An imported run renders no prompts: a glob over prompts/ found no file at all.
    write_ledger(tmp_path / "bare", "bare", [r.Record(body=r.Message(role="user", text="hi"), ts=_day(0))])
    out = tmp_path / "out"
    export_parquet([tmp_path / "bare"], out)
    reader = duckdb.connect()
    for name in TABLES:
        files = list((out / name).glob("agent_id=bare/**/*.parquet"))
        assert len(files) == 1, name
        assert reader.execute(f"SELECT count(*) FROM {_reader_source(out, name)}").fetchone() == (
            (1,) if name in ("agents", "records", "messages") else (0,)
        ), name
    # The empty file has the schema a file with rows has.
    export_parquet(ledgers[:1], out)
    for name in ("prompts", "omissions", "tool_calls", "plans"):
        (empty,) = (out / name / "agent_id=bare").rglob("*.parquet")
        full = next((out / name / "agent_id=agent-7").rglob("*.parquet"))
        assert pq.read_schema(empty).remove_metadata() == pq.read_schema(full).remove_metadata(), name


def test_the_schema_file_describes_every_table_as_it_reads_back(exported: Path) -> None:
    out = exported
    schema = json.loads((out / "_schema.json").read_text())
    assert list(schema["tables"]) == list(TABLES)
    reader = duckdb.connect()
    for name, described in schema["tables"].items():
        got = [tuple(row) for row in reader.execute(_describe(out, name)).fetchall()]
        assert [(c["name"], c["type"]) for c in described["columns"]] == got
        assert described["partitioned_by"] == (["agent_id"] if _by_agent(name) else ["agent_id", "date"])
        assert all(c["description"] for c in described["columns"]), name


def test_reports_over_the_export_equal_reports_over_the_ledgers(
    exported: Path, loaded: duckdb.DuckDBPyConnection
) -> None:
    views, tables = open_export(exported), open_export(exported, load=True)
    for name in REPORTS:
        want = run_report(loaded, name)
        assert want.rows or name == "unknown-outcomes", name
        assert run_report(views, name) == want, name
        assert run_report(tables, name) == want, name


# --------------------------------------------------------------------------- incremental


def test_an_incremental_export_writes_only_the_partitions_that_changed(tmp_path: Path) -> None:
    ledger, out = tmp_path / "L", tmp_path / "out"
    # Day 0: two turns; day 1: one whose call is still running (no result yet). No prompts.
    day0 = [*_turn(0, _day(0)), *_turn(1, _day(0, 13))]
    write_ledger(ledger, "grow", [*day0, *_turn(2, _day(1), result=False)])
    export_parquet([ledger], out)
    before = _stamps(out)
    assert not any(f.parent.name.startswith("date=2026-01-03") for f in before)
    # The call's result lands on day 1, and day 2 brings a turn with the agent's first prompt.
    result = r.ToolResult(call_id="c2", tool="bash", status="ok", output="ok")
    _append(ledger, [r.Record(body=result, ts=_day(1, 14), turn=2), *_turn(3, _day(2), prompt=True)])
    files = export_parquet([ledger], out, incremental=True)
    after = _stamps(out)
    written = {f.relative_to(out).parts[0] + "/" + f.parent.name for f in files}
    assert "records/date=2026-01-02" in written and "records/date=2026-01-03" in written
    assert "tool_calls/date=2026-01-02" in written  # the call's row gained its result
    assert "prompts/date=2026-01-03" in written and "agents/agent_id=grow" in written
    assert not any("2026-01-01" in w for w in written)
    # Day 0's files were not touched; the empty prompt placeholders gave way to the rows.
    untouched = [p for p in before if p.parent.name == "date=2026-01-01"]
    assert untouched and all(after[p] == before[p] for p in untouched)
    assert not list(out.glob(f"prompts/*/date={NULL_PARTITION}"))
    _same_rows(out, ledger)
    # Nothing new: nothing written.
    assert export_parquet([ledger], out, incremental=True) == []
    assert _stamps(out) == after


def test_an_incremental_export_adds_an_agent_not_yet_there_whole(ledgers: list[Path], tmp_path: Path) -> None:
    export_parquet(ledgers[:1], tmp_path / "out")
    files = export_parquet(ledgers, tmp_path / "out", incremental=True)
    new = {"agent_id=ops%2Fagent%3D2%20b", "agent_id=agent-7%20simulated"}  # all but the first
    assert {f.relative_to(tmp_path / "out").parts[1] for f in files} == new
    for name in TABLES:
        assert _read_back(tmp_path / "out", name) == _read_back_of(ledgers, tmp_path / "whole", name), name


def _read_back_of(ledgers: list[Path], out: Path, name: str) -> list[tuple[Any, ...]]:
    if not out.exists():
        export_parquet(ledgers, out)
    return _read_back(out, name)


@pytest.mark.parametrize("change", ["cut", "rewritten"])
def test_an_incremental_export_refuses_a_ledger_no_longer_extending_it(tmp_path: Path, change: str) -> None:
    ledger, out = tmp_path / "L", tmp_path / "out"
    records = [*_turn(0, _day(0)), *_turn(1, _day(0, 13))]
    write_ledger(ledger, "agent", records)
    export_parquet([ledger], out)
    before = _stamps(out)
    shutil.rmtree(ledger)
    if change == "cut":  # as `holon repair` cuts a damaged tail
        write_ledger(ledger, "agent", records[:4])
    else:  # as long as before, and longer, but other records
        write_ledger(ledger, "agent", [*_turn(0, _day(0, 9)), *_turn(1, _day(0, 13)), *_turn(2, _day(1))])
    with pytest.raises(AuditError, match=r"cut or repaired.*--overwrite") as raised:
        export_parquet([ledger], out, incremental=True)
    assert ("ends at seq 3" if change == "cut" else "holds other records up to seq 9") in str(raised.value)
    assert _stamps(out) == before
    export_parquet([ledger], out, overwrite=True)
    _same_rows(out, ledger)


def test_an_export_of_an_earlier_layout_is_not_added_to(ledgers: list[Path], tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "records" / "agent_id=x").mkdir(parents=True)  # by agent only, no _schema.json
    with pytest.raises(AuditError, match="earlier holon"):
        export_parquet(ledgers, out, incremental=True)
    with pytest.raises(UsageError, match="exclude each other"):
        export_parquet(ledgers, tmp_path / "other", overwrite=True, incremental=True)


# --------------------------------------------------------------------------- what a Hive reader guesses


DOC = (Path(__file__).resolve().parent.parent / "docs" / "audit.md").read_text()
# The DuckDB reader call docs/audit.md gives for the exported tree.
DOC_READER = re.search(r"DuckDB\n`(read_parquet\('warehouse/tool_calls/.*?\))`", DOC, re.DOTALL)


@pytest.mark.parametrize("agent_id", ["42", "2024-06-01"])
def test_parquet_agent_id_reads_back_as_text_whatever_it_looks_like(tmp_path: Path, agent_id: str) -> None:
    # A Hive reader guesses a partition value's type: through the documented reader call,
    # agent "42" came back as the integer 42 and "2024-06-01" as a DATE, so the rows no
    # longer equalled the tables'.
    assert DOC_READER is not None, "docs/audit.md names no DuckDB reader call"
    write_ledger(tmp_path / "ledger", agent_id, fixture_records("boundary_turn_cap"))
    export_parquet([tmp_path / "ledger"], tmp_path / "out")
    con = connect(tmp_path / "ledger")
    reader = duckdb.connect()
    for name in ("agents", "tool_calls", "records"):
        want = con.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
        source = DOC_READER.group(1).replace("warehouse/tool_calls", str(tmp_path / "out" / name))
        if name == "agents":  # partitioned by agent only
            source = source.replace("/*/*/*.parquet", "/*/*.parquet").replace(", 'date': 'DATE'", "")
        columns = ", ".join(f'"{c[0]}"' for c in con.execute(f"SELECT * FROM {name} LIMIT 0").description)
        got = reader.execute(f"SELECT {columns} FROM {source} ORDER BY ALL").fetchall()
        assert got == want, name


# --------------------------------------------------------------------------- row order past a row group


def _digests(out: Path) -> dict[str, str]:
    files = sorted(out.rglob("*.parquet"))
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


@pytest.mark.slow
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
