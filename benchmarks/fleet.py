"""Fleet benchmark with Spark: the Parquet export of 1,000 ledgers read as it is by Spark local mode.

Run once with ``python -m benchmarks fleet`` after ``pip install pyspark`` into your venv
(pyspark is no dependency of holon: it is not in any extra nor in the lock; Java 17 or newer
must be on the PATH). Not part of ``make bench``. The fleet is benchmarks/parquet.py's
(``HOLON_BENCH_FLEET_LEDGERS``, default 1,000), exported once with
:func:`holon.audit.export_parquet`. Measured in the same run, each side by side with
DuckDB over the same files (``open_export()``'s views):

* every table read (``spark.read.parquet(<out>/<table>)``, Hive partitions discovered,
  their types not guessed) and counted; the counts must equal DuckDB's;
* a per-tool report (calls, errors, p50 duration per agent and tool) over ``tool_calls``,
  filtered on a month of the ``date`` partition, in Spark SQL and in DuckDB.

Spark's figures include no JVM start-up (the session starts before the clock) and no
first-job warm-up (one untimed read runs first).
"""

from __future__ import annotations

import importlib
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.parquet import generate_fleet
from holon.audit import TABLES, export_parquet, open_export

_REPORT = """
SELECT agent_id, tool, count(*) AS calls, count_if(status = 'error') AS errors,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50_ms
FROM tool_calls WHERE {date} BETWEEN DATE '2026-02-01' AND DATE '2026-02-28'
GROUP BY agent_id, tool ORDER BY agent_id, tool
"""


def _spark() -> Any:
    """A local Spark session on the machine's cores, reading partitions as text (as _schema.json says)."""
    sql: Any = importlib.import_module("pyspark.sql")
    return (
        sql.SparkSession.builder.master("local[*]")
        .appName("holon-fleet")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .getOrCreate()
    )


def main() -> None:
    """Print Spark's read and report times over the export beside DuckDB's."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-fleet-") as tmp_name:
        tmp = Path(tmp_name)
        paths, records = generate_fleet(tmp / "ledgers")
        started = time.perf_counter()
        export_parquet(paths, tmp / "lake")
        print(
            f"exported {len(paths):,} ledgers ({records:,} records) in {time.perf_counter() - started:.1f}s"
        )
        started = time.perf_counter()
        spark = _spark()
        spark.sparkContext.setLogLevel("ERROR")
        print(f"Spark {spark.version} local session started in {time.perf_counter() - started:.1f}s")
        duck = open_export(tmp / "lake")
        # Spark's first job compiles and loads its classes: run one, untimed, so that the
        # first table's figure is a read too.
        spark.read.parquet(str(tmp / "lake" / "agents")).count()
        types = dict(spark.read.parquet(str(tmp / "lake" / "tool_calls")).dtypes)
        print(
            f"Spark reads tool_calls.intent_time as {types['intent_time']}, args as {types['args']}, "
            f"date as {types['date']}, agent_id as {types['agent_id']}"
        )
        spark_total = duck_total = 0.0
        print("read and count every table, s:")
        for name in TABLES:
            started = time.perf_counter()
            frame = spark.read.parquet(str(tmp / "lake" / name))
            spark_rows = frame.count()
            spark_s = time.perf_counter() - started
            frame.createOrReplaceTempView(name)
            started = time.perf_counter()
            (duck_rows,) = duck.execute(f"SELECT count(*) FROM {name}").fetchone() or (0,)
            duck_s = time.perf_counter() - started
            if spark_rows != duck_rows:
                raise SystemExit(f"{name}: Spark counted {spark_rows:,} rows, DuckDB {duck_rows:,}")
            spark_total += spark_s
            duck_total += duck_s
            print(
                f"  {name:<16} Spark {spark_s:>6.2f}   DuckDB {duck_s:>6.2f}   x{spark_s / duck_s:>6.1f}"
                f"   {spark_rows:>9,} rows"
            )
        print(
            f"  {'every table':<16} Spark {spark_total:>6.2f}   DuckDB {duck_total:>6.2f}   "
            f"x{spark_total / duck_total:>6.1f}"
        )
        started = time.perf_counter()
        spark_report = spark.sql(_REPORT.format(date="to_date(date)")).collect()
        spark_s = time.perf_counter() - started
        started = time.perf_counter()
        duck_report = duck.execute(_REPORT.format(date="date")).fetchall()
        duck_s = time.perf_counter() - started
        if len(spark_report) != len(duck_report):
            raise SystemExit(f"the report: Spark {len(spark_report):,} rows, DuckDB {len(duck_report):,}")
        print(
            f"per-tool report over a month of tool_calls: Spark {spark_s:.2f} s, DuckDB {duck_s:.2f} s, "
            f"x{spark_s / duck_s:.1f}; {len(duck_report):,} rows each"
        )
        spark.stop()
        duck.close()


if __name__ == "__main__":
    main()
