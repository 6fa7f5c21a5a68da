"""``python -m benchmarks.eval.sweep KNOB=V1,V2,... [--windows 8000,32000] [--scenarios 0,2]``.

The ``holon`` policy on the generated scenarios with one :class:`~holon.context.RenderConfig`
knob set to each value in turn, everything else at its default: how a default was chosen
(docs/context-rendering.md cites the sweeps). It prints one line per scenario, window and
value — cached share and cost in both cache models, live facts, false carry-over and, on
the conversation, answer evidence — and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import msgspec

from benchmarks.eval.metrics import evaluate
from benchmarks.eval.policies import HolonPolicy
from benchmarks.eval.run import GENERATED, WINDOWS, budget_for
from benchmarks.eval.trace import TokenCounter
from holon.context import RenderConfig

__all__ = ["main"]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eval.sweep", description=__doc__)
    parser.add_argument("knob", help="a RenderConfig field and its values: rounds_reserve=0,0.3")
    parser.add_argument("--windows", default=",".join(map(str, WINDOWS)), help="context windows (tokens)")
    parser.add_argument(
        "--scenarios",
        default=",".join(map(str, range(len(GENERATED)))),
        help=f"positions in the generated plan (0-{len(GENERATED) - 1})",
    )
    args = parser.parse_args(list(argv))
    name, sep, values = args.knob.partition("=")
    if not sep or name not in RenderConfig.__struct_fields__:
        parser.error(f"{args.knob!r}: give a RenderConfig field and values, such as rounds_reserve=0,0.3")
    counter = TokenCounter()
    base = RenderConfig(prompt_cache_key="eval", estimator=counter.estimator.name)
    kind = type(getattr(base, name))
    try:
        configs = [msgspec.structs.replace(base, **{name: kind(v)}) for v in values.split(",")]
    except (TypeError, ValueError) as exc:
        parser.error(f"{args.knob!r}: {exc}")
    for position in (int(p) for p in args.scenarios.split(",")):
        scenario = GENERATED[position]()
        for window in (int(w) for w in args.windows.split(",")):
            budget = budget_for(window)
            for config in configs:
                started = time.perf_counter()
                run = evaluate(
                    HolonPolicy(scenario, budget, counter, config),
                    scenario,
                    window=window,
                    available=budget.available,
                )
                print(
                    f"{scenario.name} @ {window:,} {name}={getattr(config, name)}: "
                    f"prefix {_pct(run.prefix.share)} {run.prefix.cost / 1e6:.2f}M, "
                    f"breakpoints {_pct(run.breakpoints.share)} {run.breakpoints.cost / 1e6:.2f}M, "
                    f"live {_pct(run.retention())}, carry-over {_pct(run.carry_over)}, "
                    f"evidence {_pct(run.evidence_share)} ({time.perf_counter() - started:.0f}s)",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
