"""The Parquet export's layout: how each audit table is partitioned, typed and described.

One home for the rules :func:`holon.audit.parquet.export_parquet` writes by, the
``_schema.json`` it writes beside the tables, and :func:`holon.audit.parquet.open_export`
reads back by:

* every table is partitioned by ``agent_id`` and, except ``agents`` (one row per ledger,
  replaced by each export), by ``date``: the UTC date of the time that dates its row
  (:data:`LAYOUTS`), ``__HIVE_DEFAULT_PARTITION__`` (NULL) when that time is no time an
  append accepts (:data:`holon.records.MIN_TS` .. :data:`holon.records.MAX_TS`);
* beside each integer time column (``ts``, ``*_ts``: milliseconds since the epoch) is a
  ``TIMESTAMP WITH TIME ZONE`` column of the same instant (``time``, ``*_time``), NULL
  where the integer is out of that range;
* ``JSON`` columns are written as UTF-8 text (Parquet ``String``): DuckDB writes its JSON
  type as Parquet's JSON logical type, which polars reads as Binary;
* each row knows the newest ledger seq it derives from, so an incremental export
  rewrites only the partitions holding a row that a new record made or changed.
"""

from __future__ import annotations

from typing import Final

import duckdb
import msgspec

from holon.audit.tables import TABLES
from holon.records import MAX_TS, MIN_TS

__all__ = [
    "DATE_COLUMN",
    "LAYOUTS",
    "LAYOUT_VERSION",
    "NULL_PARTITION",
    "SCHEMA_FILE",
    "TableLayout",
    "export_rows",
    "partition_columns",
    "schema_document",
    "time_column",
]

#: Bumped when the tree changes shape (partitions, file names): an export of another
#: layout is not added to. 1 was the tree by agent only, before ``_schema.json``.
LAYOUT_VERSION: Final = 2
#: The file describing the export, at the top of the tree (Spark, Trino and DuckDB's
#: ``table/*/*/*.parquet`` globs all pass over it).
SCHEMA_FILE: Final = "_schema.json"
DATE_COLUMN: Final = "date"
#: The directory name Hive, Spark, Trino and DuckDB give (and read back as) a NULL partition value.
NULL_PARTITION: Final = "__HIVE_DEFAULT_PARTITION__"


class TableLayout(msgspec.Struct, frozen=True):
    """How one table is exported: what dates a row, and the newest seq a row derives from.

    ``dated_by`` and ``newest_seq`` are SQL over the table's row ``t`` (and ``p``, a row of
    ``prompts`` joined on agent and seq — ``t``'s column ``prompt_key`` — when
    ``by_prompt``). ``dated_by`` None: the table is partitioned by agent only.
    """

    dated_by: str | None
    dated_by_help: str
    newest_seq: str
    by_prompt: bool = False
    prompt_key: str = "seq"


_BY_SEQ: Final = "t.seq"

LAYOUTS: Final[dict[str, TableLayout]] = {
    "agents": TableLayout(
        None, "(by agent only: one row per ledger, replaced by every export)", "t.head_seq"
    ),
    "records": TableLayout("t.ts", "ts", _BY_SEQ),
    "messages": TableLayout("t.ts", "ts", _BY_SEQ),
    # A call's row changes when its result arrives: dated by the intent, it stays where it was.
    "tool_calls": TableLayout(
        "coalesce(t.intent_ts, t.result_ts)",
        "intent_ts (result_ts for a result without an intent)",
        "greatest(t.intent_seq, t.result_seq)",
    ),
    # A turn's row (its end, its counts) changes with every record of the turn.
    "turns": TableLayout(
        "coalesce(t.started_ts, t.ended_ts)",
        "started_ts (ended_ts for a turn with only an end)",
        "(SELECT max(r.seq) FROM records r WHERE r.agent_id = t.agent_id AND r.turn = t.turn)",
    ),
    "prompts": TableLayout("t.ts", "ts", _BY_SEQ),
    "prompt_sections": TableLayout("p.ts", "the ts of its prompt", _BY_SEQ, by_prompt=True),
    "omissions": TableLayout("p.ts", "the ts of its prompt", _BY_SEQ, by_prompt=True),
    "deltas": TableLayout("t.ts", "ts", _BY_SEQ),
    "episodes": TableLayout("t.ts", "ts", _BY_SEQ),
    "plans": TableLayout("t.ts", "ts", _BY_SEQ),
    "model_calls": TableLayout("t.ts", "ts", _BY_SEQ),
    # Rows of a simulated ledger's comparison file, not of its records: a call is dated by
    # the prompt holon would have sent for it.
    "simulated_calls": TableLayout(
        "p.ts",
        "the ts of holon's prompt for the call",
        "t.prompt_seq",
        by_prompt=True,
        prompt_key="prompt_seq",
    ),
}

if LAYOUTS.keys() != TABLES.keys():
    # A table added to holon.audit.tables needs its layout here before anything exports it.
    raise RuntimeError(
        f"holon.audit.layout.LAYOUTS names {sorted(LAYOUTS)}, the audit tables are {sorted(TABLES)}: "
        "give every table a TableLayout"
    )


def time_column(column: str) -> str | None:
    """The TIMESTAMP column beside integer time ``column`` (``ts`` -> ``time``); None if it is no time."""
    if column == "ts":
        return "time"
    if column.endswith("_ts"):
        return column[: -len("ts")] + "time"
    return None


def _in_range(ms: str, then: str) -> str:
    return f"CASE WHEN {ms} BETWEEN {MIN_TS} AND {MAX_TS} THEN {then} END"


