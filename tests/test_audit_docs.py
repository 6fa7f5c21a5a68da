"""docs/audit.md documents every table, column, type and report, and its example queries run."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from holon.audit import REPORTS, TABLES, connect, run_sql
from holon.audit.models import MODELS
from tests.test_audit_support import fixture_records, session_records, write_ledger

DOC = (Path(__file__).resolve().parent.parent / "docs" / "audit.md").read_text()


@pytest.fixture(scope="module")
def con(tmp_path_factory: pytest.TempPathFactory) -> duckdb.DuckDBPyConnection:
    root = tmp_path_factory.mktemp("docs")
    records, blobs = session_records(30)
    write_ledger(root / "a", "agent-7", records, blobs=blobs)
    write_ledger(root / "b", "multi", fixture_records("session_multi_work"))
    return connect([root / "a", root / "b"])


def test_every_table_column_and_type_is_documented(con: duckdb.DuckDBPyConnection) -> None:
    for name, table in [*TABLES.items(), *MODELS.items()]:
        assert f"### `{name}`" in DOC, name
        for column, type_ in con.execute(
            f"SELECT column_name, column_type FROM (DESCRIBE {name})"
        ).fetchall():
            assert f"| `{column}` | `{type_}` | {table.columns[column]} |" in DOC, (name, column)


def test_every_report_is_documented() -> None:
    for name in REPORTS:
        assert f"| `{name}` |" in DOC, name


@pytest.mark.parametrize("sql", re.findall(r"```sql\n(.*?)```", DOC, re.DOTALL))
def test_example_queries_run_and_find_rows(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    assert run_sql(con, sql).rows, sql
