"""Audit review: rows checked against generated ledgers, and the bugs a review found, one test each."""

from __future__ import annotations

import csv
import io
import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import duckdb
import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from holon import records as r
from holon.audit import REPORTS, AuditError, QueryResult, connect, export_parquet, run_report, run_sql
from holon.cli import main
from holon.ledger import Ledger
from tests.strategies import ledger_records
from tests.test_audit_support import fixture_records, write_ledger

DOC = (Path(__file__).resolve().parent.parent / "docs" / "audit.md").read_text()


def _storable(record: r.Record) -> r.Record:
    """A generated record the ledger accepts: generated blob refs name no stored blob."""
    body = record.body
    if isinstance(body, r.ToolResult | r.TaskResult) and body.blob is not None:
        body = msgspec.structs.replace(body, blob=None)
    return r.Record(body=body, ts=record.ts, turn=record.turn)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(ledger_records(max_size=25))
def test_tables_agree_with_generated_ledgers(generated: list[r.Record]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger"
        # A tiny blob threshold: most outputs are moved to the blob store.
        with Ledger.create(path, agent_id="gen", fsync="never", blob_threshold=8) as ledger:
            ledger.append_many(_storable(rec) for rec in generated)
            stored = list(ledger.read())
        con = connect(path)
        try:
            kinds = dict(run_sql(con, "SELECT kind, count(*) FROM records GROUP BY kind").rows)
            assert kinds == dict(Counter(rec.kind for rec in stored))
            for seq, ts, turn, kind, body in run_sql(
                con, "SELECT seq, ts, turn, kind, body FROM records"
            ).rows:
                rec = stored[seq]
                assert (ts, turn, kind) == (rec.ts, rec.turn, rec.kind)
                assert json.loads(body) == json.loads(msgspec.json.encode(rec.body))
            assert run_sql(con, "SELECT seq, role, channel, name, text, chars FROM messages").rows == [
                (m.seq, m.body.role, m.body.channel, m.body.name, m.body.text, len(m.body.text))
                for m in stored
                if isinstance(m.body, r.Message)
            ]
            calls = run_sql(con, "SELECT intent_seq, result_seq, status, output_bytes, args FROM tool_calls")
            intents = sorted(row[0] for row in calls.rows if row[0] is not None)
            results = sorted(row[1] for row in calls.rows if row[1] is not None)
            assert intents == [rec.seq for rec in stored if isinstance(rec.body, r.ToolIntent)]
            assert results == [rec.seq for rec in stored if isinstance(rec.body, r.ToolResult)]
            for intent_seq, result_seq, status, output_bytes, args in calls.rows:
                if result_seq is not None:
                    original = generated[result_seq].body  # before the ledger moved it to a blob
                    assert isinstance(original, r.ToolResult)
                    assert (status, output_bytes) == (original.status, len(original.output.encode()))
                if intent_seq is not None:
                    intent = stored[intent_seq].body
                    assert isinstance(intent, r.ToolIntent) and json.loads(args) == intent.args
            prompts = [rec for rec in stored if isinstance(rec.body, r.PromptRendered)]
            assert run_sql(con, "SELECT seq, position, section, tokens, form FROM prompt_sections").rows == [
                (p.seq, i, s.section, s.tokens, s.form)
                for p in prompts
                if isinstance(p.body, r.PromptRendered)
                for i, s in enumerate(p.body.sections, 1)
            ]
            assert run_sql(con, "SELECT seq, section, ref, reason, tokens FROM omissions").rows == [
                (p.seq, o.section, o.ref, o.reason, o.tokens)
                for p in prompts
                if isinstance(p.body, r.PromptRendered)
                for o in p.body.omitted
            ]
            for name in REPORTS:
                run_report(con, name)
        finally:
            con.close()


# --------------------------------------------------------------------------- --json and as_dicts


def test_json_output_refuses_two_columns_of_one_name_instead_of_dropping_one(tmp_path: Path) -> None:
    # `SELECT c.*, t.*` over tool_calls and turns has two `duration_ms` columns (and more):
    # a JSON object keeps one of them, so the call's own duration silently disappeared.
    write_ledger(tmp_path / "a", "a", fixture_records("boundary_turn_cap"))
    sql = "SELECT c.*, t.* FROM tool_calls c JOIN turns t USING (agent_id, turn)"
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "a"), "--sql", sql, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert "duration_ms" in result.stderr and "AS" in result.stderr
    with pytest.raises(AuditError, match="'a'"):
        QueryResult(columns=("a", "a"), rows=[(1, 2)]).as_dicts()
    # Table and CSV output show both columns, as before.
    both = ["audit", str(tmp_path / "a"), "--sql", "SELECT 1 AS a, 2 AS a", "--csv"]
    result = CliRunner().invoke(main, both)
    assert (result.exit_code, result.stdout) == (0, "a,a\n1,2\n")


