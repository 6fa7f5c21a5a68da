"""Context rendering benchmark: `build_context` cost must not grow with history.

Measures, in one run:

- ``build_context`` p50 at a 32k budget at turn 100 and at turn 10,000 of the same
  generated session (target: ratio ≤ 1.3), beside a naive baseline that renders the
  full transcript (every record's canonical JSON) and counts its tokens;
- the default estimator's error against o200k on the calibration corpus
  (fixtures/corpus/), per kind of text.

Run: ``python -m benchmarks.context`` (or ``make bench``).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import holon.records as r
from holon.context import Budget, RenderConfig, build_context, get_estimator
from holon.context.render import clear_count_cache
from holon.testing import AGENT, Session, run_session

ROOT = Path(__file__).resolve().parent.parent
BUDGET = Budget(context_window=32_000, output_reserve=4_000)
CONFIG = RenderConfig(prompt_cache_key="bench")
TARGET_RATIO = 1.3
CHECKPOINTS = (100, 10_000)
REPEATS = 40


def _p50(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _naive(session: Session) -> None:
    # "Append everything": the whole transcript as text, then count it.
    text = "\n".join(r.encode_json_record(rec).decode() for rec in session.live.records)
    get_estimator().count(text)


def _measure(turns: int) -> tuple[float, float, float, int]:
    """Cold p50, warm p50, naive p50 and prompt tokens at the last turn of a session."""
    # The session renders its last turns like the runtime (earlier turns are only
    # folded, to keep the run short); the last turn's prompt is then re-rendered.
    session = run_session(turns, BUDGET, CONFIG, seed=11, render_from=turns - 3)
    state = session.live.state
    index = session.index

    def render() -> int:
        return build_context(state, BUDGET, CONFIG, agent_id=AGENT, index=index).total_tokens

    def cold() -> None:
        # No memoized token counts: every text of the prompt is counted afresh.
        clear_count_cache()
        render()

    return (
        _p50(cold),
        _p50(render),
        _p50(lambda: _naive(session), repeats=3 if turns > 1000 else 10),
        render(),
    )


def _render_figures() -> tuple[dict[int, float], dict[int, float], dict[int, float], dict[int, int]]:
    ours: dict[int, float] = {}
    warm: dict[int, float] = {}
    naive: dict[int, float] = {}
    tokens: dict[int, int] = {}
    for turns in CHECKPOINTS:
        ours[turns], warm[turns], naive[turns], tokens[turns] = _measure(turns)
    return ours, warm, naive, tokens


def _estimator_table() -> list[tuple[str, int, int, int, float]]:
    heuristic, exact = get_estimator(), get_estimator("o200k_base")
    groups: dict[str, list[tuple[int, int]]] = {}
    for path in sorted((ROOT / "fixtures" / "corpus").glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        groups.setdefault(path.name.split("-")[0], []).append((heuristic.count(text), exact.count(text)))
    rows = []
    for kind in sorted(groups):
        pairs = groups[kind]
        errors = [(h - e) / e for h, e in pairs]
        under = sum(1 for x in errors if x < -0.05)
        rows.append(
            (kind, len(pairs), sum(e for _, e in pairs), under, sum(abs(x) for x in errors) / len(errors))
        )
    return rows


def main() -> None:
    ours, warm, naive, tokens = _render_figures()
    first, last = CHECKPOINTS
    ratio = ours[last] / ours[first]
    print(f"build_context p50, budget {BUDGET.context_window:,} (reserve {BUDGET.output_reserve:,}):")
    print(
        f"  {'turn':>7}  {'holon cold':>10}  {'holon warm':>10}  {'naive full transcript':>22}  {'tokens':>7}"
    )
    for turns in CHECKPOINTS:
        print(
            f"  {turns:>7,}  {ours[turns] * 1e3:>8.2f}ms  {warm[turns] * 1e3:>8.2f}ms  "
            f"{naive[turns] * 1e3:>20.2f}ms  {tokens[turns]:>7,}"
        )
    verdict = "ok" if ratio <= TARGET_RATIO else "MISSED"
    print(
        f"  ratio turn {last:,} / turn {first}: holon cold {ratio:.2f} (target ≤ {TARGET_RATIO}: {verdict}), "
        f"warm {warm[last] / warm[first]:.2f}, naive {naive[last] / naive[first]:.1f}"
    )

    print("\nestimator holon-heuristic vs o200k_base on fixtures/corpus:")
    print(f"  {'kind':<10} {'texts':>5} {'o200k tokens':>12} {'under>5%':>8} {'mean |err|':>10}")
    rows = _estimator_table()
    for kind, n, total, under, mae in rows:
        print(f"  {kind:<10} {n:>5} {total:>12,} {under:>8} {mae:>9.1%}")
    n_all = sum(row[1] for row in rows)
    under_all = sum(row[3] for row in rows)
    mae_all = sum(row[4] * row[1] for row in rows) / n_all
    print(
        f"  {'all':<10} {n_all:>5} {sum(row[2] for row in rows):>12,} {under_all:>8} {mae_all:>9.1%}"
        f"   (targets: under>5% on ≤ 3% of texts, mean |err| ≤ 15%)"
    )
    if ratio > TARGET_RATIO:
        sys.exit(1)


if __name__ == "__main__":
    main()
