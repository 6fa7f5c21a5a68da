"""holon.report: one self-contained HTML picture of a run, drawn from its audit tables.

>>> html = report_of("ledgers/agent-1")  # doctest: +SKIP
>>> Path("report.html").write_text(html)  # doctest: +SKIP

The page shows tokens per model call by section, the cached share of each call with its
prefix breaks and their causes, evictions and restores, tool calls, episodes, and the
cost under the cache model (docs/report.md). Every figure is a query over the tables of
:mod:`holon.audit`; the ledger is opened read-only.

What it may import: :mod:`holon.errors`, :mod:`holon.ledger` and :mod:`holon.audit` (every
figure is an audit query), msgspec and duckdb (tests/test_layers.py holds it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from holon.audit import connect
from holon.errors import UsageError
from holon.ledger.files import check_outside
from holon.report.data import CostSeries, RunData, read_run, simulated_series
from holon.report.page import report_html

__all__ = ["CostSeries", "RunData", "read_run", "report_html", "report_of", "write_report"]


def report_of(
    path: str | os.PathLike[str],
    *,
    comparisons: Sequence[CostSeries] = (),
    progress: Callable[[int, int], None] | None = None,
    memory_limit: str | None = None,
) -> str:
    """The HTML report of the ledger at ``path`` (see :func:`report_html` for ``comparisons``).

    A ledger ``holon simulate`` wrote is drawn with its two series — holon's prompts and
    the transcript's tool's full history, both under the prefix-block cache model — after
    ``comparisons``. Raises what :func:`holon.audit.connect` raises for a path that is not
    a readable ledger.
    """
    con = connect(path, progress=progress, memory_limit=memory_limit)
    try:
        return report_html(read_run(con), comparisons=(*comparisons, *simulated_series(con)))
    finally:
        con.close()


def write_report(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    comparisons: Sequence[CostSeries] = (),
    progress: Callable[[int, int], None] | None = None,
    memory_limit: str | None = None,
) -> int:
    """Write the report of the ledger at ``path`` to the file ``out``; returns the bytes written.

    Raises UsageError when ``out`` is inside the ledger directory (a report never writes
    into the ledger it reads) or is a directory, before the ledger is loaded.
    """
    target = Path(out)
    check_outside(Path(path), target, what="report")
    if target.is_dir():
        raise UsageError(f"report {target} is a directory: pass a file name, e.g. {target / 'report.html'}")
    html = report_of(path, comparisons=comparisons, progress=progress, memory_limit=memory_limit)
    data = html.encode()
    try:
        target.write_bytes(data)
    except OSError as exc:
        raise UsageError(f"cannot write the report to {target}: {exc.strerror or exc}") from None
    return len(data)
