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
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Final

from benchmarks.eval.doc import write_doc
from benchmarks.eval.metrics import PolicyRun, evaluate, suffix_ceiling
from benchmarks.eval.policies import POLICIES, new_content
from benchmarks.eval.report import svg_chart, terminal_table, verdicts
from benchmarks.eval.scenario import SAMPLES, Scenario, generate, load_samples
from benchmarks.eval.trace import TokenCounter
from benchmarks.eval.unstructured import generate_coding, generate_conversation, generate_tasks
from holon.context import Budget

__all__ = ["GENERATED", "WINDOWS", "command_line", "fingerprint", "main", "parser", "run_scenario"]

ROOT: Final = Path(__file__).resolve().parents[2]
DEFAULT_SAMPLES: Final = ROOT.parent / "shared" / "samples"
#: The generated scenarios, each made by calling it: the structured runs (name, turns, seed,
#: most tool rounds per turn), then the unstructured ones (benchmarks/eval/unstructured.py).
GENERATED: Final[tuple[Callable[[], Scenario], ...]] = (
    partial(generate, "generated-800", 800, seed=8, max_rounds=6),
    partial(generate, "generated-2000", 2000, seed=20, max_rounds=3),
    partial(generate_coding, "coding-unstructured-400", 400, seed=28),
    partial(generate_conversation, "conversation-sessions-30", 30, seed=29),
    partial(generate_tasks, "tasks-subagents-300", 300, seed=30),
)
QUICK: Final[tuple[Callable[[], Scenario], ...]] = (
    partial(generate, "generated-150", 150, seed=8, max_rounds=6),
    partial(generate_coding, "coding-unstructured-80", 80, seed=28),
    partial(generate_conversation, "conversation-sessions-12", 12, seed=29),
    partial(generate_tasks, "tasks-subagents-80", 80, seed=30),
)
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
    new: list[int] | None = None
    for window in windows:
        budget = budget_for(window)
        for policy in POLICIES:
            made = policy(scenario, budget, counter)
            run = evaluate(made, scenario, window=window, available=budget.available)
            if run.heads:
                new = new_content(scenario, budget, counter) if new is None else new
                run.ceiling = suffix_ceiling(new, run.heads, budget.available)
            runs.append(run)
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
                    sorted(run.avoid.items()),
                    (run.evidence_required, run.evidence_found),
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


def _turns(text: str) -> int:
    try:
        turns = int(text)
    except ValueError:
        turns = 0
    if turns < 1:
        # Not a run: 0 is falsy (it would read as "not given") and a negative count
        # generates a scenario of no turns.
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of turns (a whole number, at least 1)")
    return turns


def parser() -> argparse.ArgumentParser:
    """The command's arguments; docs/evaluation.md shows its usage line (:func:`command_line`)."""
    out = argparse.ArgumentParser(prog="python -m benchmarks.eval", description=__doc__.splitlines()[0])
    out.add_argument(
        "--samples",
        type=Path,
        metavar="DIR",
        help=f"folder of real transcripts (default {_shown(DEFAULT_SAMPLES)}, skipped if it does not exist)",
    )
    out.add_argument("--quick", action="store_true", help="short generated scenarios only (a smoke run)")
    out.add_argument("--turns", type=_turns, metavar="N", help="one generated scenario of N turns instead")
    out.add_argument("--no-docs", action="store_true", help="print only; do not write docs/evaluation.*")
    return out


def command_line() -> str:
    """The usage line as docs/evaluation.md shows it: the parser's own, on one line."""
    return " ".join(parser().format_usage().split()).removeprefix("usage: ")


def docs_withheld(missing: Sequence[str], samples_dir: Path) -> str | None:
    """Why this run leaves docs/evaluation.* as they are, or ``None`` when it may write them.

    The page documents the real transcripts too: a run without some of them (a clone
    without ../shared/samples, which ``make bench`` runs this in) would replace their
    figures with nothing, and publish a fingerprint no full run gives.
    """
    if not missing:
        return None
    return (
        f"docs/evaluation.md and .svg not written: {len(missing)} of the {len(SAMPLES)} real transcripts "
        f"the page documents are not in {_shown(samples_dir)}; pass --samples DIR (the folder holding "
        "claude-code/, swe-agent/, tau-bench/ and openhands/), or --no-docs to only print"
    )


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parser()
    args = arguments.parse_args(list(argv) if argv is not None else [])
    samples_dir: Path = DEFAULT_SAMPLES if args.samples is None else args.samples
    missing = [rel for rel, _ in SAMPLES if not (samples_dir / rel).exists()]
    if args.samples is not None and samples_dir.is_dir() and len(missing) == len(SAMPLES):
        # An absent folder skips the samples, as its note says; a folder that exists but
        # holds none of them is a wrong path (one level too high, say), not a choice.
        arguments.error(
            f"--samples {args.samples}: holds none of the real transcripts (such as {SAMPLES[0][0]}); "
            "name the folder holding claude-code/, swe-agent/, tau-bench/ and openhands/"
        )
    started = time.perf_counter()

    generated: list[PolicyRun] = []
    plan = QUICK if args.quick else GENERATED
    if args.turns is not None:
        plan = (partial(generate, f"generated-{args.turns}", args.turns, seed=8, max_rounds=6),)
    for build in plan:
        scenario = build()
        t0 = time.perf_counter()
        generated += run_scenario(scenario)
        print(
            f"{scenario.name}: {scenario.turns:,} turns, {len(scenario.records):,} records, "
            f"{len(scenario.calls):,} model calls, {len(scenario.facts)} planted facts "
            f"({time.perf_counter() - t0:.1f}s)"
        )

    samples: list[PolicyRun] = []
    sample_note: str
    if samples_dir.is_dir():
        found = list(load_samples(samples_dir))
        for scenario in found:
            samples += run_scenario(scenario)
        sample_note = f"{len(found)} real transcripts from {_shown(samples_dir)}"
        if missing:
            # The fingerprint covers the samples: say why it differs from a full run's.
            sample_note += f" ({len(missing)} of {len(SAMPLES)} not found: {', '.join(missing)})"
    else:
        sample_note = (
            f"real transcripts: {_shown(samples_dir)} does not exist — samples skipped (pass --samples DIR)"
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

    if args.no_docs or args.quick or args.turns is not None:
        return 0
    withheld = docs_withheld(missing, samples_dir)
    if withheld is not None:
        print(withheld)
        return 0
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
        command=command_line(),
    )
    print("wrote docs/evaluation.md and docs/evaluation.svg")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
