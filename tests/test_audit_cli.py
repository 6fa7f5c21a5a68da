"""`holon audit`: SQL, reports, output formats and errors, through the command and the holon CLI."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from holon.audit import TABLES
from holon.audit.commands import audit
from holon.cli import main
from tests.test_audit_reports import planted
from tests.test_audit_support import write_ledger


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
                                "intent_seq", "intent_ts", "turn_outcome"]  # fmt: skip
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
