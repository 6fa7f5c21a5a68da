"""Read ledgers into newline-delimited JSON that DuckDB loads natively, one file per kind.

This is the Python half of :func:`holon.audit.connect`; it never imports DuckDB, so it
is cheap to run in worker processes. A ledger is cut into *chunks* of whole segments;
each chunk is read and verified by the ledger (checksums, hash chain, seq continuity),
and its records are decoded and re-encoded in a few msgspec calls per kind rather than
per record:

1. the verified msgpack payloads of the chunk are joined into one msgpack array and
   decoded once into tiny ``(seq, kind, v)`` envelopes;
2. payloads are grouped by kind, and each group is decoded once into typed rows
   (``seq, ts, turn, kind, v, body``) with the record vocabulary's body class, so
   validation is exactly the ledger's own;
3. each group is written with one ``encode_lines`` call, appended to
   ``<out>/<kind>.jsonl``; every line names its ledger (``agent_ix``, set on the
   decoded rows), so the chunks of many small ledgers share one file per kind (see
   :func:`extract_chunk`).

Per-record Python work is reduced to grouping, which is what makes the load fast (see
benchmarks/audit.py). A record that does not decode is re-decoded on its own to raise
the same :class:`~holon.errors.InvalidRecord` (naming its seq) that ``Ledger.read``
would.
"""

from __future__ import annotations

import gc
import itertools
import os
import struct
from pathlib import Path
from typing import Final, Generic, TypeVar

import msgspec

from holon.errors import LedgerCorrupt
from holon.ledger import Ledger
from holon.ledger.segments import list_segments
from holon.records import BODY_TYPES, DECODE_ERRORS, SCHEMA_VERSION, ToolIntent, decode_msgpack_record

__all__ = ["CHUNK_RECORDS", "Chunk", "ChunkResult", "LedgerInfo", "extract_chunk", "plan_chunks", "read_info"]

#: Fewest records worth a chunk of their own: below twice this, a load runs in one
#: process (forking workers and verifying the link between chunks cost more).
CHUNK_RECORDS: Final = 50_000

_ARRAY32: Final = struct.Struct(">BI")
_B = TypeVar("_B")


class _Envelope(msgspec.Struct, gc=False):
    """The part of a record's wire form needed to route it."""

    seq: int
    kind: str
    v: int


class _Row(msgspec.Struct, Generic[_B], gc=False, forbid_unknown_fields=True):
    """A record's wire form with a typed body, and its ledger (the JSON line DuckDB reads)."""

    seq: int
    ts: int
    turn: int | None
    kind: str
    v: int
    body: _B
    #: Not on the wire: set after decoding, so chunks of several ledgers can share a file.
    agent_ix: int = 0


_ENVELOPES: Final = msgspec.msgpack.Decoder(list[_Envelope])
_ROWS: Final = {kind: msgspec.msgpack.Decoder(list[_Row[cls]]) for kind, cls in BODY_TYPES.items()}  # type: ignore[valid-type]
_ENCODER: Final = msgspec.json.Encoder()
# Tool arguments are written with sorted keys, so equal arguments are equal JSON text
# (the duplicate-call report compares them as text).
_SORTED_ENCODER: Final = msgspec.json.Encoder(order="deterministic")


class LedgerInfo(msgspec.Struct, frozen=True):
    """What the audit records about one ledger of a fleet."""

    agent_ix: int
    agent_id: str
    path: str
    records: int
    head_seq: int
    head_hash: str
    segment_starts: tuple[int, ...]


class Chunk(msgspec.Struct, frozen=True):
    """Records ``from_seq <= seq < to_seq`` of one ledger, to be extracted together."""

    agent_ix: int
    path: str
    from_seq: int
    to_seq: int
    #: True when a record follows the chunk: it is read too, so the hash-chain link
    #: between this chunk and the next is verified by one of the two walks.
    link_next: bool


class ChunkResult(msgspec.Struct, frozen=True):
    """Records written per kind for one chunk."""

    agent_ix: int
    from_seq: int
    counts: dict[str, int]


def read_info(path: str | os.PathLike[str], agent_ix: int) -> LedgerInfo:
    """Open a ledger read-only and note its agent, head and segment starts.

    The head fixes the snapshot the audit loads: records a writer appends later are not
    read, so every table describes the same ledger state.
    """
    with Ledger.open(path, readonly=True) as ledger:
        head_seq, head_hash = ledger.head()
        starts = tuple(seg.start_seq for seg in list_segments(Path(path) / "segments"))
        return LedgerInfo(
            agent_ix=agent_ix,
            agent_id=ledger.agent_id,
            path=str(Path(path).resolve()),
            records=head_seq + 1,
            head_seq=head_seq,
            head_hash=head_hash,
            segment_starts=starts,
        )


