"""Reading a ledger's segments: verified scans and random access by seq.

:class:`Reader` serves ``Ledger.read``, ``get`` and the file side of ``head``, for a
writer and a read-only ledger alike. A scan checks every frame's checksum and chain link
and that seqs continue across segments; a get finds its segment from the file names,
then its frame through the active segment's offset index (:mod:`holon.ledger.index`) or a
sealed segment's seek table (:mod:`holon.ledger.seek`). The :class:`~holon.ledger.tip.Tip`
says where this ledger's own writer stands, which a get trusts over a directory listing.

Readers run while a writer appends, rolls over and seals: a listing may be stale or miss a
segment sealed during it, and each such case is looked up again rather than reported as
damage (see ``find_segment``).
"""

from __future__ import annotations

import bisect
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import blake3
import xxhash

from holon.errors import InvalidRecord, LedgerCorrupt, RefNotFound, byte_location
from holon.ledger.frames import FRAME_HEAD, FRAME_OVERHEAD, HASH_SIZE, LENGTH_MASK, MAX_PAYLOAD, FrameWalk
from holon.ledger.index import ActiveIndex
from holon.ledger.seek import SealedFrames
from holon.ledger.segments import (
    SEGMENT_HEADER,
    SegmentFile,
    check_segment_header,
    find_segment,
    list_segments,
    load_segment,
    parse_segment_header,
    seq_gap,
)
from holon.ledger.tip import Tip
from holon.records import Record, decode_msgpack_record

__all__ = ["Reader"]

# Whole sealed segments a scan or an index walk decompressed, kept for the next one.
_SEALED_CACHE_SIZE: Final = 2

_unpack_head = FRAME_HEAD.unpack_from
_HEAD_SIZE: Final = FRAME_HEAD.size
_xxh3 = xxhash.xxh3_64_intdigest


