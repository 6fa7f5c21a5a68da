"""Run report: what `holon report` costs beside the audit load it is drawn from.

Run with ``python -m benchmarks report`` (or ``make bench``); set
``HOLON_BENCH_REPORT_RECORDS`` for another ledger size (default 300,000 records, about
22,000 model calls). The ledger is the one benchmarks/audit.py generates. Measured in the
same run, each ROUNDS times in turn (the median is printed):

* baseline: :func:`holon.audit.connect` alone — the load every report starts with;
* report: :func:`holon.report.report_of` — the same load, the queries of
  :func:`holon.report.read_run` and the page :func:`holon.report.report_html` draws.

The ratio says what the report adds to the load; the page's size says it stays bounded
(the per-call charts draw at most MAX_CALL_POINTS buckets).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.audit import generate
from holon.audit import connect
from holon.report import read_run, report_html, report_of
from holon.report.page import MAX_CALL_POINTS

N_RECORDS = int(os.environ.get("HOLON_BENCH_REPORT_RECORDS", "300000"))
ROUNDS = 3


def _load(ledger: Path) -> float:
    started = time.perf_counter()
    connect(ledger).close()
    return time.perf_counter() - started


def _report(ledger: Path) -> tuple[float, int]:
    started = time.perf_counter()
    page = report_of(ledger)
    return time.perf_counter() - started, len(page.encode())


def main() -> None:
    """Print the load, the report and their ratio, and the page's size."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-report-") as tmp:
        ledger = Path(tmp) / "ledger"
        started = time.perf_counter()
        records = generate(ledger, N_RECORDS)
        con = connect(ledger)
        data = read_run(con)
        con.close()
        print(
            f"generated {records:,} records ({len(data.calls):,} model calls, {data.tool_call_count:,} tool "
            f"calls) in {time.perf_counter() - started:.1f}s; per-call charts drawn as at most "
            f"{MAX_CALL_POINTS:,} points"
        )
        loads: list[float] = []
        reports: list[float] = []
        size = 0
        for _ in range(ROUNDS):  # alternated: load from other processes falls on both
            loads.append(_load(ledger))
            seconds, size = _report(ledger)
            reports.append(seconds)
        drawn = time.perf_counter()
        report_html(data)
        draw = time.perf_counter() - drawn
        load, report = statistics.median(loads), statistics.median(reports)
        print(f"{'step':<46} {'median s':>9}")
        print(f"{'baseline: holon.audit.connect (the load)':<46} {load:>9.2f}")
        print(f"{'holon.report.report_of (load, queries, page)':<46} {report:>9.2f}")
        print(f"{'  of which report_html (the page alone)':<46} {draw:>9.2f}")
        print(f"report / load: {report / load:.2f}x; page {size:,} bytes")


if __name__ == "__main__":
    main()
