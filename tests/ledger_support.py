"""Shared helpers for the ledger tests: record factories, frame offsets, byte surgery.

The storage behaviour itself is specified once here (``assert_ledger_holds``) so every
test file checks a ledger the same way: records in order, chain verified, head matching.
"""

from __future__ import annotations

import gc
import os
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import blake3

from holon.ledger import Ledger, writer
from holon.ledger.frames import FrameWalk, chain_hash
from holon.ledger.header import genesis_hash
from holon.ledger.segments import SEGMENT_HEADER, list_segments, load_segment
from holon.records import BlobRef, Message, Record, ToolResult, encode_msgpack_record

AGENT = "agent-test"


def message(i: int, size: int = 40) -> Record:
    """A deterministic message record whose text depends on ``i`` (seq left unassigned)."""
    unit = f"record {i} "
    return Record(
        body=Message(role="assistant", text=(unit * (size // len(unit) + 1))[:size]),
        ts=1000 + i,
        turn=i // 10,
    )


def tool_output(i: int, size: int) -> Record:
    """A tool result with ``size`` bytes of output (moved to a blob above the threshold)."""
    text = "".join(f"line {n} of output {i}\n" for n in range(size // 20 + 1))[:size]
    return Record(
        body=ToolResult(call_id=f"c{i}", tool="bash", status="ok", output=text), ts=1000 + i, turn=i // 10
    )


def ledger_with_a_blob(path: Path) -> str:
    """A new ledger at ``path`` whose one record's output is stored as a blob; the blob's hash."""
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(tool_output(0, 9000))
        (record,) = ledger.read()
    assert isinstance(record.body, ToolResult) and record.body.blob is not None
    return record.body.blob.hash


def expected_head(agent_id: str, records: list[Record]) -> tuple[int, str]:
    """The head a ledger holding exactly ``records`` must report, recomputed independently."""
    h = genesis_hash(agent_id)
    for record in records:
        h = chain_hash(h, encode_msgpack_record(record))
    return len(records) - 1, h.hex()


def assert_ledger_holds(path: Path, records: list[Record], *, agent_id: str = AGENT) -> None:
    """A read-only view of ``path`` holds exactly ``records``, verifies, and has the right head."""
    with Ledger.open(path, readonly=True) as reader:
        assert list(reader.read()) == records
        assert reader.head() == expected_head(agent_id, records)
        report = reader.verify()
        assert report.ok, str(report)
        assert report.records_checked == len(records)
        assert report.head == reader.head()


def frame_offsets(buf: bytes, file: str = "<test>") -> list[int]:
    """Offsets of every frame in a segment's bytes."""
    walk = FrameWalk(buf, file=file, pos=SEGMENT_HEADER.size, end=len(buf), prev=None, active=True)
    return [offset for offset, _payload in walk.frames()]


def segment_files(path: Path) -> list[Path]:
    """Every segment file of a ledger, sealed ones included, in seq order."""
    out: list[Path] = []
    for seg in list_segments(path / "segments"):
        out += [p for p in (seg.plain, seg.sealed) if p is not None]
    return out


def active_segment(path: Path) -> Path:
    """The plain (active) segment of a ledger."""
    plain = list_segments(path / "segments")[-1].plain
    assert plain is not None
    return plain


def segment_bytes_of(path: Path, index: int) -> bytes:
    """Decompressed bytes of the ``index``-th segment."""
    return load_segment(list_segments(path / "segments")[index])[0]


def flip_byte(path: Path, offset: int) -> None:
    """Invert one byte of a file in place."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


@contextmanager
def without_ts_check() -> Iterator[None]:
    """Append as holon did before it checked ``ts``: what older ledgers may hold (tests only)."""
    saved = writer._MIN_TS, writer._MAX_TS
    writer._MIN_TS, writer._MAX_TS = -(2**64), 2**64
    try:
        yield
    finally:
        writer._MIN_TS, writer._MAX_TS = saved


@contextmanager
def scratch_dir() -> Iterator[Path]:
    """A fresh directory for one Hypothesis example (tmp_path is per test, not per example)."""
    with tempfile.TemporaryDirectory(prefix="holon-ledger-") as name:
        yield Path(name)


def blob_ref(data: bytes) -> BlobRef:
    """The reference a blob store hands out for ``data`` (without storing it)."""
    return BlobRef(hash=blake3.blake3(data).hexdigest(), size=len(data))


def child_env() -> dict[str, str]:
    """Environment for child Python processes: the repository root on sys.path."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def peak_memory(action: Callable[[], object]) -> int:
    """The most memory Python held while ``action()`` ran, in bytes (allocations, not time).

    A full collection first: the cyclic collector runs after a count of allocations, which
    the tests an xdist worker ran before had advanced by an arbitrary amount, so without it
    the point at which the action's own cycles are freed (and with it the peak) depended
    on the order tests ran in.
    """
    gc.collect()
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
