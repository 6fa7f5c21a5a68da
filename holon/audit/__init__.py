"""holon.audit: ledgers as a DuckDB dataset — tables, canned reports, Parquet export.

>>> con = connect(["ledgers/agent-1", "ledgers/agent-2"])  # doctest: +SKIP
>>> run_report(con, "tools", window=3).rows  # doctest: +SKIP
>>> export_parquet(["ledgers/agent-1"], "out/")  # doctest: +SKIP
>>> run_report(open_export("out/"), "tools").rows  # the same report over the Parquet  # doctest: +SKIP

Ledgers are opened read-only; audit never writes to a ledger. See docs/audit.md for
the table schemas, the reports and the fleet/Parquet story.

What it may import: :mod:`holon.records`, :mod:`holon.errors`, :mod:`holon.ledger`,
:mod:`holon.projections`, :mod:`holon.context`, :mod:`holon.importers`, :mod:`holon.simulate`
(a simulated ledger's comparison file) and ``holon.progress``; of third parties msgspec,
duckdb, zstandard and click (tests/test_layers.py holds it).
"""

from holon.audit.load import connect, memory_limit_problem
from holon.audit.parquet import export_parquet, open_export
from holon.audit.query import AuditError, QueryResult, RowStream, open_query, run_sql
from holon.audit.reports import REPORTS, Report, report_query, run_report
from holon.audit.tables import TABLES, Table

__all__ = [
    "REPORTS",
    "TABLES",
    "AuditError",
    "QueryResult",
    "Report",
    "RowStream",
    "Table",
    "connect",
    "export_parquet",
    "memory_limit_problem",
    "open_export",
    "open_query",
    "report_query",
    "run_report",
    "run_sql",
]
