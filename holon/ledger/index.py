"""The offset index of the newest (plain) segment, extended as the segment grows.

A ``Ledger.get`` there finds its frame through :class:`ActiveIndex`, which reads only the
bytes appended since the last call instead of loading and walking the whole segment each
time. The reader (:mod:`holon.ledger.reader`) decodes the frame it hands back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from holon.ledger.files import open_ledger_file
from holon.ledger.frames import FRAME_HEAD, FRAME_OVERHEAD, LENGTH_MASK, MAX_PAYLOAD, FrameWalk
from holon.ledger.segments import ACTIVE_SEGMENT, SEGMENT_HEADER, check_segment_header

__all__ = ["ActiveIndex"]

# The index is extended by reading this much past its end at a time.
_INDEX_CHUNK: Final = 1 << 16
# A get reads this much at a frame's offset first: one read for all but large frames.
_FRAME_READ: Final = 4096
_unpack_head = FRAME_HEAD.unpack_from
_HEAD_SIZE: Final = FRAME_HEAD.size


class ActiveIndex:
    """Offsets of the frames of one plain segment, extended incrementally as it grows."""

    __slots__ = ("end", "fd", "offsets", "path", "start_seq")

    def __init__(self, start_seq: int, path: Path) -> None:
        self.start_seq = start_seq
        self.path = path
        # Set before os.open, which may fail (a missing or unreadable segment): __del__ still
        # runs on the half-built object and must find a descriptor to (not) close.
        self.fd = -1
        # Kept open: if the writer seals and unlinks the file, the open file still reads the
        # same (now complete) bytes.
        self.fd = open_ledger_file(path, os.O_RDONLY, what=ACTIVE_SEGMENT)
        self.offsets: list[int] = []
        self.end = SEGMENT_HEADER.size
        try:
            # The frames are only indexed; the header is what says whose they are. A damaged
            # one, or one naming another start seq, makes every get here LedgerCorrupt.
            check_segment_header(
                os.pread(self.fd, SEGMENT_HEADER.size, 0), start_seq, str(path), sealed=False
            )
        except BaseException:
            self.close()
            raise

    def extend(self) -> None:
        """Index the complete frames appended to the segment since the last call.

        Damage in those bytes raises LedgerCorrupt (naming the file and offset), on this
        call and every later one: a damaged segment is reported, not partly served.
        """
        fd = self.fd
        pos = self.end
        want = _INDEX_CHUNK
        file = str(self.path)
        while True:
            chunk = os.pread(fd, want, pos)
            if len(chunk) < _HEAD_SIZE:
                break
            walk = FrameWalk(
                chunk, file=file, pos=0, end=len(chunk), prev=None, active=True, verify_chain=False, base=pos
            )
            found = [pos + offset for offset, _payload in walk.frames()]
            self.offsets += found
            if walk.pos:
                pos += walk.pos
                want = _INDEX_CHUNK
                continue
            # No complete frame at pos. A short read reached the end of the data: what is there
            # is a torn tail (or a frame being written). A full chunk cannot tell: the frame may
            # be longer than it, and a damaged frame or zero bytes reaching its end are a torn
            # tail only if nothing but zeros follows in the file. Read more and look again.
            if len(chunk) < want:
                break
            n, guard, _checksum = _unpack_head(chunk, 0)
            whole = FRAME_OVERHEAD + n if guard == n ^ LENGTH_MASK and 0 < n <= MAX_PAYLOAD else 0
            want = whole if whole > want else 2 * want
        self.end = pos

    def frame(self, k: int) -> tuple[bytes, int]:
        """The bytes at the ``k``-th indexed frame (all of the frame, if it is whole), and its offset."""
        pos = self.offsets[k]
        frame = os.pread(self.fd, _FRAME_READ, pos)
        if len(frame) >= _HEAD_SIZE:
            n = _unpack_head(frame, 0)[0]
            if FRAME_OVERHEAD + n > len(frame):
                frame = os.pread(self.fd, FRAME_OVERHEAD + n, pos)
        return frame, pos

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        # A reader that is never closed (``Ledger.open(p, readonly=True).get(n)``) must not
        # leak the descriptor.
        self.close()
