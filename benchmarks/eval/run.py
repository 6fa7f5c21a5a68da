"""Run the evaluation: every policy on every scenario at every budget, then report.

``python -m benchmarks.eval`` (``make eval``) prints the table, writes docs/evaluation.md
and docs/evaluation.svg; ``--samples DIR`` points at the real transcripts (default
``../shared/samples`` next to the repository), ``--quick`` runs short scenarios,
``--turns N`` runs one generated scenario of N turns, ``--no-docs`` only prints.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from benchmarks.eval.doc import write_doc
from benchmarks.eval.metrics import PolicyRun, evaluate
from benchmarks.eval.policies import POLICIES
from benchmarks.eval.report import svg_chart, terminal_table, verdicts
from benchmarks.eval.scenario import Scenario, generate, load_samples
from benchmarks.eval.trace import TokenCounter
from holon.context import Budget

__all__ = ["GENERATED", "WINDOWS", "fingerprint", "main", "run_scenario"]

ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_SAMPLES: Final = ROOT.parent / "shared" / "samples"
#: name, turns, seed, most tool rounds per turn.
GENERATED: Final = (("generated-800", 800, 8, 6), ("generated-2000", 2000, 20, 3))
QUICK: Final = (("generated-150", 150, 8, 6),)
WINDOWS: Final = (8_000, 32_000)


def budget_for(window: int) -> Budget:
    """The budget every policy gets: the window, an eighth of it reserved for the answer."""
    return Budget(context_window=window, output_reserve=window // 8)


def run_scenario(scenario: Scenario, windows: Sequence[int] = WINDOWS) -> list[PolicyRun]:
    """Every policy on one scenario at each window."""
    runs = []
    # One memo of counts for all runs: a count depends only on the text, so sharing it
    # changes speed, never a figure.
    counter = TokenCounter()
    for window in windows:
        budget = budget_for(window)
        for policy in POLICIES:
            runs.append(
                evaluate(
                    policy(scenario, budget, counter), scenario, window=window, available=budget.available
                )
            )
    return runs


def fingerprint(runs: Sequence[PolicyRun]) -> str:
    """A short hash of every figure: same seed and code → same fingerprint.

    Everything a published figure is computed from: the tokens, what each cache model
    read per call and wrote in all (the cost), the facts required, kept, first lost and
    carried over, evictions and restorations, and where holon's prefix broke.
    """
    h = hashlib.blake2b(digest_size=8)
    for run in runs:
        h.update(
            repr(
                (
                    run.policy,
                    run.scenario,
                    run.window,
                    run.available,
                    run.tokens,
                    *(
                        (cache.total, cache.cached, cache.written, cache.per_call)
                        for cache in (run.prefix, run.breakpoints)
                    ),
                    sorted(run.required.items()),
                    sorted(run.retained.items()),
                    sorted(run.first_loss.items()),
                    (run.stale_calls, run.carried_calls),
                    sorted(run.carried.items()),
                    run.evictions,
                    sorted(run.restores.items()),
                    run.over_budget,
                    sorted(run.breaks.items()),
                )
            ).encode()
        )
    return h.hexdigest()


def _shown(path: Path) -> str:
    """A path as the docs show it: relative to the repository when that is shorter."""
    relative = os.path.relpath(path.resolve(), ROOT)
    return relative if len(relative) < len(str(path)) else str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.eval", description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=DEFAULT_SAMPLES, help="folder of real transcripts")
    parser.add_argument("--quick", action="store_true", help="short generated scenarios only (a smoke run)")
    parser.add_argument("--turns", type=int, help="one generated scenario of this many turns instead")
    parser.add_argument("--no-docs", action="store_true", help="print only; do not write docs/evaluation.*")
    args = parser.parse_args(list(argv) if argv is not None else [])
    started = time.perf_counter()

    generated: list[PolicyRun] = []
    plan = QUICK if args.quick else GENERATED
    if args.turns:
        plan = ((f"generated-{args.turns}", args.turns, 8, 6),)
    for name, turns, seed, rounds in plan:
        scenario = generate(name, turns, seed=seed, max_rounds=rounds)
        t0 = time.perf_counter()
        generated += run_scenario(scenario)
        print(
            f"{name}: {scenario.turns:,} turns, {len(scenario.records):,} records, {len(scenario.calls):,} "
            f"model calls, {len(scenario.facts)} planted facts ({time.perf_counter() - t0:.1f}s)"
        )

    samples: list[PolicyRun] = []
    sample_note: str
    if args.samples.is_dir():
        found = list(load_samples(args.samples))
        for scenario in found:
            samples += run_scenario(scenario)
        sample_note = f"{len(found)} real transcripts from {_shown(args.samples)}"
    else:
        sample_note = (
            f"real transcripts: {_shown(args.samples)} does not exist — samples skipped (pass --samples DIR)"
        )
    print(sample_note)

    print(terminal_table(generated + samples))
    checks = verdicts(generated)
    print("\nTargets (generated scenarios):")
    for check in checks:
        print(f"  [{'met' if check.met else 'MISSED'}] {check.target}: {check.detail}")
    digest = fingerprint(generated + samples)
    elapsed = time.perf_counter() - started
    print(f"\nfingerprint {digest} (same seed and code → same figures); {elapsed:.0f}s")

    if not (args.no_docs or args.quick or args.turns):
        chart = generated[0].scenario
        (ROOT / "docs" / "evaluation.svg").write_text(svg_chart(generated, chart), encoding="utf-8")
        write_doc(
            ROOT / "docs" / "evaluation.md",
            generated=generated,
            samples=samples,
            sample_note=sample_note,
            checks=checks,
            digest=digest,
            chart=chart,
            elapsed=elapsed,
        )
        print("wrote docs/evaluation.md and docs/evaluation.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
