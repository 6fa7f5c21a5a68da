"""Fleet Parquet benchmark: export 1,000 ledgers, add to the export as some grow, report over it.

Run with ``python -m benchmarks parquet`` (or ``make bench``); ``HOLON_BENCH_FLEET_LEDGERS``
sets another fleet size (default 1,000). Each ledger is benchmarks/audit.py's generator
(turns with a rendered prompt, tool calls, plans, deltas, episodes), ~400 records a
minute apart, the ledgers' starts 7 hours apart, so the fleet spans months and some
ledgers cross midnight (two date partitions). Measured in the same run:

* full export: :func:`holon.audit.export_parquet` of the fleet (load, then every table
  by agent and date), beside the load alone (:func:`holon.audit.connect`) and beside the
  earlier export's write (one ``COPY ... PARTITION_BY (agent_id)`` per table of the
  loaded tables: no dates, times, placeholders or schema);
* every canned report over the export loaded into DuckDB (``open_export(load=True)``),
  median of 3, beside the same report over the ledgers loaded by ``connect()``, and over
  the export's views (``open_export()``: every query reads the files);
* incremental export after 10% of the ledgers grew by a turn: ``incremental=True`` into
  the tree, beside the full export's time.

Target: every canned report over the 1,000-ledger export in DuckDB together < 2 s.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb

from benchmarks.audit import generate
from holon import records as r
from holon.audit import REPORTS, TABLES, connect, export_parquet, open_export, run_report
from holon.ledger import Ledger

N_LEDGERS = int(os.environ.get("HOLON_BENCH_FLEET_LEDGERS", "1000"))
RECORDS = 400
GROWN_SHARE = 10  # every tenth ledger grows
GROWTH = 12  # records appended to each
START_TS = 1_767_225_600_000  # 2026-01-01T00:00Z
APART_MS = 7 * 3_600_000
STEP_MS = 60_000
REPORT_RUNS = 3
REPORTS_TARGET_S = 2.0


def generate_fleet(root: Path, ledgers: int = N_LEDGERS) -> tuple[list[Path], int]:
    """Write the fleet's ledgers under ``root``; returns their paths and the records in all."""
    paths, records = [], 0
    for i in range(ledgers):
        path = root / f"agent-{i:04d}"
        records += generate(
            path,
            RECORDS,
            agent_id=f"agent-{i:04d}",
            seed=i,
            start_ts=START_TS + i * APART_MS,
            step_ms=STEP_MS,
        )
        paths.append(path)
    return paths, records


