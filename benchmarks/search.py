"""Memory search benchmark: what a daemon's first ``holon_search`` and each later one cost.

Run: ``python -m benchmarks.search`` (also part of ``make bench``).

A generated migration session (tests/context_session.py) of 10,000 turns — about
72,000 records, 62,000 of them with searchable text — is read from a real ledger, as
``Agent.search`` does on its first call. Measured, side by side in one run:

- **Index build**: :class:`holon.search.MemorySearch` over every record (documents per
  second). This is the first search's cost; later searches add only new records.
- **Query**: the p50 of a fixed set of queries (rare and frequent terms, identifiers),
  at ``limit=8`` as the recall tool asks, beside the baseline a search without an
  index pays — tokenizing every document's text per query and scoring it.
"""

from __future__ import annotations

import math
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from holon.context import Budget, RenderConfig
from holon.context.search import terms
from holon.ledger import Ledger
from holon.records import Record
from holon.search import MemorySearch, evidence_text
from tests.context_session import run_session
from tests.ledger_support import with_real_blobs

TURNS = 10_000
QUERIES = (
    "zebra stripe colours",  # rare: one early work item
    "pg_dump schema-only",  # a decision's identifiers
    "replica lag vacuum",  # frequent words of tool outputs
    "billing/procs/refund.sql",  # a path, whole and by part
    "rollback",  # one term, in a plan step
    "invoice",  # the most frequent kind of term
)
REPEATS = 5


def _ledger_records(root: Path) -> list[Record]:
    session = run_session(
        TURNS, Budget(context_window=32_000, output_reserve=4_000), RenderConfig(prompt_cache_key="b"),
        seed=11, render=False,
    )  # fmt: skip
    with Ledger.create(root / "L", agent_id="bench", fsync="never") as ledger:
        ledger.append_many(with_real_blobs(ledger, record) for record in session.live.records)
    with Ledger.open(root / "L", readonly=True) as ledger:
        return list(ledger.read())


def _scan(texts: list[str], query: str, limit: int) -> list[int]:
    """The no-index baseline: tokenize every document and score it (BM25, same formula)."""
    wanted = set(terms(query))
    counted = [terms(text) for text in texts]
    n = len(counted)
    avg = sum(len(words) for words in counted) / n
    frequency = {t: sum(1 for words in counted if t in words) for t in wanted}
    scores: list[tuple[float, int]] = []
    for index, words in enumerate(counted):
        score = 0.0
        for term in wanted:
            tf = words.count(term)
            if tf:
                idf = math.log(1.0 + (n - frequency[term] + 0.5) / (frequency[term] + 0.5))
                score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(words) / avg))
        if score:
            scores.append((score, index))
    return [index for _, index in sorted(scores, reverse=True)[:limit]]


def _p50_ms(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="holon-bench-search-"))
    try:
        records = _ledger_records(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    builds = []
    index = MemorySearch()
    for _ in range(3):
        started = time.perf_counter()
        index = MemorySearch(records)
        builds.append(time.perf_counter() - started)
    build = statistics.median(builds)
    texts = [text for record in records if (text := evidence_text(record.body))]
    print(f"{len(records):,} records, {len(index):,} documents indexed")
    print(f"index build (first search): {build:.2f} s, {len(index) / build:,.0f} documents/s")
    # The scan costs the same for every query (it tokenizes everything), so it is timed once.
    scan = _p50_ms(lambda: _scan(texts, QUERIES[0], 8), repeats=3)
    print(f"no-index scan per query: {scan:.0f} ms")
    print(f"{'query':<30} {'holon p50':>10} {'scan / holon':>13}")
    for query in QUERIES:
        ours = _p50_ms(lambda q=query: index.search(q, limit=8))  # type: ignore[misc]
        print(f"{query:<30} {ours:>8.1f}ms {scan / ours:>12.0f}x")


if __name__ == "__main__":
    main()
