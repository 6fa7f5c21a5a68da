"""Run every benchmark in turn (`make bench`); each prints its figures beside its baseline."""

from __future__ import annotations

import importlib
import sys
import time

# Order follows the layers: storage, memory, rendering, runtime, audit, evaluation.
SUITES = (
    "ledger", "projections", "estimator", "context", "search", "runtime", "audit", "audit_scale", "eval",
)  # fmt: skip


def main(argv: list[str]) -> int:
    wanted = argv or list(SUITES)
    for name in wanted:
        try:
            module = importlib.import_module(f"benchmarks.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"benchmarks.{name}":
                print(f"== {name}: not present, skipped")
                continue
            raise
        print(f"\n== {name} " + "=" * (60 - len(name)))
        started = time.perf_counter()
        module.main()
        print(f"-- {name} done in {time.perf_counter() - started:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
