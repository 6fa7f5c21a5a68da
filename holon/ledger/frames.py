"""Frame encoding and the verified frame walk: the unit of durability in a segment.

A frame holds one record::

    u32  payload length n            (little-endian)
    u32  n XOR 0xFFFFFFFF            guards the length: a damaged length is never
                                     mistaken for a frame that runs past the end
    u64  xxh3-64(prev || payload, seed=n)
    32B  prev: blake3 chain hash of the previous record
    nB   payload: the record's msgpack wire form

The chain hash of a record is ``blake3(prev || payload)``, i.e. the hash of the 32+n
bytes that follow the 16-byte frame head; storing ``prev`` in the frame lets a reader
check every link without keeping state from other segments.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import blake3
import xxhash

from holon.errors import InvalidRecord, LedgerCorrupt
from holon.ledger.sizes import MAX_PAYLOAD  # the largest payload a frame may carry

__all__ = [
    "FRAME_HEAD",
    "FRAME_OVERHEAD",
    "HASH_SIZE",
    "LENGTH_MASK",
    "MAX_PAYLOAD",
    "OVERSIZED_ADVICE",
    "FrameWalk",
    "TornTail",
    "chain_hash",
    "decode_frame",
    "encode_frame",
    "oversized_payload",
]

FRAME_HEAD: Final = struct.Struct("<IIQ")
HASH_SIZE: Final = 32
FRAME_OVERHEAD: Final = FRAME_HEAD.size + HASH_SIZE
#: XORed with a frame's payload length to give its guard field.
LENGTH_MASK: Final = 0xFFFFFFFF

_blake3 = blake3.blake3
_xxh3 = xxhash.xxh3_64_intdigest
_pack_head = FRAME_HEAD.pack
_unpack_head = FRAME_HEAD.unpack_from


def chain_hash(prev: bytes, payload: bytes) -> bytes:
    """The chain hash of a record: ``blake3(prev || payload)``."""
    return _blake3(prev + payload).digest()


#: What :func:`oversized_payload` tells a library caller to do (a command says its own).
OVERSIZED_ADVICE: Final = (
    "store large content as a blob (Ledger.put_blob) and keep only its reference in the record"
)


def oversized_payload(n: int, *, where: str | None) -> InvalidRecord:
    """The error for a record whose ``n``-byte payload exceeds :data:`MAX_PAYLOAD`.

    Every writer checks the length before it frames anything: a longer frame would be
    written fine and then read back as a damaged frame head, forever.
    """
    limit = f"{MAX_PAYLOAD:,}"
    if MAX_PAYLOAD >= 1 << 20:
        limit += f" ({MAX_PAYLOAD / (1 << 20):g} MiB)"
    return InvalidRecord(
        f"record is {n:,} bytes encoded; a record may be at most {limit}: {OVERSIZED_ADVICE}", where=where
    )


def encode_frame(prev: bytes, payload: bytes) -> tuple[bytes, bytes]:
    """Build the frame for ``payload`` after a record hashing to ``prev``.

    Returns ``(frame bytes, chain hash of this record)``. Raises InvalidRecord when the
    payload is longer than :data:`MAX_PAYLOAD` (no reader would accept the frame).
    """
    n = len(payload)
    if n > MAX_PAYLOAD:
        raise oversized_payload(n, where=None)
    body = prev + payload
    return _pack_head(n, n ^ LENGTH_MASK, _xxh3(body, n)) + body, _blake3(body).digest()


@dataclass(frozen=True)
class TornTail:
    """Bytes at the end of the active segment that are not a complete, valid frame.

    A crash mid-append leaves such a tail; a writer cuts it off on open, a reader
    treats it as the end of the data (the writer may still be writing that frame), and
    ``verify()`` reports it. ``offset`` and ``length`` are in bytes of ``file``.
    """

    file: str
    offset: int
    length: int
    reason: str
    #: Not a torn frame but a damaged one (checksum, head or chain link) with bytes after
    #: it, taken for the end of the data only because a cut there was asked for
    #: (``holon repair``); never set by a plain walk.
    damaged: bool = False

    def __str__(self) -> str:
        what = "1 byte that is" if self.length == 1 else f"{self.length} bytes that are"
        return f"{self.file} at byte {self.offset}: {what} not a valid frame ({self.reason})"


def decode_frame(buf: bytes | memoryview, pos: int = 0, *, file: str = "<frame>") -> tuple[bytes, bytes, int]:
    """Decode and check the single frame at ``pos``: returns ``(prev, payload, end)``.

    Raises :class:`LedgerCorrupt` naming ``file`` and the offset when the bytes are not
    one complete frame with a matching checksum.
    """
    walk = FrameWalk(buf, file=file, pos=pos, end=len(buf), prev=None, active=False, verify_chain=False)
    for _offset, payload in walk.frames():
        start = walk.pos - len(payload) - HASH_SIZE
        return bytes(buf[start : start + HASH_SIZE]), bytes(payload), walk.pos
    raise LedgerCorrupt("no frame: the data ends where a frame should start", file=file, offset=pos)


class FrameWalk:
    """Walks the frames of one segment's bytes, checking each checksum and chain link.

    ``prev`` is the chain hash the first frame must commit to (``None`` trusts whatever
    the first frame stores). ``active`` says the bytes are the writer's active segment,
    whose final frame may be incomplete: such a tail ends the walk and is left in
    :attr:`torn`. Anything else that is not a valid frame raises :class:`LedgerCorrupt`
    naming the file and offset (``decompressed``: offsets are into the decompressed bytes
    of a sealed segment, and errors say so). After the walk, :attr:`pos` is the end of
    the valid frames and :attr:`prev` the chain hash of the last one.
    """

    __slots__ = (
        "_base",
        "_buf",
        "_decompressed",
        "_end",
        "_verify_chain",
        "active",
        "file",
        "pos",
        "prev",
        "torn",
    )

    def __init__(
        self,
        buf: bytes | memoryview,
        *,
        file: str,
        pos: int,
        end: int,
        prev: bytes | None,
        active: bool,
        verify_chain: bool = True,
        base: int = 0,
        decompressed: bool = False,
    ) -> None:
        # bytes (not a view) so the hot loop can use bytes.startswith without copies.
        self._buf = buf if isinstance(buf, bytes) else bytes(buf)
        # Offset of buf[0] in the file: errors and torn tails name file offsets even when
        # ``buf`` is a chunk read from the middle of a segment.
        self._base = base
        self._decompressed = decompressed
        self._end = end
        self._verify_chain = verify_chain
        self.file = file
        self.pos = pos
        self.prev = prev
        self.active = active
        self.torn: TornTail | None = None

    def frames(self) -> Iterator[tuple[int, memoryview]]:
        """Yield ``(offset, payload)`` for each valid frame, in order."""
        buf: bytes = self._buf
        mv = memoryview(buf)
        startswith = buf.startswith
        end = self._end
        pos = self.pos
        prev = self.prev
        verify_chain = self._verify_chain
        head_size = FRAME_HEAD.size
        # One hasher reused per walk: constructing a blake3 object costs more than hashing
        # a few hundred bytes.
        hasher = _blake3()
        update, digest, reset = hasher.update, hasher.digest, hasher.reset
        while pos < end:
            if end - pos < head_size:
                self._damage(pos, "the data ends inside a frame head", incomplete=True)
                return
            n, guard, checksum = _unpack_head(buf, pos)
            if guard != n ^ LENGTH_MASK or n == 0 or n > MAX_PAYLOAD:
                if self._zero_from(pos):
                    self._damage(pos, "zero bytes where a frame should start", incomplete=True)
                    return
                self._damage(pos, f"frame head is damaged (length field {n}, guard {guard:#x})")
            stop = pos + FRAME_OVERHEAD + n
            if stop > end:
                self._damage(
                    pos, f"frame of {n} payload bytes runs past the end of the data", incomplete=True
                )
                return
            body = mv[pos + head_size : stop]
            if _xxh3(body, n) != checksum:
                if self.active and self._zero_from(stop):
                    self._damage(pos, "the final frame's checksum does not match", incomplete=True)
                    return
                self._damage(pos, "frame checksum mismatch")
            if prev is not None and not startswith(prev, pos + head_size):
                self._damage(
                    pos,
                    f"broken hash chain: frame commits to {buf[pos + head_size : pos + 48].hex()} "
                    f"but the previous record hashes to {prev.hex()}",
                )
            if verify_chain:
                update(body)
                prev = digest()
                reset()
            else:
                prev = None
            self.pos = stop
            self.prev = prev
            yield pos, mv[pos + FRAME_OVERHEAD : stop]
            pos = stop

    def _zero_from(self, pos: int) -> bool:
        """True when every byte from ``pos`` to the end is zero (never-written space)."""
        end = self._end
        if pos >= end:
            return True
        return self._buf.count(0, pos, end) == end - pos

    def _damage(self, pos: int, reason: str, *, incomplete: bool = False) -> None:
        """Record a torn tail (active segment, incomplete final frame) or raise."""
        if incomplete and self.active:
            self.torn = TornTail(self.file, pos + self._base, self._end - pos, reason)
            return
        raise LedgerCorrupt(reason, file=self.file, offset=pos + self._base, decompressed=self._decompressed)