def _timestamp(ms: str) -> str:
    # timezone('UTC', TIMESTAMP) reads the wall clock as UTC: the instant, whatever the
    # session's TimeZone (a cast to TIMESTAMPTZ would read it in that zone).
    return _in_range(ms, f"timezone('UTC', epoch_ms({ms}))")


def _date(ms: str) -> str:
    return _in_range(ms, f"CAST(epoch_ms({ms}) AS DATE)")


def _column_types(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[str, str]]:
    return [(str(name), str(type_)) for name, type_, *_ in con.execute(f"DESCRIBE {sql}").fetchall()]


def export_rows(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """SQL of table ``name``'s rows as exported, in the table's order.

    Columns: the table's (``JSON`` ones as text), each integer time followed by its
    TIMESTAMP, then ``date`` (partitioned tables), ``_newest_seq`` and ``_row`` (the
    table's order), which the writer drops.
    """
    layout = LAYOUTS[name]
    columns: list[str] = []
    for column, type_ in _column_types(con, name):
        quoted = f't."{column}"'
        columns.append(f'CAST({quoted} AS VARCHAR) AS "{column}"' if type_ == "JSON" else quoted)
        stamp = time_column(column)
        if stamp is not None:
            columns.append(f'{_timestamp(quoted)} AS "{stamp}"')
    if layout.dated_by is not None:
        columns.append(f"{_date(layout.dated_by)} AS {DATE_COLUMN}")
    columns.append(f"{layout.newest_seq} AS _newest_seq")
    columns.append("t._row")
    # row_number() over the plain scan is the table's order (the writer runs on one
    # thread); the join below does not keep it, ORDER BY _row restores it.
    source = f"(SELECT *, row_number() OVER () AS _row FROM {name}) t"
    if layout.by_prompt:
        source += f' LEFT JOIN prompts p ON p.agent_id = t.agent_id AND p.seq = t."{layout.prompt_key}"'
    return f"SELECT {', '.join(columns)} FROM {source}"


def partition_columns(name: str) -> tuple[str, ...]:
    """The partition columns of table ``name``, in directory order."""
    return ("agent_id",) if LAYOUTS[name].dated_by is None else ("agent_id", DATE_COLUMN)


class Column(msgspec.Struct, frozen=True, omit_defaults=True):
    """One column of an exported table, as ``_schema.json`` describes it."""

    name: str
    type: str
    description: str
    json: bool = False
    partition: bool = False


class TableSchema(msgspec.Struct, frozen=True):
    """One exported table, as ``_schema.json`` describes it."""

    row: str
    path: str
    partitioned_by: tuple[str, ...]
    dated_by: str
    columns: tuple[Column, ...]


class ExportSchema(msgspec.Struct, frozen=True):
    """The whole ``_schema.json``: the layout version, how to read it, and every table."""

    layout: int
    reading: str
    tables: dict[str, TableSchema]


_READING: Final = (
    "Hive-partitioned zstd Parquet, one directory per table: read a table with its partition "
    "columns typed as given (agent_id is text whatever it looks like), e.g. DuckDB "
    "read_parquet('<out>/<table>/*/*/*.parquet', hive_partitioning = true, "
    "hive_types = {'agent_id': 'VARCHAR', 'date': 'DATE'}) (agents: '<out>/agents/*/*.parquet'), "
    "Spark spark.read.parquet('<out>/<table>') with "
    "spark.sql.sources.partitionColumnTypeInference.enabled=false. Columns marked json hold JSON "
    "as UTF-8 text. Every (table, agent) has at least one file: a table without rows for an agent "
    f"is an empty file with the schema, in its {DATE_COLUMN}={NULL_PARTITION} partition."
)


def schema_document(con: duckdb.DuckDBPyConnection) -> bytes:
    """``_schema.json``: every exported table's partitions and columns (types as DuckDB reads them back)."""
    tables: dict[str, TableSchema] = {}
    for name, table in TABLES.items():
        layout = LAYOUTS[name]
        json_columns = {column for column, type_ in _column_types(con, name) if type_ == "JSON"}
        partitions = partition_columns(name)
        columns: list[Column] = []
        for column, type_ in _column_types(con, export_rows(con, name)):
            if column in ("_newest_seq", "_row"):
                continue
            if column in json_columns:
                columns.append(Column(column, type_, table.columns[column] + " (JSON text)", json=True))
            elif column in table.columns:
                columns.append(Column(column, type_, table.columns[column], partition=column in partitions))
            elif column == DATE_COLUMN:
                columns.append(Column(column, type_, f"UTC date of {layout.dated_by_help}", partition=True))
            else:
                integer = next(c for c in table.columns if time_column(c) == column)
                columns.append(
                    Column(
                        column,
                        type_,
                        f"{integer} as a UTC instant (whole milliseconds); NULL outside {MIN_TS}..{MAX_TS}",
                    )
                )
        # In the order readers give them: the file's columns, then the partition columns.
        columns.sort(key=lambda c: partitions.index(c.name) if c.partition else -1)
        leaf = "/".join(f"{p}=<{p}>" for p in partitions)
        tables[name] = TableSchema(
            row=table.row,
            path=f"{name}/{leaf}/data_0.parquet",
            partitioned_by=partitions,
            dated_by=layout.dated_by_help,
            columns=tuple(columns),
        )
    document = ExportSchema(layout=LAYOUT_VERSION, reading=_READING, tables=tables)
    return msgspec.json.format(msgspec.json.encode(document), indent=2) + b"\n"
