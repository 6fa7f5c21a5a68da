"""Memory search benchmark: what a daemon's first ``holon_search`` and each later one cost.

Run: ``python -m benchmarks.search`` (also part of ``make bench``; then the 1M-record
ledger of benchmarks/runtime.py, each query's p50 against the 20 ms target), or
``python -m benchmarks.search --ledger PATH`` for an existing ledger's index (built as
``Agent.search`` builds it, streamed: its memory, then the queries' p50).

A generated migration session (holon.testing.run_session) of 10,000 turns — about
72,000 records, 62,000 of them with searchable text — is read from a real ledger, as
``Agent.search`` does on its first call. Measured, side by side in one run:

- **Index build**: :class:`holon.search.MemorySearch` over every record (documents per
  second), reading hits back from the ledger as ``Agent.search``'s does. This is the first
  search's cost; later searches add only new records.
- **Index memory**: what the built index holds (tracemalloc), in all and per document.
- **Query**: the p50 of a fixed set of queries (rare and frequent terms, identifiers),
  at ``limit=8`` as the recall tool asks, beside the baseline a search without an
  index pays — tokenizing every document's text per query and scoring it.
"""

from __future__ import annotations

import gc
import math
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from benchmarks.runtime import _big_ledger
from holon.context import Budget, RenderConfig
from holon.context.search import terms
from holon.ledger import Ledger
from holon.records import Record
from holon.runtime import blob_text_of
from holon.runtime.recall import is_recall
from holon.search import MemorySearch, RecordReader, evidence_text
from holon.testing import run_session, with_real_blobs

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


def _write_ledger(root: Path) -> Path:
    session = run_session(
        TURNS, Budget(context_window=32_000, output_reserve=4_000), RenderConfig(prompt_cache_key="b"),
        seed=11, render=False,
    )  # fmt: skip
    with Ledger.create(root / "L", agent_id="bench", fsync="never") as ledger:
        ledger.append_many(with_real_blobs(ledger, record) for record in session.live.records)
    return root / "L"


def _index_bytes(records: list[Record], read_record: RecordReader) -> int:
    """What a built index holds: traced memory at the end of its build minus after it is dropped."""
    gc.collect()
    tracemalloc.start()
    try:
        index = MemorySearch(records, read_record=read_record)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        del index
        gc.collect()
        return held - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


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


def _agents_index(ledger: Ledger) -> MemorySearch:
    """The index Agent.search builds over ``ledger``, streamed from it."""
    index = MemorySearch(blob_text=blob_text_of(ledger), read_record=ledger.get)
    for record in ledger.read():
        if not is_recall(record):
            index.add(record)
    return index


def _existing(path: Path) -> None:
    """An existing ledger's index, built as Agent.search builds it: what it holds, then the queries."""
    with Ledger.open(path, readonly=True) as ledger:
        gc.collect()
        tracemalloc.start()
        try:
            index = _agents_index(ledger)
            gc.collect()
            held, count = tracemalloc.get_traced_memory()[0], len(index)
            del index
            gc.collect()
            held -= tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        print(f"{count:,} documents; index memory: {held / 1e6:.1f} MB, {held / count:.0f} bytes a document")
        started = time.perf_counter()
        index = _agents_index(ledger)
        print(f"index build (first search): {time.perf_counter() - started:.1f} s")
        for query in QUERIES:
            print(f"{query:<30} {_p50_ms(lambda q=query: index.search(q, limit=8)):>8.1f}ms")  # type: ignore[misc]


#: Queries of the 1M-record ledger's vocabulary (benchmarks/runtime.py's generator): a path
#: in most tool results, a frequent command, a frequent word, a work item, a decision, none.
MILLION_QUERIES = ("src/cart.py", "make build", "error", "W422", "D5271 decided", "zzzqqq", *QUERIES)
#: The p50 the 1M-record ledger's queries must stay under (issue #30).
TARGET_MS = 20.0


def _million(root: Path) -> None:
    """The 1M-record ledger of benchmarks/runtime.py: the index Agent.search builds, then each query's p50."""
    count, built = _big_ledger(root / "big")
    print(f"\n1M-record ledger: {count:,} records (written in {built:.0f} s)")
    with Ledger.open(root / "big", readonly=True) as ledger:
        started = time.perf_counter()
        index = _agents_index(ledger)
        print(f"index build (first search): {time.perf_counter() - started:.1f} s, {len(index):,} documents")
        p50s = []
        print(f"{'query':<30} {'holon p50':>10} {'/ target':>9}")
        for query in MILLION_QUERIES:
            p50s.append(_p50_ms(lambda q=query: index.search(q, limit=8)))  # type: ignore[misc]
            print(f"{query:<30} {p50s[-1]:>8.1f}ms {p50s[-1] / TARGET_MS:>8.2f}x")
        median = statistics.median(p50s)
        verdict = "under" if median < TARGET_MS else "OVER"
        print(f"median of the queries' p50s: {median:.1f} ms, {verdict} the {TARGET_MS:.0f} ms target")


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--ledger":
        _existing(Path(sys.argv[2]))
        return
    root = Path(tempfile.mkdtemp(prefix="holon-bench-search-"))
    try:
        with Ledger.open(_write_ledger(root), readonly=True) as ledger:
            _measure(list(ledger.read()), ledger.get)
        _million(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _measure(records: list[Record], read_record: RecordReader) -> None:
    builds = []
    index = MemorySearch()
    for _ in range(3):
        started = time.perf_counter()
        index = MemorySearch(records, read_record=read_record)
        builds.append(time.perf_counter() - started)
    build = statistics.median(builds)
    texts = [text for record in records if (text := evidence_text(record.body))]
    print(f"{len(records):,} records, {len(index):,} documents indexed")
    print(f"index build (first search): {build:.2f} s, {len(index) / build:,.0f} documents/s")
    held = _index_bytes(records, read_record)
    print(f"index memory: {held / 1e6:.1f} MB, {held / len(index):.0f} bytes a document")
    # The scan costs the same for every query (it tokenizes everything), so it is timed once.
    scan = _p50_ms(lambda: _scan(texts, QUERIES[0], 8), repeats=3)
    print(f"no-index scan per query: {scan:.0f} ms")
    print(f"{'query':<30} {'holon p50':>10} {'scan / holon':>13}")
    for query in QUERIES:
        ours = _p50_ms(lambda q=query: index.search(q, limit=8))  # type: ignore[misc]
        print(f"{query:<30} {ours:>8.1f}ms {scan / ours:>12.0f}x")


if __name__ == "__main__":
    main()