class Reader:
    """The read side of one open ledger: scans, ``get`` by seq, and the head from the files.

    ``path`` is the ledger (errors name it), ``tip`` its writer's position (a read-only
    ledger's has no writer).
    """

    def __init__(self, path: Path, tip: Tip) -> None:
        self._path = path
        self._seg_dir = path / "segments"
        self._tip = tip
        self._sealed_cache: OrderedDict[int, tuple[bytes, str, list[int] | None]] = OrderedDict()
        self._sealed_frames = SealedFrames()
        self._active_index: ActiveIndex | None = None
        # The last listing of the segment files, and the writer's active segment when it was
        # taken: a rollover since makes it stale.
        self._segs: list[SegmentFile] | None = None
        self._listed_at = tip.active_start

    # ------------------------------------------------------------------ scans

    def records(self, from_seq: int, to_seq: int | None) -> Iterator[Record]:
        """Verified, decoded records with ``from_seq <= seq < to_seq``: the body of ``Ledger.read``.

        The frame loop is inlined here (it is the whole cost of a scan); at the first frame
        that is not plainly valid it hands over to FrameWalk, which raises LedgerCorrupt
        naming the damage or, at the end of the active segment, stops at a torn tail.
        """
        decode = decode_msgpack_record
        unpack = _unpack_head
        xxh3 = _xxh3
        hasher = blake3.blake3()
        update, digest, reset = hasher.update, hasher.digest, hasher.reset
        head_size, overhead, mask, max_payload = _HEAD_SIZE, FRAME_OVERHEAD, LENGTH_MASK, MAX_PAYLOAD
        last = to_seq - 1 if to_seq is not None else -1
        for span in self._spans(from_seq, to_seq, None):
            buf = span.buf
            mv = memoryview(buf)
            startswith = buf.startswith
            pos, prev, expected, end = span.pos, span.prev, span.expected, len(buf)
            while True:
                while pos + head_size <= end:
                    n, guard, checksum = unpack(buf, pos)
                    stop = pos + overhead + n
                    if guard != n ^ mask or n == 0 or n > max_payload or stop > end:
                        break
                    body = mv[pos + head_size : stop]
                    if xxh3(body, n) != checksum or not startswith(prev, pos + head_size):
                        break
                    update(body)
                    prev = digest()
                    reset()
                    if expected >= from_seq:
                        payload = body[HASH_SIZE:]
                        try:
                            record = decode(payload)
                        except InvalidRecord:
                            location = byte_location(span.file, pos, decompressed=span.sealed)
                            decode(payload, where=f"seq {expected} ({location})")
                            raise
                        if record.seq != expected:
                            raise LedgerCorrupt(
                                f"frame holds seq {record.seq} where seq {expected} belongs",
                                file=span.file,
                                offset=pos,
                                decompressed=span.sealed,
                            )
                        yield record
                        if expected == last:
                            span.done = True
                            return
                    expected += 1
                    pos = stop
                if pos >= end:
                    break
                # Not a plainly valid frame: FrameWalk raises, or marks a torn tail and stops.
                walk = FrameWalk(
                    buf,
                    file=span.file,
                    pos=pos,
                    end=end,
                    prev=prev,
                    active=span.active,
                    decompressed=span.sealed,
                )
                for _offset, _payload in walk.frames():
                    break  # a frame the fast loop refused but FrameWalk accepts: re-read it
                else:
                    pos, prev = walk.pos, walk.prev or prev
                    break
                raise LedgerCorrupt(
                    "frame check disagreement", file=span.file, offset=pos, decompressed=span.sealed
                )
            mv.release()
            span.pos, span.prev, span.expected = pos, prev, expected

    def walk(
        self, from_seq: int, to_seq: int | None, segs: list[SegmentFile] | None
    ) -> Iterator[tuple[int, memoryview, FrameWalk]]:
        """Yield ``(seq, payload, walk)`` for verified frames from ``from_seq`` (see _spans)."""
        for span in self._spans(from_seq, to_seq, segs):
            walk = FrameWalk(
                span.buf,
                file=span.file,
                pos=span.pos,
                end=len(span.buf),
                prev=span.prev,
                active=span.active,
                decompressed=span.sealed,
            )
            expected = span.expected
            for _offset, payload in walk.frames():
                if expected >= from_seq:
                    yield expected, payload, walk
                expected += 1
                if to_seq is not None and expected >= to_seq:
                    span.done = True
                    return
            span.pos, span.prev, span.expected = walk.pos, walk.prev or span.prev, expected

    def head(self) -> tuple[int, str]:
        """``(seq, hash hex)`` of the newest record on disk; ``(-1, genesis hash)`` when empty."""
        segs = self.listing()
        last = segs[-1]
        seq, prev = last.start_seq - 1, None
        for frame_seq, _payload, walk in self.walk(last.start_seq, None, segs):
            seq, prev = frame_seq, walk.prev
        if prev is None:
            buf, file, sealed = self._load(last)
            prev = parse_segment_header(buf, file=file, decompressed=sealed).prev_hash
        return seq, prev.hex()

    def _spans(self, from_seq: int, to_seq: int | None, segs: list[SegmentFile] | None) -> Iterator[_Span]:
        """Yield the segment bytes to walk for ``from_seq`` onward, one span at a time.

        The consumer walks the frames of each span from ``span.pos`` (checking links from
        ``span.prev``) and leaves ``pos``, ``prev`` and ``expected`` where it stopped, or
        sets ``done``. Crossing into the next segment checks that seqs continue and the
        chain links. When the newest segment runs out, the listing is refreshed: if the
        writer rolled over meanwhile, the rest of the (now complete) segment and the next
        ones are yielded too.
        """
        if to_seq is not None and to_seq <= from_seq:
            return
        if segs is None:
            segs = self.listing()
        starts = [s.start_seq for s in segs]
        index = max(bisect.bisect_right(starts, from_seq) - 1, 0)
        expected = segs[index].start_seq
        prev: bytes | None = None
        while True:
            seg = segs[index]
            if seg.start_seq > expected:
                # A gap in the listing may be a segment sealed during it (see find_segment).
                missed = find_segment(self._seg_dir, expected)
                if missed is not None:
                    segs = [*segs[:index], missed, *segs[index:]]
                    seg = missed
            buf, file, sealed = self._load(seg)
            header = check_segment_header(buf, seg.start_seq, file, sealed=sealed)
            _check_continues(
                header.prev_hash, seg.start_seq, expected=expected, prev=prev, file=file, sealed=sealed
            )
            last = index == len(segs) - 1
            span = _Span(
                buf, file, SEGMENT_HEADER.size, header.prev_hash, expected, last and not sealed, sealed
            )
            while True:
                yield span
                if span.done:
                    return
                pos, prev, expected = span.pos, span.prev, span.expected
                if not last:
                    break
                # The newest segment ran out: did the writer roll over meanwhile?
                segs, index = self._relisted(seg, file, pos, sealed)
                if index == len(segs) - 1:
                    if sealed:
                        raise LedgerCorrupt(
                            "the active segment after this sealed segment is missing; "
                            "restore it from a backup",
                            file=file,
                        )
                    return
                # It did: this segment is complete now; finish it, then go on.
                last = False
                seg = segs[index]
                buf, file, sealed = self._load(seg)
                span = _Span(buf, file, pos, prev, expected, False, sealed)
            index += 1

    def _relisted(self, seg: SegmentFile, file: str, pos: int, sealed: bool) -> tuple[list[SegmentFile], int]:
        """The segments listed anew, and the index of ``seg`` (read up to ``pos``) among them."""
        segs = list_segments(self._seg_dir)
        starts = [s.start_seq for s in segs]
        here = bisect.bisect_left(starts, seg.start_seq)
        if here == len(segs) or starts[here] != seg.start_seq:
            # Rolled over and being sealed during the listing, which can miss it.
            missed = find_segment(self._seg_dir, seg.start_seq)
            if missed is None:
                raise LedgerCorrupt(
                    "segment disappeared while reading it", file=file, offset=pos, decompressed=sealed
                )
            segs.insert(here, missed)
        return segs, here

    # ------------------------------------------------------------------ random access

    def get(self, seq: int) -> Record:
        """The record with this seq (``seq >= 0``; ``Ledger.get`` has the whole story).

        Raises RefNotFound when ``seq`` is beyond the head.
        """
        tip = self._tip
        if tip.fd is not None and tip.failed is None and seq >= tip.active_start:
            # The writer knows its active segment without listing the directory (after a
            # failed write it does not: it reads what is on disk, as a reader would).
            if seq >= tip.next_seq:
                raise RefNotFound(
                    f"seq {seq} is past the end of ledger {self._path} (next seq is {tip.next_seq})"
                )
            return self._get_active(SegmentFile(tip.active_start, tip.active_path, None), seq)
        segs = self._segs
        if segs is None or self._listed_at != tip.active_start:
            segs = self._relist()
        index = bisect.bisect_right([s.start_seq for s in segs], seq) - 1
        seg = segs[index]
        if index == len(segs) - 1 and seg.plain is not None:
            return self._get_active(seg, seq)
        table = self._sealed_frames.table(seg) if seg.plain is None and seg.sealed is not None else None
        if table is not None:
            if seq < table.end_seq:
                plain, pos, base = self._sealed_frames.frame(seg.start_seq, table, seq)
                return self._frame_record(plain, pos, seq, table.file, base=base, decompressed=True)
            return self._past_segment(segs, index, seq, table.end_seq)
        buf, file, sealed, offsets = self._indexed(seg)
        k = seq - seg.start_seq
        if k >= len(offsets):
            return self._past_segment(segs, index, seq, seg.start_seq + len(offsets))
        pos = offsets[k]
        return self._frame_record(buf, pos, seq, file, decompressed=sealed)

    def _past_segment(self, segs: list[SegmentFile], index: int, seq: int, end: int) -> Record:
        """``get(seq)`` for a seq at or past ``end``, where ``segs[index]`` (that would hold it) ends."""
        if index == len(segs) - 1:
            raise RefNotFound(f"seq {seq} is past the end of ledger {self._path} (next seq is {end})")
        # A gap in the listing may be a segment sealed during it (see find_segment).
        missed = find_segment(self._seg_dir, end)
        if missed is not None and missed.start_seq < segs[index + 1].start_seq:
            self._segs = [*segs[: index + 1], missed, *segs[index + 1 :]]
            return self.get(seq)
        raise LedgerCorrupt(
            f"segment ends before seq {seq} but the next segment starts at seq "
            f"{segs[index + 1].start_seq}; a segment between them is missing",
            file=segs[index + 1].name,
            offset=0,
            decompressed=segs[index + 1].plain is None,
        )

    def _frame_record(
        self, buf: bytes, pos: int, seq: int, file: str, base: int = 0, *, decompressed: bool = False
    ) -> Record:
        """Check the frame at ``pos`` of ``buf`` (``base`` = file offset of buf[0]) and decode it.

        ``decompressed``: ``buf`` is a sealed segment's decompressed bytes (errors say so).
        """
        walk = FrameWalk(
            buf,
            file=file,
            pos=pos,
            end=len(buf),
            prev=None,
            active=False,
            verify_chain=False,
            base=base,
            decompressed=decompressed,
        )
        offset = base + pos
        for _offset, payload in walk.frames():
            location = byte_location(file, offset, decompressed=decompressed)
            record = decode_msgpack_record(payload, where=f"seq {seq} ({location})")
            if record.seq != seq:
                raise LedgerCorrupt(
                    f"frame holds seq {record.seq} where seq {seq} belongs",
                    file=file,
                    offset=offset,
                    decompressed=decompressed,
                )
            return record
        raise LedgerCorrupt(
            f"no frame at the indexed offset of seq {seq}",
            file=file,
            offset=offset,
            decompressed=decompressed,
        )

    def _get_active(self, seg: SegmentFile, seq: int) -> Record:
        """``get`` in the newest (plain) segment, through its incremental offset index.

        A reader's listing may be stale: a seq beyond the indexed data makes it list the
        directory again, and if the writer rolled over meanwhile, look the seq up afresh.
        """
        assert seg.plain is not None
        index = self._active_index
        if index is None or index.start_seq != seg.start_seq:
            try:
                fresh = ActiveIndex(seg.start_seq, seg.plain)
            except FileNotFoundError:
                # Sealed since it was listed: look it up again.
                if self._tip.fd is not None:
                    raise
                self._segs = None
                return self.get(seq)
            self._drop_index()
            index = self._active_index = fresh
        k = seq - seg.start_seq
        if k >= len(index.offsets):
            index.extend()
        if k >= len(index.offsets):
            if self._tip.fd is None:
                segs = self._relist()
                if segs[-1].start_seq != seg.start_seq:
                    # The writer rolled over meanwhile: this segment is complete now.
                    self._drop_index()
                    return self.get(seq)
            raise RefNotFound(
                f"seq {seq} is past the end of ledger {self._path} "
                f"(next seq is {seg.start_seq + len(index.offsets)})"
            )
        frame, pos = index.frame(k)
        return self._frame_record(frame, 0, seq, str(index.path), base=pos)

    def _drop_index(self) -> None:
        if self._active_index is not None:
            self._active_index.close()
            self._active_index = None

    # ------------------------------------------------------------------ segment files

    def listing(self) -> list[SegmentFile]:
        """The segment files, checked to start at seq 0 (LedgerCorrupt if there are none)."""
        segs = list_segments(self._seg_dir)
        if not segs:
            raise LedgerCorrupt(
                "the ledger has no segment files (a new ledger has one); restore them from a backup",
                file=str(self._seg_dir),
            )
        if segs[0].start_seq != 0:
            raise LedgerCorrupt(
                f"the first segment starts at seq {segs[0].start_seq}, so seqs 0..{segs[0].start_seq - 1} "
                "are missing: a segment was deleted",
                file=segs[0].name,
                offset=0,
            )
        return segs

    def _relist(self) -> list[SegmentFile]:
        """List the segments again and keep the listing for the gets after this one."""
        self._listed_at = self._tip.active_start
        segs = self._segs = self.listing()
        return segs

    def _load(self, seg: SegmentFile) -> tuple[bytes, str, bool]:
        """Segment bytes; sealed segments never change, so a few stay cached."""
        cached = self._sealed_cache.get(seg.start_seq)
        if cached is not None and seg.plain is None:
            self._sealed_cache.move_to_end(seg.start_seq)
            return cached[0], cached[1], True
        buf, file, sealed = load_segment(seg)
        if sealed:
            if seg.plain is not None:
                # Listed plain, read sealed: sealed since the listing. List again at the next
                # get, or every get in this segment would bypass the cache and decompress it.
                self._segs = None
            self._sealed_cache[seg.start_seq] = (buf, file, None)
            while len(self._sealed_cache) > _SEALED_CACHE_SIZE:
                self._sealed_cache.popitem(last=False)
        return buf, file, sealed

    def _indexed(self, seg: SegmentFile) -> tuple[bytes, str, bool, list[int]]:
        """Segment bytes, file, sealed? and the offset of each frame (cached for sealed segments)."""
        buf, file, sealed = self._load(seg)
        cached = self._sealed_cache.get(seg.start_seq) if sealed else None
        if cached is not None and cached[2] is not None:
            return buf, file, sealed, cached[2]
        check_segment_header(buf, seg.start_seq, file, sealed=sealed)
        walk = FrameWalk(
            buf,
            file=file,
            pos=SEGMENT_HEADER.size,
            end=len(buf),
            prev=None,
            active=not sealed,
            verify_chain=False,
            decompressed=sealed,
        )
        offsets = [offset for offset, _payload in walk.frames()]
        if sealed:
            self._sealed_cache[seg.start_seq] = (buf, file, offsets)
        return buf, file, sealed, offsets

    def close(self) -> None:
        """Let go of the caches and the active segment's descriptor (a later read opens afresh)."""
        self._sealed_cache.clear()
        self._sealed_frames.clear()
        self._drop_index()
        self._segs = None


