"""`holon audit`: SQL, reports, output formats and errors, through the command and the holon CLI."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from holon.audit import TABLES, AuditError, QueryResult, connect
from holon.audit.commands import audit
from holon.audit.query import run_sql
from holon.cli import EXIT_OK, EXIT_USAGE, main
from tests.cli_support import invoke
from tests.test_audit_reports import planted
from tests.test_audit_support import fixture_records, small_ledger, write_ledger


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("cli")
    records, _ = planted()
    write_ledger(root / "a", "planted-a", records)
    write_ledger(root / "b", "planted-b", records[:20])
    return [str(root / "a"), str(root / "b")]


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_without_a_query_it_lists_the_tables_and_their_rows(ledgers: list[str]) -> None:
    code, out, _ = run("audit", *ledgers, "--json")
    assert code == 0
    counts = {row["table"]: row["rows"] for row in json.loads(out)}
    assert list(counts) == list(TABLES)
    assert counts["agents"] == 2 and counts["records"] > 20


def test_report_as_a_readable_table(ledgers: list[str]) -> None:
    code, out, _ = run("audit", ledgers[0], "--report", "unknown-outcomes")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["agent_id", "turn", "call_id", "tool", "args", "idempotency_key",
                                "intent_seq", "intent_ts", "turn_outcome", "task_id"]  # fmt: skip
    assert set(lines[1]) == {"-", " "}
    assert "c-migrate" in lines[2] and "interrupted" in lines[2]
    assert lines[-1] == "(1 row)"


def test_report_params_and_json(ledgers: list[str]) -> None:
    code, out, _ = run("audit", ledgers[0], "--report", "tools", "--param", "window=1", "--json")
    assert code == 0
    assert {row["tool"]: row["duplicates"] for row in json.loads(out)} == {"bash": 0, "read_file": 1}


def test_sql_as_csv(ledgers: list[str]) -> None:
    sql = "SELECT agent_id, count(*) AS calls FROM tool_calls GROUP BY ALL ORDER BY 1"
    code, out, _ = run("audit", *ledgers, "--sql", sql, "--csv")
    assert code == 0
    assert list(csv.reader(io.StringIO(out))) == [
        ["agent_id", "calls"],
        ["planted-a", "8"],
        ["planted-b", "4"],  # records[:20] cut turn 4 after its intent
    ]


def test_sql_error_is_one_line_and_exit_code_2(ledgers: list[str]) -> None:
    code, out, err = run("audit", ledgers[0], "--sql", "SELECT nope FROM tool_calls")
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("holon: error: SQL error:") and "nope" in err


def test_audit_sql_cannot_write_files(ledgers: list[str], tmp_path: Path) -> None:
    target = tmp_path / "leak.csv"
    code, _, err = run("audit", ledgers[0], "--sql", f"COPY records TO '{target}'")
    assert code == 2 and "SQL error" in err
    assert not target.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sql", "SELECT 1", "--report", "tools"], "either --sql or --report"),
        (["--json", "--csv"], "either --json or --csv"),
        (["--param", "window=1"], "--param applies to --report only"),
        (["--report", "tools", "--param", "window"], "is not KEY=VALUE"),
        (["--report", "nope"], "Invalid value for '--report'"),
    ],
)
def test_usage_errors(ledgers: list[str], args: list[str], message: str) -> None:
    code, _, err = run("audit", ledgers[0], *args)
    assert code == 2 and message in err


def test_report_parameter_errors_are_holon_errors(ledgers: list[str]) -> None:
    code, _, err = run("audit", ledgers[0], "--report", "tools", "--param", "window=x")
    assert code == 2 and "must be an integer, not 'x'" in err


def test_not_a_ledger_and_corrupt_ledger_exit_codes(ledgers: list[str], tmp_path: Path) -> None:
    code, _, err = run("audit", str(tmp_path))
    assert code == 2 and err.startswith("holon: error:")
    broken = tmp_path / "broken"
    shutil.copytree(ledgers[1], broken)
    segment = next((broken / "segments").glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[200] ^= 0xFF  # inside a frame of the (plain) active segment
    segment.write_bytes(bytes(data))
    code, _, err = run("audit", str(broken))
    assert code == 3 and "corrupt" in err


def test_the_command_object_runs_on_its_own(ledgers: list[str]) -> None:
    result = CliRunner().invoke(audit, [ledgers[0], "--sql", "SELECT count(*) AS n FROM turns", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout) == [{"n": 12}]


# A result bigger than one fetch batch, with a NULL, a list and a comma to format.
BIG_SQL = (
    "SELECT range AS n, CASE WHEN range % 7 = 0 THEN NULL ELSE 'r,' || range END AS s, "
    "[range, range + 1] AS pair FROM range(25003)"
)


def test_csv_and_json_carry_every_row_of_a_result_bigger_than_a_batch(ledgers: list[str]) -> None:
    code, out, _ = run("audit", ledgers[0], "--sql", BIG_SQL, "--csv")
    assert code == 0
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["n", "s", "pair"]
    assert len(rows) == 25004
    assert rows[1] == ["0", "", "[0,1]"] and rows[2] == ["1", "r,1", "[1,2]"]
    assert rows[-1] == ["25002", "r,25002", "[25002,25003]"]
    code, out, _ = run("audit", ledgers[0], "--sql", BIG_SQL, "--json")
    assert code == 0
    objects = json.loads(out)
    assert [o["n"] for o in objects] == list(range(25003))
    assert objects[1] == {"n": 1, "s": "r,1", "pair": [1, 2]} and objects[7]["s"] is None


def test_empty_results_in_every_format(ledgers: list[str]) -> None:
    sql = "SELECT turn FROM turns WHERE turn < 0"
    assert run("audit", ledgers[0], "--sql", sql, "--json")[:2] == (0, "[]\n")
    assert run("audit", ledgers[0], "--sql", sql, "--csv")[:2] == (0, "turn\n")
    assert run("audit", ledgers[0], "--sql", sql)[1].splitlines()[-1] == "(0 rows)"


def test_the_table_shows_the_first_rows_and_counts_them_all(ledgers: list[str]) -> None:
    code, out, _ = run("audit", ledgers[0], "--sql", BIG_SQL)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 + 1000 + 1 and lines[-2].split()[0] == "999"
    assert lines[-1] == (
        "(25003 rows, the first 1000 shown; raise --max-rows, or use --csv or --json for every row)"
    )
    lines = run("audit", ledgers[0], "--sql", BIG_SQL, "--max-rows", "3")[1].splitlines()
    assert [line.split()[0] for line in lines[2:-1]] == ["0", "1", "2"]
    assert lines[-1].startswith("(25003 rows, the first 3 shown")
    lines = run("audit", ledgers[0], "--sql", "SELECT 1 AS one", "--max-rows", "1")[1].splitlines()
    assert lines[-1] == "(1 row)"


def test_max_rows_is_for_the_table_only(ledgers: list[str]) -> None:
    code, _, err = run("audit", ledgers[0], "--sql", "SELECT 1", "--csv", "--max-rows", "5")
    assert code == 2 and "--max-rows applies to the table output" in err and "LIMIT" in err


def test_a_bad_report_parameter_fails_before_loading(tmp_path: Path) -> None:
    # The path is not a ledger: had the ledgers been loaded first, that would be the error.
    code, _, err = run("audit", str(tmp_path), "--report", "tools", "--param", "nope=1")
    assert code == 2 and "has no parameter 'nope'" in err


# --------------------------------------------------------------------------- --memory-limit


@pytest.mark.parametrize("value", ["-5GB", "0", "0GB", "0%", "garbage", "", "2", "GB", "1.2.3GB", "120%"])
def test_a_memory_limit_that_is_not_a_positive_size_is_a_usage_error(tmp_path: Path, value: str) -> None:
    # -5GB was taken by DuckDB as no limit at all; garbage was refused only after the load,
    # in DuckDB's words.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    for args in (
        ("audit", ledger, "--memory-limit", value),
        ("export", ledger, tmp_path / "pq", "--format", "parquet", "--memory-limit", value),
    ):
        result = invoke(*args)
        assert result.exit_code == EXIT_USAGE, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("holon: usage error: Invalid value for '--memory-limit'")
        assert "e.g. 2GB" in line
    assert not (tmp_path / "pq").exists()


@pytest.mark.parametrize("value", ["2GB", "500MB", "1.5GB", "2 GB", "750mib", "1TB", "50%"])
def test_a_memory_limit_duckdb_understands_is_accepted(tmp_path: Path, value: str) -> None:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    result = invoke("audit", ledger, "--memory-limit", value, "--sql", "SELECT 1 AS one")
    assert result.exit_code == EXIT_OK, result.stderr


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


# --------------------------------------------------------------------------- --sql runs one statement
# DuckDB runs every statement of a string and returns the last one's rows, so
# `--sql "SELECT count(*) FROM tool_calls; SELECT count(*) FROM messages"` printed only the
# messages count, and the first result was dropped without a word.


def test_two_statements_are_refused_naming_how_many(tmp_path: Path) -> None:
    ledger = small_ledger(tmp_path / "l")
    result = invoke("audit", ledger, "--sql", "SELECT 1 AS a; SELECT 2 AS b")
    assert result.exit_code == EXIT_USAGE
    assert "the SQL holds 2 statements, and audit runs one and shows its rows" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("sql", ["SELECT 1 AS a", "SELECT 1 AS a;", "-- one\nSELECT ';' AS a; -- done"])
def test_one_statement_with_a_trailing_semicolon_or_comment_still_runs(tmp_path: Path, sql: str) -> None:
    con = connect(small_ledger(tmp_path / "l"))
    try:
        assert len(run_sql(con, sql).rows) == 1
        with pytest.raises(AuditError, match="SQL error: "):
            run_sql(con, "SELEC 1")  # a syntax error is still the one-line SQL error
    finally:
        con.close()
