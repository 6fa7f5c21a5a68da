"""`holon audit --sql` runs exactly one statement, or says why not.

DuckDB runs every statement of a string and returns the last one's rows, so
`--sql "SELECT count(*) FROM tool_calls; SELECT count(*) FROM messages"` printed only the
messages count, and the first result was dropped without a word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon.audit import connect
from holon.audit.query import AuditError, run_sql
from holon.cli import EXIT_USAGE
from tests.cli_support import invoke
from tests.test_audit_review4 import _small_ledger


def test_two_statements_are_refused_naming_how_many(tmp_path: Path) -> None:
    ledger = _small_ledger(tmp_path / "l")
    result = invoke("audit", ledger, "--sql", "SELECT 1 AS a; SELECT 2 AS b")
    assert result.exit_code == EXIT_USAGE
    assert "the SQL holds 2 statements, and audit runs one and shows its rows" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


@pytest.mark.parametrize("sql", ["SELECT 1 AS a", "SELECT 1 AS a;", "-- one\nSELECT ';' AS a; -- done"])
def test_one_statement_with_a_trailing_semicolon_or_comment_still_runs(tmp_path: Path, sql: str) -> None:
    con = connect(_small_ledger(tmp_path / "l"))
    try:
        assert len(run_sql(con, sql).rows) == 1
        with pytest.raises(AuditError, match="SQL error: "):
            run_sql(con, "SELEC 1")  # a syntax error is still the one-line SQL error
    finally:
        con.close()