# --------------------------------------------------------------------------- Parquet


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


# --------------------------------------------------------------------------- loading


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


def test_a_value_the_tables_cannot_hold_is_an_audit_error_naming_ledger_and_seq(tmp_path: Path) -> None:
    # The ledger holds any integer msgpack holds (up to 2**64 - 1); the audit columns are
    # BIGINT. The load failed with a raw DuckDB exception naming a deleted temporary file.
    path = tmp_path / "ledger"
    records = [
        r.Record(body=r.Message(role="user", text="hi"), ts=1),
        r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", exit_code=2**63), ts=2),
    ]
    write_ledger(path, "a", records)
    with pytest.raises(AuditError) as caught:
        connect(path)
    message = str(caught.value)
    assert str(path.resolve()) in message and "seq 1" in message and "tool_result" in message
    result = CliRunner().invoke(main, ["audit", str(path)])
    assert result.exit_code == 2 and "internal error" not in result.stderr


# --------------------------------------------------------------------------- reports


def test_tools_report_names_the_earliest_of_tied_slowest_calls() -> None:
    # arg_max over tied durations returned whichever row DuckDB met first, and rows reach
    # it in the order of the duplicate check's window (partitions by arguments, hashed,
    # in parallel): on a fleet-sized table the answer changed from run to run. One thread
    # makes the old order repeatable, so the test fails every time on the old SQL.
    con = duckdb.connect()
    con.execute("SET threads = 1")
    con.execute(
        """
        CREATE TABLE tool_calls AS
        SELECT 'a' AS agent_id, 'c' || seq AS call_id, 'bash' AS tool, ('{"n":' || seq || '}')::JSON AS args,
               NULL::VARCHAR AS idempotency_key, seq AS turn, seq AS intent_seq, seq + 1 AS result_seq,
               'ok' AS status, 100 AS duration_ms, 0 AS output_bytes
        FROM range(1, 200) t(seq)
        """
    )
    row = run_report(con, "tools").as_dicts()[0]
    assert (row["max_ms"], row["slowest_call"]) == (100, "c1")


def test_json_writes_decimals_as_numbers_and_csv_writes_arrays_as_json(tmp_path: Path) -> None:
    # `sum(duration_ms) * 0.001` is a DECIMAL: --json wrote it as the string "1.5", so a
    # script doing arithmetic on it failed; --csv wrote a fixed-size ARRAY as "(1, 2)".
    write_ledger(tmp_path / "a", "a", fixture_records("boundary_turn_cap"))
    sql = "SELECT 1.5 AS d, count(*) * 0.5 AS k, [1, 2]::INTEGER[2] AS pair FROM records"
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "a"), "--sql", sql, "--json"])
    assert result.exit_code == 0
    [row] = json.loads(result.stdout)
    assert row["d"] == 1.5 and isinstance(row["k"], float) and row["pair"] == [1, 2]
    result = CliRunner().invoke(main, ["audit", str(tmp_path / "a"), "--sql", sql, "--csv"])
    assert result.exit_code == 0
    assert list(csv.reader(io.StringIO(result.stdout)))[1][2] == "[1,2]"
