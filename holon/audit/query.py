"""Running SQL against the audit tables, with errors a person can act on."""

from __future__ import annotations

from typing import Any

import duckdb
import msgspec

from holon.errors import HolonError

__all__ = ["AuditError", "QueryResult", "run_sql"]


class AuditError(HolonError, ValueError):
    """An audit query failed (bad SQL, unknown report or parameter), or the fleet is ambiguous.

    The message is one line: what failed and what to do.
    """


class QueryResult(msgspec.Struct, frozen=True):
    """Columns and rows of a query, in the order DuckDB returned them."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def as_dicts(self) -> list[dict[str, Any]]:
        """Rows as ``{column: value}`` dicts (for JSON output)."""
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
    """Run one SQL statement on an audit connection and return its columns and rows.

    Any DuckDB error (syntax, unknown table or column, type error, ...) becomes one
    :class:`AuditError` whose message is one line naming the problem.
    """
    if not sql.strip():
        raise AuditError("the SQL query is empty; pass a SELECT over the audit tables (see docs/audit.md)")
    try:
        cursor = con.execute(sql, params) if params else con.execute(sql)
        description = cursor.description
        rows = cursor.fetchall() if description is not None else []
    except duckdb.Error as exc:
        raise AuditError(f"SQL error: {_first_line(exc)} (tables: {', '.join(_table_names(con))})") from None
    columns = tuple(str(column[0]) for column in description or ())
    return QueryResult(columns=columns, rows=[tuple(row) for row in rows])


def _table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    try:
        rows = con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        return [str(row[0]) for row in rows]
    except duckdb.Error:
        return []
