"""Projection benchmark: post-turn refresh cost stays flat as the ledger grows; fold throughput.

Run: ``python -m benchmarks.projections`` (also part of ``make bench``).

Sessions are generated with the fixture session's generator (several work items,
plans, waits, tasks, follow-ups, tool calls with files) through the live append loop:
one with 100 turns of history and one with 10,000, each followed by the *same* 50-turn
probe script (open threads are closed first), so the two measurements differ only in
the length of the ledger behind them. Measured, side by side in the same run:

- refresh cost per turn (``post_turn_refresh`` + folding what it returns) over the
  probe turns, each refresh repeated; target: ratio (10,000 / 100) ≤ 1.3;
- the naive baseline for the same turns: re-folding the whole history, then refreshing
  (what "recompute from scratch" costs);
- fold throughput of the whole ledger in records/s (target ≥ 200,000/s), beside the
  naive per-turn re-fold's records/s at turn 10,000.
"""

from __future__ import annotations

import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType

from holon import records as r
from holon.projections import ProjectionState, apply, fold, post_turn_refresh

ROOT = Path(__file__).resolve().parent.parent
EARLY, LATE = 100, 10_000
PROBE = 50
REPEAT = 40
REFRESH_RATIO_TARGET = 1.3
THROUGHPUT_TARGET = 200_000


def _make_session() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_session", ROOT / "fixtures" / "make_session.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _turn_end_states(records: list[r.Record], wanted: set[int]) -> dict[int, tuple[int, ProjectionState]]:
    """State right after the turn_ended of each wanted turn, with the record's index."""
    out: dict[int, tuple[int, ProjectionState]] = {}
    state = fold(())
    for i, record in enumerate(records):
        state = apply(state, record)
        if record.kind == r.TurnEnded.KIND and record.turn in wanted:
            out[record.turn] = (i, state)
    return out


def _refresh_once(state: ProjectionState) -> ProjectionState:
    for record in post_turn_refresh(state):
        state = apply(state, record)
    return state


def _refresh_cost(states: list[ProjectionState]) -> float:
    """Median over repeats of the mean per-turn refresh time (seconds) across the window."""
    samples = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        for state in states:
            _refresh_once(state)
        samples.append((time.perf_counter() - started) / len(states))
    return statistics.median(samples)


def _naive_cost(records: list[r.Record], index: int) -> float:
    """Re-fold the whole history up to the turn_ended at ``index``, then refresh (best of 3)."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        _refresh_once(fold(records[: index + 1]))
        best = min(best, time.perf_counter() - started)
    return best


def _probe_states(history: int) -> tuple[list[r.Record], list[ProjectionState], int]:
    """Records of a session with ``history`` turns plus the probe, the states at each
    probe turn's end, and the index of the first probe turn's turn_ended record."""
    records = _make_session().session_multi_work(history, probe_turns=PROBE + 1).records
    probe = set(range(history + 2, history + PROBE + 2))  # turn history + 1 closes open threads
    ends = _turn_end_states(records, probe)
    return records, [ends[t][1] for t in sorted(ends)], ends[min(ends)][0]


def main() -> None:
    started = time.perf_counter()
    early_records, early_states, early_index = _probe_states(EARLY)
    records, late_states, late_index = _probe_states(LATE)
    print(
        f"sessions: {EARLY} and {LATE} turns of history + a {PROBE}-turn probe; "
        f"{len(records)} records in the long one (generated in {time.perf_counter() - started:.1f}s)"
    )

    early_cost = _refresh_cost(early_states)
    late_cost = _refresh_cost(late_states)
    ratio = late_cost / early_cost
    naive_early = _naive_cost(early_records, early_index)
    naive_late = _naive_cost(records, late_index)

    fold_times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fold(records)
        fold_times.append(time.perf_counter() - t0)
    throughput = len(records) / min(fold_times)
    naive_throughput = (late_index + 1) / naive_late

    print()
    print(f"{'post-turn refresh per turn':<34}{'turn 100':>14}{'turn 10,000':>14}{'ratio':>10}")
    print(
        f"{'  incremental (refresh + fold)':<34}{early_cost * 1e6:>11.1f} us"
        f"{late_cost * 1e6:>11.1f} us{ratio:>10.2f}"
    )
    print(
        f"{'  naive (re-fold history + refresh)':<34}{naive_early * 1e6:>11.1f} us"
        f"{naive_late * 1e6:>11.1f} us{naive_late / naive_early:>10.2f}"
    )
    print()
    print(f"fold throughput (all {len(records)} records): {throughput:>12,.0f} records/s")
    print(
        f"naive per-turn re-fold at turn 10,000:   {naive_throughput:>12,.0f} records/s "
        f"re-read, i.e. {naive_late * 1e3:.1f} ms per turn"
    )
    print()
    ok_ratio = ratio <= REFRESH_RATIO_TARGET
    ok_throughput = throughput >= THROUGHPUT_TARGET
    print(f"refresh ratio {ratio:.2f} (target <= {REFRESH_RATIO_TARGET}): {'PASS' if ok_ratio else 'MISSED'}")
    print(
        f"fold throughput {throughput:,.0f}/s (target >= {THROUGHPUT_TARGET:,}/s): "
        f"{'PASS' if ok_throughput else 'MISSED'}"
    )


if __name__ == "__main__":
    main()
