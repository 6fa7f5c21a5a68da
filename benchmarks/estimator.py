"""Token estimator benchmark: how close the default heuristic counts to o200k, and how fast.

Run: ``python -m benchmarks.estimator`` (also part of ``make bench``; needs the
``tokenizer`` extra, which ``make`` installs).

Accuracy: per kind of text in ``fixtures/corpus/`` (regenerate with ``python -m
tests.corpus``), the o200k token count, how many texts the heuristic under-counts by
more than 5% and its mean absolute error — the figures docs/context-rendering.md quotes
and tests/test_context_estimator.py bounds. Speed: MB/s over the corpus (three times),
side by side with the exact ``o200k_base`` count in the same run, best of five.
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path

from holon.context import Estimator, get_estimator

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"
REPEATS = 5


def _accuracy(texts: dict[str, str], heuristic: Estimator, exact: Estimator) -> None:
    by_kind: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for name, text in texts.items():
        truth = exact.count(text)
        by_kind[name.split("-")[0]].append((truth, (heuristic.count(text) - truth) / truth))
    print(f"{heuristic.name} v{heuristic.version} against {exact.name} on {len(texts)} texts of {CORPUS}")
    print(f"{'kind':<10} {'texts':>5} {'o200k tokens':>12} {'under > 5%':>10} {'mean abs. error':>15}")
    rows = sorted(by_kind.items())
    for kind, errors in [*rows, ("all", [e for _, es in rows for e in es])]:
        tokens = sum(t for t, _ in errors)
        under = sum(1 for _, e in errors if e < -0.05)
        mae = sum(abs(e) for _, e in errors) / len(errors)
        print(f"{kind:<10} {len(errors):>5} {tokens:>12,} {under:>10} {mae:>14.1%}")


def _speed(texts: list[str], estimator: Estimator) -> float:
    size = sum(len(t.encode("utf-8")) for t in texts)
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for text in texts:
            estimator.count(text)
        best = min(best, time.perf_counter() - started)
    return size / best / 1e6


def main() -> None:
    texts = {p.name: p.read_text(encoding="utf-8") for p in sorted(CORPUS.glob("*.txt"))}
    heuristic, exact = get_estimator(), get_estimator("o200k_base")
    _accuracy(texts, heuristic, exact)
    corpus = list(texts.values()) * 3
    fast, slow = _speed(corpus, heuristic), _speed(corpus, exact)
    print(f"speed: {heuristic.name} {fast:.2f} MB/s, {exact.name} {slow:.2f} MB/s (x{fast / slow:.2f})")


if __name__ == "__main__":
    main()