def grow(paths: list[Path]) -> int:
    """Append a short turn to every GROWN_SHARE-th ledger, a minute after its newest record; records added."""
    added = 0
    for path in paths[::GROWN_SHARE]:
        with Ledger.open(path, fsync="never") as ledger:
            last = ledger.get(ledger.head()[0])
            turn = max((rec.turn or 0) for rec in ledger.read(max(0, last.seq - 40))) + 1
            bodies: list[r.Body] = [r.TurnStarted(trigger="operator")]
            for call in range((GROWTH - 2) // 2):
                bodies.append(
                    r.ToolIntent(call_id=f"grown-{call}", tool="bash", args={"command": f"make {call}"})
                )
                bodies.append(r.ToolResult(call_id=f"grown-{call}", tool="bash", status="ok", output="ok"))
            bodies.append(r.TurnEnded(outcome="completed"))
            ledger.append_many(
                r.Record(body=body, ts=last.ts + STEP_MS * (n + 1), turn=turn)
                for n, body in enumerate(bodies)
            )
            added += len(bodies)
    return added


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def _report_s(con: duckdb.DuckDBPyConnection, name: str) -> float:
    """Median seconds of report ``name`` on ``con`` over REPORT_RUNS runs."""
    return statistics.median(_timed(lambda: run_report(con, name))[0] for _ in range(REPORT_RUNS))


def _files(root: Path) -> int:
    return sum(1 for _ in root.rglob("*.parquet"))


def main() -> None:
    """Print the export's, the reports' and the incremental export's times beside their baselines."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-parquet-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        paths, records = generate_fleet(tmp / "ledgers")
        print(
            f"generated {len(paths):,} ledgers, {records:,} records in {time.perf_counter() - started:.1f}s"
        )

        load_s, con = _timed(lambda: connect(paths))
        old_write_s, _ = _timed(lambda: _old_layout_write(con, tmp / "old"))
        export_s, _ = _timed(lambda: export_parquet(paths, tmp / "lake"))
        write_s = export_s - load_s
        files = _files(tmp / "lake")
        print(f"full export of {len(paths):,} ledgers ({records:,} records):")
        print(
            f"  holon export_parquet()              {export_s:>7.2f} s   "
            f"{records / export_s:>9,.0f} records/s, {files:,} files"
        )
        print(f"  of which the load (connect())       {load_s:>7.2f} s   (measured alone)")
        print(f"  write, by agent and date            {write_s:>7.2f} s   (export - load)")
        print(
            f"  baseline: write by agent only       {old_write_s:>7.2f} s   x{write_s / old_write_s:.2f}  "
            f"(one COPY per table, the earlier layout, {_files(tmp / 'old'):,} files)"
        )
        shutil.rmtree(tmp / "old")

        open_s, loaded = _timed(lambda: open_export(tmp / "lake", load=True))
        views = open_export(tmp / "lake")
        print(
            f"the export in DuckDB: open_export(load=True) reads {files:,} files in {open_s:.2f} s "
            f"(connect() of the ledgers: {load_s:.2f} s, x{load_s / open_s:.2f})"
        )
        print(f"canned reports over {len(paths):,} ledgers in DuckDB, ms (median of {REPORT_RUNS}):")
        print(
            f"  {'report':<18} {'export loaded':>13} {'ledgers loaded':>14} {'ratio':>6} {'export views':>13}"
            f" {'rows':>7}"
        )
        totals = [0.0, 0.0, 0.0]
        for name in REPORTS:
            figures = [_report_s(each, name) for each in (loaded, con, views)]
            totals = [t + f for t, f in zip(totals, figures, strict=True)]
            rows = len(run_report(loaded, name).rows)
            print(
                f"  {name:<18} {figures[0] * 1e3:>13.1f} {figures[1] * 1e3:>14.1f} "
                f"x{figures[0] / figures[1]:>5.2f} {figures[2] * 1e3:>13.1f} {rows:>7,}"
            )
        print(
            f"  {'every report':<18} {totals[0] * 1e3:>13.1f} {totals[1] * 1e3:>14.1f} "
            f"x{totals[0] / totals[1]:>5.2f} {totals[2] * 1e3:>13.1f}"
        )
        verdict = "met" if totals[0] < REPORTS_TARGET_S else "MISSED"
        print(f"  target: every report over the loaded export < {REPORTS_TARGET_S:.0f} s together: {verdict}")
        for each in (loaded, views, con):
            each.close()

        added = grow(paths)
        before = {p: p.stat().st_mtime_ns for p in (tmp / "lake").rglob("*.parquet")}
        incremental_s, written = _timed(lambda: export_parquet(paths, tmp / "lake", incremental=True))
        kept = sum(1 for p, m in before.items() if p.exists() and p.stat().st_mtime_ns == m)
        grown = len(paths[::GROWN_SHARE])
        print(f"incremental export after {grown} ledgers grew by {added:,} records:")
        print(
            f"  holon export_parquet(incremental)   {incremental_s:>7.2f} s   "
            f"{len(written):,} files written, {kept:,} left as they were"
        )
        print(
            f"  baseline: the full export above     {export_s:>7.2f} s   "
            f"x{export_s / incremental_s:.2f} slower, {files:,} files written"
        )


def _old_layout_write(con: duckdb.DuckDBPyConnection, out: Path) -> None:
    """The earlier export's write: each loaded table as one COPY partitioned by agent only."""
    out.mkdir()
    con.execute("SET threads = 1")
    for name in TABLES:
        con.execute(
            f"COPY {name} TO '{out / name}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (agent_id))"
        )
    con.execute("RESET threads")


if __name__ == "__main__":
    main()
