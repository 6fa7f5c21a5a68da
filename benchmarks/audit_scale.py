"""Audit scaling benchmark: load rate and peak memory, unbounded load against the bounded one.

Run with ``python -m benchmarks.audit_scale`` (or ``make bench``); set
``HOLON_BENCH_AUDIT_RECORDS`` for another ledger size (default 1,000,000). The ledger is
the one benchmarks/audit.py generates. Each load runs in a fresh process (peak RSS is a
per-process high-water mark) and is followed by the ``tools`` report; measured in the
same run:

* old path: :func:`holon.audit.connect` in memory, with no memory limit and chunks of
  ``records / (2 * CPUs)`` records (the sizing before chunks were capped: a worker's
  memory grew with the ledger);
* new path, in memory: chunks capped at ``MAX_CHUNK_RECORDS``, ``memory_limit`` set
  (DuckDB spills past it to a temporary directory);
* new path, database file: the same, the tables written into a ``.duckdb`` file.

Peak RSS is printed for the loading process and for the largest extraction worker;
together they bound what a load needs (workers run before DuckDB starts).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.audit import generate
from holon.audit import connect, run_report
from holon.audit.extract import CHUNK_RECORDS, read_info

N_RECORDS = int(os.environ.get("HOLON_BENCH_AUDIT_RECORDS", "1000000"))
MEMORY_LIMIT = "512MB"
PATHS = ("old", "memory", "file")


def _child(mode: str, ledger: str, tmp: str) -> None:
    """Load ``ledger`` the way ``mode`` says, run a report, print the figures as JSON."""
    records = read_info(ledger, 0).records
    started = time.perf_counter()
    if mode == "old":
        chunk = max(CHUNK_RECORDS, -(-records // (2 * (os.cpu_count() or 1))))
        con = connect(ledger, chunk_records=chunk)
    elif mode == "memory":
        con = connect(ledger, memory_limit=MEMORY_LIMIT)
    else:
        con = connect(ledger, memory_limit=MEMORY_LIMIT, database=os.path.join(tmp, "audit.duckdb"))
    loaded = time.perf_counter()
    rows = len(run_report(con, "tools").rows)
    reported = time.perf_counter()
    con.close()
    figures = {
        "records": records,
        "load_s": loaded - started,
        "report_s": reported - loaded,
        "rows": rows,
        "parent_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }
    print(json.dumps(figures))


def _measure(mode: str, ledger: Path, tmp: Path) -> dict[str, float]:
    work = tmp / mode
    work.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.audit_scale", "--child", mode, str(ledger), str(work)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    figures: dict[str, float] = json.loads(out.splitlines()[-1])
    return figures


def main() -> None:
    """Print each path's load rate, report time and peak RSS side by side."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-audit-scale-") as tmp_name:
        tmp = Path(tmp_name)
        ledger = tmp / "ledger"
        started = time.perf_counter()
        records = generate(ledger, N_RECORDS)
        print(f"generated {records:,} records in {time.perf_counter() - started:.1f}s; {os.cpu_count()} CPUs")
        print(f"{'path':<44} {'records/s':>10} {'report':>8} {'parent RSS':>11} {'worker RSS':>11}")
        labels = {
            "old": "old: in memory, unbounded",
            "memory": f"new: in memory, memory_limit={MEMORY_LIMIT}",
            "file": f"new: .duckdb file, memory_limit={MEMORY_LIMIT}",
        }
        for mode in PATHS:
            f = _measure(mode, ledger, tmp)
            print(
                f"{labels[mode]:<44} {f['records'] / f['load_s']:>10,.0f} {f['report_s'] * 1e3:>6.0f}ms "
                f"{f['parent_mb']:>8,.0f} MB {f['worker_mb']:>8,.0f} MB"
            )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(*sys.argv[2:5])
    else:
        main()
