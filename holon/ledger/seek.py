"""Random access into sealed segments: their seek tables and decompressed frames, cached.

A ``Ledger.get`` in a sealed segment decompresses only the zstd frame holding its seq, found
through the segment's seek table (:mod:`holon.ledger.sealed`). :class:`SealedFrames` keeps
the checked tables of many segments (a few hundred bytes each) and the frames of a few
(~256 KiB each); the reader (:mod:`holon.ledger.reader`) decodes the record it hands back.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import Final

from holon.errors import LedgerCorrupt
from holon.ledger.files import open_ledger_file
from holon.ledger.frames import FrameWalk
from holon.ledger.sealed import SeekTable, read_sealed_frame, read_seek_table
from holon.ledger.segments import SegmentFile, check_segment_header

__all__ = ["SealedFrames"]

# The seek tables of this many segments are kept, and the decompressed frames (with their
# record offsets) of this many.
_SEEK_TABLES: Final = 256
_FRAME_CACHE_SIZE: Final = 8


class SealedFrames:
    """The seek tables and recently read frames of a ledger's sealed segments."""

    __slots__ = ("_frames", "_tables")

    def __init__(self) -> None:
        # By start seq: a sealed segment's seek table, None for one sealed as a single frame.
        self._tables: OrderedDict[int, SeekTable | None] = OrderedDict()
        # By (start seq, frame index): a sealed segment's frame and its record offsets.
        self._frames: OrderedDict[tuple[int, int], tuple[bytes, list[int]]] = OrderedDict()

    def table(self, seg: SegmentFile) -> SeekTable | None:
        """The checked seek table of a sealed segment (cached), None if it was sealed as one frame.

        Its frame 0, the segment header, is checked once with it: a get reads frames only
        after the header said they are this segment's.
        """
        start = seg.start_seq
        if start in self._tables:
            self._tables.move_to_end(start)
            return self._tables[start]
        assert seg.sealed is not None
        file = str(seg.sealed)
        try:
            fd = open_ledger_file(seg.sealed, os.O_RDONLY, what="a segment file")
        except FileNotFoundError:
            raise LedgerCorrupt(
                "segment file disappeared while reading; it was deleted outside holon", file=file, offset=0
            ) from None
        try:
            size = os.fstat(fd).st_size
            table = read_seek_table(
                lambda count, offset: os.pread(fd, count, offset), size, file=file, start_seq=start
            )
        finally:
            os.close(fd)
        if table is not None:
            check_segment_header(read_sealed_frame(seg.sealed, table, 0), start, file, sealed=True)
        self._tables[start] = table
        while len(self._tables) > _SEEK_TABLES:
            self._tables.popitem(last=False)
        return table

    def frame(self, start_seq: int, table: SeekTable, seq: int) -> tuple[bytes, int, int]:
        """The decompressed frame holding ``seq``, the offset of its record in it, and the frame's.

        The last is the file offset the frame's first byte would have in the plain segment. The
        frame's records are walked (checksums and seqs) once and their offsets cached with
        it; a frame holding another number of records than its table entry says is
        LedgerCorrupt naming the entry, so a wrong table never yields a wrong record (and the
        reader checks the record's own seq against ``seq`` as well).
        """
        index = table.frame_of(seq)
        key = (start_seq, index)
        cached = self._frames.get(key)
        _c0, _c1, p0, _p1, s0, s1 = table.span(index)
        if cached is None:
            plain = read_sealed_frame(Path(table.file), table, index)
            walk = FrameWalk(
                plain,
                file=table.file,
                pos=0,
                end=len(plain),
                prev=None,
                active=False,
                verify_chain=False,
                base=p0,
                decompressed=True,
            )
            offsets = [offset for offset, _payload in walk.frames()]
            if len(offsets) != s1 - s0:
                says = f"the table says {s1 - s0} (seqs {s0}..{s1 - 1})"
                raise table.damage(f"frame {index} holds {len(offsets)} records, {says}", index=index)
            cached = self._frames[key] = (plain, offsets)
            while len(self._frames) > _FRAME_CACHE_SIZE:
                self._frames.popitem(last=False)
        else:
            self._frames.move_to_end(key)
        plain, offsets = cached
        return plain, offsets[seq - s0], p0

    def clear(self) -> None:
        self._tables.clear()
        self._frames.clear()
