"""Ledger benchmark: append and verified-scan throughput and zstd ratio, beside baselines.

Run with ``python -m benchmarks.ledger`` (or ``make bench``). Every figure is measured in
the same run as its baselines, on the same records:

* append: ~300-byte records, fsync ``batch`` flushed every 100 records — holon's
  ``append`` (one call per record) and ``append_many`` (one call per 100), against
  stdlib sqlite3 (WAL, synchronous=FULL, commit every 100) and plain JSONL (holon's
  canonical JSON line per record, flush + fsync every 100);
* CPU per record of the append loops without fsync (process time, which other
  processes' load hardly moves): holon ``append()`` against the JSONL baseline;
* verified full scan: ``Ledger.read()`` yielding every ``Record`` (xxh3 checksum and
  blake3 chain link verified, payload decoded and validated into a Record per frame)
  against sqlite3 and JSONL reading and decoding the same records into Records;
* zstd ratio: plain segment bytes / sealed segment bytes for tool-output-like records;
* a 1M-record ledger (~40 sealed 8 MiB segments): ``Ledger.open`` for writing (lock and
  torn-tail recovery of the active segment) and read-only, ``read(from_seq=last-1000)``
  to the end, ``get(seq)`` in the active and in a sealed segment, and 200 ``get(seq)`` at
  random seqs of the sealed segments from a fresh reader.

Targets: append >= 1.5x both baselines, verified scan >= 250k records/s, ratio >= 4x,
open + read of the last 1000 records of a 1M-record ledger < 1 s.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from benchmarks import bench_dir
from holon.ledger import Ledger
from holon.ledger.segments import list_segments, load_segment
from holon.records import (
    Message,
    Record,
    ToolIntent,
    ToolResult,
    decode_json_record,
    decode_msgpack_record,
    encode_json_record,
    encode_msgpack_record,
)

N_APPEND = 50_000
BATCH = 100
N_TOOL = 6_000
REPEATS = 3
APPEND_ROUNDS = 5
N_LARGE = 1_000_000
SEALED_GETS = 200

_WORDS = [
    "the",
    "agent",
    "reads",
    "the",
    "file",
    "and",
    "updates",
    "the",
    "plan",
    "then",
    "runs",
    "the",
    "tests",
    "again",
    "before",
    "it",
    "reports",
    "the",
    "result",
    "to",
    "the",
    "operator",
    "with",
    "a",
    "short",
    "summary",
    "of",
    "what",
    "changed",
    "and",
    "what",
    "is",
    "still",
    "open",
]


def small_records(n: int, seed: int = 1) -> list[Record]:
    """A turn-like mix of messages, tool intents and short tool results, ~300 bytes each."""
    rng = random.Random(seed)
    out: list[Record] = []
    for i in range(n):
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(30, 42)))
        kind = i % 3
        if kind == 0:
            body: Message | ToolIntent | ToolResult = Message(role="assistant", text=words)
        elif kind == 1:
            body = ToolIntent(
                call_id=f"call-{i}",
                tool="bash",
                args={"command": f"pytest -q tests/test_{rng.randint(1, 80)}.py", "why": words[:170]},
            )
        else:
            body = ToolResult(call_id=f"call-{i - 1}", tool="bash", status="ok", output=words, exit_code=0)
        out.append(Record(body=body, ts=1_700_000_000_000 + i * 250, turn=i // 12))
    return out


def _tool_output(rng: random.Random) -> str:
    """Output shaped like real tool runs: test logs, listings, git logs, compiler output."""
    style = rng.randrange(4)
    lines: list[str] = []
    for n in range(rng.randint(15, 70)):
        if style == 0:
            status = rng.choice(["PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"])
            lines.append(
                f"tests/test_{rng.choice(_WORDS)}.py::test_{rng.choice(_WORDS)}_{n} {status} [{n * 2}%]"
            )
        elif style == 1:
            lines.append(
                f"-rw-r--r-- 1 agent agent {rng.randint(100, 99999):>6} Nov {rng.randint(1, 30):>2} "
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} "
                f"src/{rng.choice(_WORDS)}/{rng.choice(_WORDS)}.py"
            )
        elif style == 2:
            lines.append(f"{rng.getrandbits(28):07x} {rng.choice(_WORDS)}: {' '.join(rng.sample(_WORDS, 6))}")
        else:
            lines.append(
                f"src/{rng.choice(_WORDS)}.c:{rng.randint(1, 900)}:{rng.randint(1, 80)}: warning: "
                f"unused variable '{rng.choice(_WORDS)}' [-Wunused-variable]"
            )
    return "\n".join(lines)


def tool_records(n: int, seed: int = 2) -> list[Record]:
    """Tool results with inline outputs of 1-4 KB (below the blob threshold)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        text = _tool_output(rng)[:4000]
        body = ToolResult(
            call_id=f"c{i}", tool="bash", status="ok", output=text, exit_code=rng.choice([0, 0, 1])
        )
        out.append(Record(body=body, ts=i, turn=i // 5))
    return out


def _rounds(contenders: list[Callable[[Path], float]]) -> list[list[float]]:
    """Records/s of each contender in each of APPEND_ROUNDS rounds, in fresh directories.

    The contenders take turns within each round, so load from other processes on the
    shared machine (disk flushes especially) falls on all of them alike; the ratios the
    targets are about are taken within a round, between neighbours in time.
    """
    rounds = []
    for _ in range(APPEND_ROUNDS):
        rates = []
        for fn in contenders:
            with tempfile.TemporaryDirectory(prefix="holon-bench-", dir=bench_dir()) as d:
                rates.append(fn(Path(d)))
        rounds.append(rates)
    return rounds


def append_holon(records: list[Record]) -> Callable[[Path], float]:
    def run(root: Path) -> float:
        with Ledger.create(root / "l", agent_id="bench", fsync="batch") as ledger:
            append, flush = ledger.append, ledger.flush
            start = time.perf_counter()
            for i, record in enumerate(records, 1):
                append(record)
                if i % BATCH == 0:
                    flush()
            flush()
            return len(records) / (time.perf_counter() - start)

    return run


def append_many_holon(records: list[Record]) -> Callable[[Path], float]:
    def run(root: Path) -> float:
        with Ledger.create(root / "l", agent_id="bench", fsync="batch") as ledger:
            start = time.perf_counter()
            for i in range(0, len(records), BATCH):
                ledger.append_many(records[i : i + BATCH])
                ledger.flush()
            return len(records) / (time.perf_counter() - start)

    return run


def append_sqlite(records: list[Record]) -> Callable[[Path], float]:
    def run(root: Path) -> float:
        db = sqlite3.connect(root / "l.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE records (seq INTEGER PRIMARY KEY, kind TEXT, ts INTEGER, payload BLOB)")
        insert = "INSERT INTO records VALUES (?, ?, ?, ?)"
        replace = msgspec.structs.replace
        start = time.perf_counter()
        db.execute("BEGIN")
        for seq, given in enumerate(records):
            record = replace(given, seq=seq)
            db.execute(insert, (seq, record.kind, record.ts, encode_msgpack_record(record)))
            if (seq + 1) % BATCH == 0:
                db.execute("COMMIT")
                db.execute("BEGIN")
        db.execute("COMMIT")
        rate = len(records) / (time.perf_counter() - start)
        db.close()
        return rate

    return run


def append_jsonl(records: list[Record]) -> Callable[[Path], float]:
    def run(root: Path) -> float:
        replace = msgspec.structs.replace
        with open(root / "l.jsonl", "wb") as f:
            start = time.perf_counter()
            for seq, record in enumerate(records):
                f.write(encode_json_record(replace(record, seq=seq)) + b"\n")
                if (seq + 1) % BATCH == 0:
                    f.flush()
                    os.fsync(f.fileno())
            f.flush()
            os.fsync(f.fileno())
            return len(records) / (time.perf_counter() - start)

    return run


def cpu_per_record(records: list[Record]) -> tuple[float, float]:
    """Process CPU µs per record of the append loops without fsync: holon, JSONL (median of 5).

    Process time (all threads, kernel time included) hardly moves with other processes'
    load, unlike wall time; it shows what each side costs apart from the shared fsync.
    """
    holon: list[float] = []
    jsonl: list[float] = []
    replace = msgspec.structs.replace
    for _ in range(5):
        with tempfile.TemporaryDirectory(prefix="holon-bench-", dir=bench_dir()) as d:
            with Ledger.create(Path(d) / "l", agent_id="bench", fsync="never") as ledger:
                append, flush = ledger.append, ledger.flush
                start = time.process_time()
                for i, record in enumerate(records, 1):
                    append(record)
                    if i % BATCH == 0:
                        flush()
                flush()
                holon.append((time.process_time() - start) / len(records) * 1e6)
            with open(Path(d) / "l.jsonl", "wb") as f:
                start = time.process_time()
                for seq, record in enumerate(records):
                    f.write(encode_json_record(replace(record, seq=seq)) + b"\n")
                    if (seq + 1) % BATCH == 0:
                        f.flush()
                f.flush()
                jsonl.append((time.process_time() - start) / len(records) * 1e6)
    return statistics.median(holon), statistics.median(jsonl)


def scan_rates(records: list[Record]) -> tuple[float, float, float]:
    """Records/s reading back every record: holon verified, sqlite3, JSONL (best of REPEATS)."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-", dir=bench_dir()) as d:
        root = Path(d)
        append_many_holon(records)(root)
        append_sqlite(records)(root)
        append_jsonl(records)(root)
        holon = sqlite = jsonl = 0.0
        for _ in range(REPEATS):
            with Ledger.open(root / "l", readonly=True) as reader:
                start = time.perf_counter()
                count = sum(1 for _ in reader.read())
                holon = max(holon, count / (time.perf_counter() - start))
                assert count == len(records)
            db = sqlite3.connect(root / "l.db")
            start = time.perf_counter()
            count = sum(
                1
                for (p,) in db.execute("SELECT payload FROM records ORDER BY seq")
                if decode_msgpack_record(p) is not None
            )
            sqlite = max(sqlite, count / (time.perf_counter() - start))
            db.close()
            start = time.perf_counter()
            with open(root / "l.jsonl", "rb") as f:
                count = sum(1 for line in f if decode_json_record(line) is not None)
            jsonl = max(jsonl, count / (time.perf_counter() - start))
        return holon, sqlite, jsonl


def zstd_ratio(records: list[Record]) -> tuple[float, int, int]:
    """Plain / sealed bytes over the sealed segments of a ledger of tool-output records."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-") as d:
        path = Path(d) / "l"
        with Ledger.create(path, agent_id="bench", fsync="never", segment_bytes=1 << 20) as ledger:
            ledger.append_many(records)
        plain = sealed = 0
        for seg in list_segments(path / "segments"):
            if seg.sealed is not None:
                sealed += seg.sealed.stat().st_size
                plain += len(load_segment(seg)[0])
        return plain / sealed, plain, sealed


def _median_seconds(fn: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def large_ledger(records: list[Record]) -> dict[str, float]:
    """Seconds for open / tail read / get on a ledger of N_LARGE records (median of 5)."""
    with tempfile.TemporaryDirectory(prefix="holon-bench-", dir=bench_dir()) as d:
        path = Path(d) / "l"
        with Ledger.create(path, agent_id="bench", fsync="never") as ledger:
            for _ in range(N_LARGE // len(records)):
                ledger.append_many(records)
        last = N_LARGE - 1
        out: dict[str, float] = {}

        def open_writer() -> None:
            Ledger.open(path).close()

        def open_reader() -> None:
            Ledger.open(path, readonly=True).close()

        def open_and_tail() -> None:
            with Ledger.open(path) as ledger:
                tail = list(ledger.read(from_seq=last - 1000))
                assert len(tail) == 1001 and tail[-1].seq == last

        out["open (writer)"] = _median_seconds(open_writer)
        out["open (read-only)"] = _median_seconds(open_reader)
        out["open + read(from_seq=last-1000)"] = _median_seconds(open_and_tail)
        with Ledger.open(path, readonly=True) as reader:
            segs = list_segments(path / "segments")
            sealed_seq = segs[len(segs) // 2].start_seq + 17
            active_seq = last - 5
            out["first get() in a sealed segment"] = _median_seconds(
                lambda: Ledger.open(path, readonly=True).get(sealed_seq), runs=3
            )
            reader.get(active_seq)
            reader.get(sealed_seq)
            rng = random.Random(3)
            active = [rng.randrange(segs[-1].start_seq, last + 1) for _ in range(1000)]
            out["get() x1000 in the active segment (indexed)"] = _median_seconds(
                lambda: [reader.get(seq) for seq in active]
            )
            # What memory search and recall pay: hits read back by seq, spread over old segments.
            old = [rng.randrange(0, segs[-1].start_seq) for _ in range(SEALED_GETS)]

            def sealed_gets() -> None:
                with Ledger.open(path, readonly=True) as fresh:
                    for seq in old:
                        fresh.get(seq)

            out[f"get() x{SEALED_GETS} at random seqs of sealed segments"] = _median_seconds(
                sealed_gets, runs=3
            )
            out["segments"] = float(len(segs))
        return out


def main() -> None:
    """Print every figure beside its baselines, with the ratios the targets are about."""
    bench_dir()  # refuse an unusable HOLON_BENCH_DIR before the first figure
    records = small_records(N_APPEND)
    sizes = [len(encode_msgpack_record(msgspec.structs.replace(r, seq=i))) for i, r in enumerate(records)]
    mean = sum(sizes) / len(sizes)
    print(f"records: {len(records)} (mean msgpack payload {mean:.0f} bytes), flush every {BATCH}")

    rounds = _rounds(
        [append_holon(records), append_many_holon(records), append_sqlite(records), append_jsonl(records)]
    )
    median = statistics.median
    print(
        f"append (fsync batch, flush/commit/fsync every {BATCH} records), "
        f"records/s over {len(rounds)} rounds:"
    )
    print("  (median rate; ratio = median of the per-round ratios)")
    for index, name in ((0, "holon append()"), (1, "holon append_many()")):
        rate = median(r[index] for r in rounds)
        vs_sqlite = median(r[index] / r[2] for r in rounds)
        vs_jsonl = median(r[index] / r[3] for r in rounds)
        print(f"  {name:<20} {rate:>10,.0f}   x{vs_sqlite:.2f} sqlite   x{vs_jsonl:.2f} jsonl")
    print(f"  sqlite3 WAL FULL     {median(r[2] for r in rounds):>10,.0f}")
    print(f"  JSONL + fsync        {median(r[3] for r in rounds):>10,.0f}")
    print("  target: >= 1.5x both baselines")
    cpu_holon, cpu_jsonl = cpu_per_record(records)
    print(
        f"  CPU per record without fsync (process time, median of 5): holon append() {cpu_holon:.2f} µs, "
        f"JSONL {cpu_jsonl:.2f} µs"
    )

    scan, scan_sqlite, scan_jsonl = scan_rates(records)
    print("full scan into Records (best of 3), records/s:")
    print(f"  holon read() verified {scan:>10,.0f}   (target >= 250,000)")
    print(f"  sqlite3 SELECT        {scan_sqlite:>10,.0f}   x{scan / scan_sqlite:.2f}")
    print(f"  JSONL lines           {scan_jsonl:>10,.0f}   x{scan / scan_jsonl:.2f}")

    ratio, plain, sealed = zstd_ratio(tool_records(N_TOOL))
    print("zstd on tool-output records (sealed segments):")
    print(f"  {plain:,} -> {sealed:,} bytes: ratio {ratio:.2f}x (target >= 4x)")

    large = large_ledger(records)
    print(f"{N_LARGE:,}-record ledger ({large.pop('segments'):.0f} segments), median seconds:")
    for name, seconds in large.items():
        print(f"  {name:<44} {seconds * 1000:>9.1f} ms")
    print("  target: open + read of the last 1000 records < 1 s")


if __name__ == "__main__":
    main()
