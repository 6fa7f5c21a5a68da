"""Running SQL against the audit tables, with errors a person can act on."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import duckdb
import msgspec

from holon.errors import HolonError

__all__ = [
    "FETCH_ROWS",
    "AuditError",
    "QueryResult",
    "RowStream",
    "interruptible",
    "object_keys",
    "open_query",
    "run_sql",
    "run_statement",
]

#: Rows fetched from DuckDB at a time when a result is streamed.
FETCH_ROWS = 10_000


class AuditError(HolonError, ValueError):
    """An audit query failed (bad SQL, unknown report or parameter), or the fleet is ambiguous.

    The message is one line: what failed and what to do.
    """


class QueryResult(msgspec.Struct, frozen=True):
    """Columns and rows of a query, in the order DuckDB returned them."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]

    def as_dicts(self) -> list[dict[str, Any]]:
        """Rows as ``{column: value}`` dicts (for JSON output).

        Raises :class:`AuditError` when two columns share a name (see :func:`object_keys`).
        """
        keys = object_keys(self.columns)
        return [dict(zip(keys, row, strict=True)) for row in self.rows]


def object_keys(columns: tuple[str, ...]) -> tuple[str, ...]:
    """``columns`` as the keys of one object per row; AuditError if a name repeats.

    SQL allows two columns of one name (``SELECT c.*, t.*`` over tool_calls and turns has
    two ``duration_ms``); a dict or JSON object keeps only the last, so the other
    column's values would vanish without a word.
    """
    repeated = sorted({name for name in columns if columns.count(name) > 1})
    if repeated:
        raise AuditError(
            f"the result has more than one column named {', '.join(map(repr, repeated))}, and an "
            "object per row can hold only one of each: name them apart with AS (e.g. "
            "c.duration_ms AS call_ms, t.duration_ms AS turn_ms), or use the table or CSV output"
        )
    return columns


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Interrupt:
    """Whether Ctrl-C asked DuckDB to stop the statement running under :func:`interruptible`."""

    requested = False


@contextmanager
def interruptible(con: duckdb.DuckDBPyConnection) -> Iterator[_Interrupt]:
    """Let Ctrl-C (SIGINT) stop a running statement.

    DuckDB runs a statement without returning to Python, so Python's own SIGINT handling
    (KeyboardInterrupt) waits for the statement to end: a runaway query could only be
    killed. The handler asks DuckDB to stop (``con.interrupt()``); the caller turns the
    InterruptException that follows into a KeyboardInterrupt. Signal handlers belong to
    the main thread: elsewhere this does nothing.

    A Ctrl-C that came after the statement ended (or between two statements of the
    block) is no interrupt to DuckDB, whose next statement starts uninterrupted: leaving
    the block then raises the KeyboardInterrupt, so that Ctrl-C is not lost.
    """
    flag = _Interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        flag.requested = True
        con.interrupt()

    previous = signal.signal(signal.SIGINT, stop)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)
    if flag.requested:
        raise KeyboardInterrupt


class RowStream:
    """A query's columns, and its rows fetched from DuckDB a batch at a time.

    DuckDB keeps a result in its own compact columnar form; the Python tuples are what
    cost memory (hundreds of bytes per row), so a caller that writes
    rows out as it goes holds only one batch of them, whatever the result's size.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, cursor: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._cursor = cursor
        self.columns: tuple[str, ...] = tuple(str(column[0]) for column in cursor.description or ())

    def batches(self, size: int = FETCH_ROWS) -> Iterator[list[tuple[Any, ...]]]:
        """Yield the rows in order, in lists of at most ``size`` rows (none if no columns)."""
        if size < 1:
            raise ValueError(f"batch size must be >= 1, not {size}")
        if not self.columns:
            return
        while True:
            with interruptible(self._con) as interrupt:
                try:
                    rows = self._cursor.fetchmany(size)
                except duckdb.Error as exc:
                    if interrupt.requested:
                        raise KeyboardInterrupt from None
                    raise _sql_error(self._con, exc) from None
            if not rows:
                return
            yield [tuple(row) for row in rows]


def open_query(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> RowStream:
    """Run one SQL statement on an audit connection; its rows are read from the stream.

    Any DuckDB error (syntax, unknown table or column, type error, ...) becomes one
    :class:`AuditError` whose message is one line naming the problem. Ctrl-C (SIGINT, in
    the main thread) stops a running statement with KeyboardInterrupt. The stream reads
    from ``con``'s current result, so read it before running another query there.
    """
    if not sql.strip():
        raise AuditError("the SQL query is empty; pass a SELECT over the audit tables (see docs/audit.md)")
    try:
        statements = len(con.extract_statements(sql))
    except duckdb.Error as exc:
        raise _sql_error(con, exc) from None
    if statements > 1:
        # DuckDB runs every statement and returns the last one's rows: the others' results
        # were dropped without a word.
        raise AuditError(
            f"the SQL holds {statements} statements, and audit runs one and shows its rows; run them one "
            "at a time, or combine SELECTs into one (UNION ALL, a WITH clause)"
        )
    with interruptible(con) as interrupt:
        try:
            cursor = con.execute(sql, params) if params else con.execute(sql)
        except duckdb.Error as exc:
            if interrupt.requested:
                raise KeyboardInterrupt from None
            raise _sql_error(con, exc) from None
    return RowStream(con, cursor)


def run_sql(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, Any] | None = None) -> QueryResult:
    """Run one SQL statement on an audit connection and return its columns and all its rows.

    Errors as :func:`open_query`. For results too big to hold, use :func:`open_query`.
    """
    stream = open_query(con, sql, params)
    rows = [row for batch in stream.batches() for row in batch]
    return QueryResult(columns=stream.columns, rows=rows)


def run_statement(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Run one statement whose result is not read (a CREATE TABLE or COPY of a load or export).

    Ctrl-C stops it with KeyboardInterrupt, as it does a query: a table of a big ledger
    takes DuckDB seconds to build (minutes when it spills), and without the handler
    Ctrl-C waited for the statement to end (a runaway one, forever), then came out as
    DuckDB's RuntimeError "Query interrupted". DuckDB's own errors are raised as they are.
    """
    with interruptible(con) as interrupt:
        try:
            con.execute(sql)
        except duckdb.Error:
            if interrupt.requested:
                raise KeyboardInterrupt from None
            raise


def _sql_error(con: duckdb.DuckDBPyConnection, exc: duckdb.Error) -> AuditError:
    return AuditError(f"SQL error: {_first_line(exc)} (tables: {', '.join(_table_names(con))})")


def _table_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    try:
        rows = con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        return [str(row[0]) for row in rows]
    except duckdb.Error:
        return []
