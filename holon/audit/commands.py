"""``holon audit``: query ledgers offline with SQL or a canned report.

The command object :data:`audit` is registered on the ``holon`` CLI group. Errors are
raised as holon errors or as ``click.UsageError`` for bad usage; the group prints either
as one line and picks the exit code (and gives the command its ``--debug``). A path
that is not a ledger is reported by the ledger (``NotALedger``), as in every other
command.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import click
import msgspec

from holon.audit.load import connect, memory_limit_problem
from holon.audit.query import QueryResult, RowStream, object_keys, open_query
from holon.audit.reports import REPORTS, report_query
from holon.audit.tables import TABLES
from holon.progress import progress_total

__all__ = ["audit", "format_table"]

_MAX_CELL = 60
#: Rows the table output shows unless --max-rows says otherwise.
TABLE_ROWS = 1000


def _json_default(value: Any) -> Any:
    """JSON for what msgspec does not encode natively (any other DuckDB value: its text)."""
    return str(value)


# DECIMAL values (``sum(duration_ms) * 0.001``) as JSON numbers: msgspec's default
# writes a Decimal as a string, which a script cannot do arithmetic on.
_JSON_ENCODER = msgspec.json.Encoder(enc_hook=_json_default, decimal_format="number")


def _json(value: Any) -> str:
    return _JSON_ENCODER.encode(value).decode()


def _cell(value: Any) -> str:
    """One value as table text: NULL as empty, lists and dicts as JSON, long text cut."""
    if value is None:
        return ""
    text = _json(value) if isinstance(value, list | dict | tuple) else str(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def format_table(result: QueryResult, *, total: int | None = None) -> str:
    """Rows as an aligned text table with a header line, for people.

    ``total`` is the result's row count when ``result`` holds only its first rows; the
    footer then says how many were left out.
    """
    cells = [[_cell(v) for v in row] for row in result.rows]
    widths = [len(c) for c in result.columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(result.columns, widths, strict=True)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)
    shown = len(result.rows)
    count = shown if total is None else total
    footer = f"{count} row{'s' if count != 1 else ''}"
    if count > shown:
        footer += f", the first {shown} shown; raise --max-rows, or use --csv or --json for every row"
    lines.append(f"({footer})")
    return "\n".join(lines)


def _echo_table(stream: RowStream, max_rows: int) -> None:
    """The first ``max_rows`` rows as a table; the rest are only counted, a batch at a time."""
    shown: list[tuple[Any, ...]] = []
    total = 0
    for batch in stream.batches():
        shown.extend(batch[: max(0, max_rows - len(shown))])
        total += len(batch)
    click.echo(format_table(QueryResult(columns=stream.columns, rows=shown), total=total))


def _echo_json(stream: RowStream) -> None:
    """Rows as one JSON array of objects, written a batch at a time."""
    keys = object_keys(stream.columns)  # before any output: a repeated name is an error
    click.echo("[", nl=False)
    separator = ""
    for batch in stream.batches():
        objects = [dict(zip(keys, row, strict=True)) for row in batch]
        # The batch's array without its brackets: the objects, comma-separated.
        click.echo(separator + _json(objects)[1:-1], nl=False)
        separator = ","
    click.echo("]")


def _echo_csv(stream: RowStream) -> None:
    """A header line, then one line per row, written a batch at a time."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")

    def flush() -> None:
        click.echo(out.getvalue(), nl=False)
        out.seek(0)
        out.truncate()

    writer.writerow(stream.columns)
    flush()
    for batch in stream.batches():
        writer.writerows(
            # tuple: a fixed-size ARRAY, JSON like a LIST (as in the table output)
            ["" if v is None else _json(v) if isinstance(v, list | dict | tuple) else v for v in row]
            for row in batch
        )
        flush()


def _memory_limit(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Refuse a --memory-limit that is not a positive size before anything is loaded."""
    problem = None if value is None else memory_limit_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def _parse_params(values: tuple[str, ...]) -> dict[str, str]:
    params: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--param {item!r} is not KEY=VALUE (e.g. --param window=5)")
        params[key] = value
    return params


@click.command(name="audit")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--sql", "sql", metavar="QUERY", help="Run this SQL over the audit tables.")
@click.option(
    "--report",
    "report",
    type=click.Choice(list(REPORTS)),
    help="Run a canned report: " + ", ".join(REPORTS) + ".",
)
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="KEY=VALUE",
    help="Report parameter, e.g. --param window=5 (tools, duplicates).",
)
@click.option("--json", "as_json", is_flag=True, help="Print rows as a JSON array of objects.")
@click.option("--csv", "as_csv", is_flag=True, help="Print rows as CSV with a header line.")
@click.option(
    "--max-rows",
    "max_rows",
    type=click.IntRange(min=1),
    help=f"Most rows the table shows; the count is always exact.  [default: {TABLE_ROWS}]",
)
@click.option(
    "--database",
    "database",
    type=click.Path(path_type=Path),
    metavar="FILE",
    help="Write the tables into this new DuckDB file (reopen it with DuckDB) instead of memory.",
)
@click.option(
    "--memory-limit",
    "memory_limit",
    metavar="SIZE",
    callback=_memory_limit,
    help="Most memory DuckDB holds, e.g. 2GB; past it the load spills to a temporary directory.",
)
def audit(
    *,
    paths: tuple[Path, ...],
    database: Path | None,
    memory_limit: str | None,
    sql: str | None,
    report: str | None,
    params: tuple[str, ...],
    as_json: bool,
    as_csv: bool,
    max_rows: int | None,
) -> None:
    """Audit ledgers offline in DuckDB: SQL, canned reports, or a table summary.

    PATHS are ledger directories (one per agent); they are opened read-only and loaded
    into one DuckDB database (in memory, or the new file given by --database) whose
    tables all carry an agent_id column:
    agents, records, messages, tool_calls, turns, prompts, prompt_sections, omissions,
    deltas, episodes, plans, and simulated_calls for a ledger `holon simulate` wrote
    (schemas in docs/audit.md). Without --sql or --report, lists
    the tables and their row counts. Queries cannot write files. --json and --csv write
    every row as it is fetched, so a result of any size streams through.
    """
    if sql is not None and report is not None:
        raise click.UsageError("pass either --sql or --report, not both")
    if as_json and as_csv:
        raise click.UsageError("pass either --json or --csv, not both")
    if params and report is None:
        raise click.UsageError("--param applies to --report only")
    if max_rows is not None and (as_json or as_csv):
        raise click.UsageError(
            "--max-rows applies to the table output; with --json or --csv, put a LIMIT in the SQL"
        )
    # A report's parameters are checked before the (possibly long) load.
    query = report_query(report, **_parse_params(params)) if report is not None else None
    with progress_total("loading") as advance:
        con = connect(list(paths), progress=advance, database=database, memory_limit=memory_limit)
    try:
        # Loading is done: from here on no query may touch the file system, so audit
        # SQL cannot write anywhere (COPY ... TO, ATTACH, ...).
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        if sql is not None:
            stream = open_query(con, sql)
        elif query is not None:
            stream = open_query(con, *query)
        else:
            counts = " UNION ALL ".join(
                f'SELECT \'{name}\' AS "table", count(*) AS "rows" FROM {name}' for name in TABLES
            )
            stream = open_query(con, counts)
        if as_json:
            _echo_json(stream)
        elif as_csv:
            _echo_csv(stream)
        else:
            _echo_table(stream, TABLE_ROWS if max_rows is None else max_rows)
    finally:
        con.close()