class _Span:
    """A stretch of one segment's bytes for a reader to walk (see ``Reader._spans``)."""

    __slots__ = ("active", "buf", "done", "expected", "file", "pos", "prev", "sealed")

    def __init__(  # noqa: PLR0917 - a private record of seven positions
        self, buf: bytes, file: str, pos: int, prev: bytes, expected: int, active: bool, sealed: bool
    ) -> None:
        self.buf = buf
        self.file = file
        self.pos = pos
        self.prev = prev
        self.expected = expected
        self.active = active
        # buf is a sealed segment's decompressed bytes: offsets in errors are not file offsets.
        self.sealed = sealed
        self.done = False


def _check_continues(
    header_prev: bytes, start_seq: int, *, expected: int, prev: bytes | None, file: str, sealed: bool
) -> None:
    """Raise unless a segment (its header committing to ``header_prev``) starts at the seq
    ``expected`` and commits to ``prev``, the last record of the segment before it."""
    if start_seq != expected:
        raise LedgerCorrupt(
            seq_gap(expected, start_seq),
            file=file,
            offset=0,
            decompressed=sealed,
        )
    if prev is not None and header_prev != prev:
        raise LedgerCorrupt(
            "broken hash chain across segments: this segment does not commit to the last record "
            "of the segment before it",
            file=file,
            offset=24,
            decompressed=sealed,
        )
