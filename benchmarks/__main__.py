"""Run every benchmark in turn (`make bench`); each prints its figures beside its baseline."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence

from benchmarks import bench_dir

# Order follows the layers: storage, memory, rendering, runtime, audit, the run report, the command line's
# start-up, evaluation.
SUITES = (
    "ledger", "append_cost", "projections", "estimator", "context", "search", "retrieval", "runtime",
    "audit", "audit_scale", "report", "parquet", "cli_start", "eval",
)  # fmt: skip
#: Suites that run only when named: they need what holon does not install (fleet: pyspark, Java).
OPTIONAL = ("fleet",)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run the named benchmark suites in order, or every one (make bench).",
        epilog="A suite also runs alone: python -m benchmarks.NAME (benchmarks.eval takes options).",
    )
    # No choices=: argparse 3.11 checks an empty nargs="*" list against them and refuses it.
    parser.add_argument(
        "names",
        nargs="*",
        metavar="SUITE",
        help=f"suites to run, in order (default: all): {', '.join(SUITES)}; "
        f"only when named: {', '.join(OPTIONAL)}",
    )
    return parser


def main(argv: Sequence[str]) -> int:
    parser = _parser()
    names: list[str] = parser.parse_args(list(argv)).names
    unknown = [name for name in names if name not in SUITES + OPTIONAL]
    if unknown:
        parser.error(
            f"no suite {', '.join(map(repr, unknown))}; the suites are {', '.join(SUITES + OPTIONAL)}"
        )
    bench_dir()  # a HOLON_BENCH_DIR that cannot be used stops the run before any suite, not minutes in
    for name in names or SUITES:
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"\n== {name} " + "=" * (60 - len(name)))
        started = time.perf_counter()
        module.main()
        print(f"-- {name} done in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