def plan_chunks(info: LedgerInfo, chunk_records: int = CHUNK_RECORDS) -> list[Chunk]:
    """Cut a ledger into chunks of whole segments holding about ``chunk_records`` records.

    Chunk bounds sit on segment starts, so no worker walks frames it does not keep; each
    bound is the segment start nearest to ``chunk_records`` after the previous one, so
    chunks come out about equal (workers finish together).
    """
    if info.records == 0:
        return []
    starts = [s for s in info.segment_starts if 0 < s < info.records] + [info.records]
    bounds = [0]
    for here, after in itertools.pairwise(starts):
        if abs(here - bounds[-1] - chunk_records) <= abs(after - bounds[-1] - chunk_records):
            bounds.append(here)
    if len(bounds) > 1 and info.records - bounds[-1] < chunk_records // 4:
        bounds.pop()  # fold a small tail into the chunk before it
    bounds.append(info.records)
    return [
        Chunk(
            agent_ix=info.agent_ix,
            path=info.path,
            from_seq=lo,
            to_seq=hi,
            link_next=hi < info.records,
        )
        for lo, hi in itertools.pairwise(bounds)
    ]


def _payloads(ledger: Ledger, chunk: Chunk) -> list[memoryview]:
    """The chunk's verified msgpack payloads, in seq order.

    The walk is the ledger's own (``Ledger._walk``: checksum, chain link and seq of
    every frame, segment continuity); it is the same walk ``Ledger.read`` runs, minus
    the per-record decode that this module does in batches. When ``link_next`` is set,
    one extra frame is walked (and dropped) to check the link into the next chunk.
    """
    to_seq = chunk.to_seq + 1 if chunk.link_next else chunk.to_seq
    end = chunk.to_seq
    return [payload for seq, payload, _walk in ledger._walk(chunk.from_seq, to_seq, None) if seq < end]


def _array(parts: list[memoryview]) -> bytes:
    """The msgpack array holding ``parts`` (each one complete msgpack value)."""
    return _ARRAY32.pack(0xDD, len(parts)) + b"".join(parts)


def _raise_invalid(payloads: list[memoryview], first_seq: int | None) -> None:
    """Re-decode records one by one to raise the precise InvalidRecord of the first bad one.

    ``first_seq`` is the seq of ``payloads[0]`` when they are consecutive; otherwise
    (``None``) each record is named by the seq in its own envelope.
    """
    for offset, payload in enumerate(payloads):
        decode_msgpack_record(payload, where=None if first_seq is None else f"seq {first_seq + offset}")


def extract_chunk(chunk: Chunk, out_dir: str) -> ChunkResult:
    """Read, verify and decode one chunk; append its records to ``out_dir/<kind>.jsonl``.

    Each line is a record's wire form (body typed by its kind) with ``agent_ix`` added,
    so one directory can hold the chunks of several ledgers: a fleet of small ledgers
    loads from a few files, not a file per ledger and kind (DuckDB spends about a
    millisecond on each file it reads, which dwarfed a small ledger's own load).

    Raises what ``Ledger.read`` raises for the same records: LedgerCorrupt for damaged
    bytes, InvalidRecord for a record that does not decode.
    """
    # A chunk allocates a few hundred thousand objects and frees them all at the end:
    # cyclic garbage collection would only traverse them again and again (~20% of the
    # extraction time, measured), and the records hold no reference cycles.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _extract(chunk, out_dir)
    finally:
        if enabled:
            gc.enable()


def _extract(chunk: Chunk, out_dir: str) -> ChunkResult:
    with Ledger.open(chunk.path, readonly=True) as ledger:
        payloads = _payloads(ledger, chunk)
    if len(payloads) != chunk.to_seq - chunk.from_seq:
        raise LedgerCorrupt(
            f"expected records {chunk.from_seq}..{chunk.to_seq - 1} but the ledger ends after "
            f"{chunk.from_seq + len(payloads) - 1}; records were removed while auditing",
            file=chunk.path,
        )
    try:
        envelopes = _ENVELOPES.decode(_array(payloads))
    except DECODE_ERRORS:  # UnicodeDecodeError too, from msgspec before 0.23
        _raise_invalid(payloads, chunk.from_seq)
        raise
    groups: dict[str, list[memoryview]] = {}
    for expected, (envelope, payload) in enumerate(zip(envelopes, payloads, strict=True), chunk.from_seq):
        if envelope.seq != expected:
            raise LedgerCorrupt(
                f"frame holds seq {envelope.seq} where seq {expected} belongs", file=chunk.path
            )
        if not 1 <= envelope.v <= SCHEMA_VERSION or envelope.kind not in _ROWS:
            # Unsupported version or unknown kind: let the codec say which, and where.
            decode_msgpack_record(payload, where=f"seq {expected}")
        group = groups.get(envelope.kind)
        if group is None:
            groups[envelope.kind] = group = []
        group.append(payload)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    for kind in sorted(groups):
        group = groups[kind]
        try:
            rows = _ROWS[kind].decode(_array(group))
        except DECODE_ERRORS:
            _raise_invalid(group, None)
            raise
        if chunk.agent_ix:
            for row in rows:  # one store a row: within the noise of a load (300k records, measured)
                row.agent_ix = chunk.agent_ix
        encoder = _SORTED_ENCODER if kind == ToolIntent.KIND else _ENCODER
        with (out / f"{kind}.jsonl").open("ab") as lines:
            lines.write(encoder.encode_lines(rows))
        counts[kind] = len(rows)
    return ChunkResult(agent_ix=chunk.agent_ix, from_seq=chunk.from_seq, counts=counts)
