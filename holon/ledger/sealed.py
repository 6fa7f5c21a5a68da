"""The sealed segment file: independent zstd frames and a seek table, so one record reads alone.

A sealed segment (``<seq>.seg.zst``, ledger format version 2) holds the bytes of its
plain segment as a sequence of zstd frames, each decompressible on its own, and ends
in a zstd *skippable* frame holding the seek table::

    zstd frame 0            the 64-byte segment header
    zstd frames 1..k-1      whole record frames, about SEAL_FRAME_BYTES of plain bytes each
    skippable frame         u32 SEEK_TABLE_MAGIC, u32 size of what follows, then:
      k x 24 bytes          u64 first seq, u64 plain offset, u64 compressed offset of frame i
      u64 end seq           the seq after the segment's last record
      u64 plain size        the size of the plain segment
      u32 k                 the number of zstd frames
      u32 table version     1
      u64 xxh3-64           of the table bytes above (from the first entry)
      8B  magic             b"HOLONSKT"

Concatenated zstd frames and skippable frames are one valid zstd stream, so
``zstd -d`` still gives the plain segment. ``get(seq)`` reads the seek table (the
file's last bytes), then decompresses only the frame holding ``seq``: about 256 KiB
instead of the whole ~8 MiB segment.

Segments sealed before format version 2 are a single zstd frame of the whole plain
segment, with no seek table; :func:`read_seek_table` returns ``None`` for them and
readers decompress them whole, as before. The two are told apart by the trailer magic
and by frame 0's declared size (exactly a segment header, which no single-frame seal
is: a sealed segment holds at least one record), so damage to either still leads to
the checks of this layout, which name it.

Nothing in the table is trusted: its checksum, the order and bounds of every entry, the
size each frame decompresses to, and the seq of the record each frame starts with are
checked before a record from it is returned; a table that disagrees with the frames is
:class:`~holon.errors.LedgerCorrupt` naming the file and the table's byte offset.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec
import xxhash
import zstandard

from holon.errors import LedgerCorrupt
from holon.ledger.compression import compress, decompress
from holon.ledger.files import open_ledger_file
from holon.ledger.frames import FRAME_HEAD, FRAME_OVERHEAD, HASH_SIZE, MAX_PAYLOAD

__all__ = [
    "SEAL_FRAME_BYTES",
    "SEEK_TABLE_MAGIC",
    "SeekTable",
    "decompress_sealed",
    "encode_sealed",
    "read_seek_table",
    "read_sealed_frame",
]

#: Plain bytes per zstd frame of a sealed segment (a frame closes at the first record
#: boundary at or past this size). 256 KiB costs ~2.5% of the zstd ratio of one frame
#: per segment on tool output (4.49x -> 4.37x) and makes a random read ~1 ms instead of
#: ~20-30 ms (docs/benchmarks.md).
SEAL_FRAME_BYTES: Final = 256 << 10
#: The zstd skippable-frame magic the seek table is stored under (0x184D2A50-5F are skippable).
SEEK_TABLE_MAGIC: Final = 0x184D2A50
_SKIPPABLE: Final = struct.Struct("<II")
_ENTRY: Final = struct.Struct("<QQQ")
_TRAILER: Final = struct.Struct("<QQIIQ8s")
_TRAILER_MAGIC: Final = b"HOLONSKT"
_TABLE_VERSION: Final = 1
# The 64-byte segment header is frame 0 (holon.ledger.segments.SEGMENT_HEADER).
_HEADER_SIZE: Final = 64
_LENGTH_MASK: Final = 0xFFFFFFFF
# A zstd frame header is at most 18 bytes: enough to read frame 0's declared size.
_ZSTD_HEADER_MAX: Final = 18
# The most plain bytes one compressed byte can stand for (holon.ledger.compression).
_MAX_RATIO: Final = 1 << 15


class _SeqOnly(msgspec.Struct):
    seq: int


_SEQ_DECODER: Final = msgspec.msgpack.Decoder(_SeqOnly)


@dataclass(frozen=True)
class SeekTable:
    """The checked seek table of one sealed segment.

    Frame ``i`` is compressed bytes ``compressed[i]:compressed[i + 1]`` of the file
    (the last ends at ``table_offset``), decompressing to plain bytes
    ``plain[i]:plain[i + 1]`` (the last ends at ``plain_size``); its records are seqs
    ``first_seqs[i]`` up to the next frame's (or ``end_seq``). Frame 0 is the segment
    header and holds no record.
    """

    file: str
    first_seqs: tuple[int, ...]
    plain: tuple[int, ...]
    compressed: tuple[int, ...]
    end_seq: int
    plain_size: int
    table_offset: int

    def frame_of(self, seq: int) -> int:
        """The index of the frame holding ``seq`` (which must be in the segment)."""
        first = self.first_seqs
        lo, hi = 1, len(first) - 1
        while lo < hi:  # the last frame (from 1) whose first seq is <= seq
            mid = (lo + hi + 1) // 2
            if first[mid] <= seq:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def span(self, index: int) -> tuple[int, int, int, int, int, int]:
        """``(compressed start, end, plain start, end, first seq, end seq)`` of frame ``index``."""
        last = index == len(self.plain) - 1
        return (
            self.compressed[index],
            self.table_offset if last else self.compressed[index + 1],
            self.plain[index],
            self.plain_size if last else self.plain[index + 1],
            self.first_seqs[index],
            self.end_seq if last else self.first_seqs[index + 1],
        )

    def damage(self, message: str, *, index: int | None = None) -> LedgerCorrupt:
        """LedgerCorrupt naming the table (or frame ``index``'s entry in it) as what is wrong."""
        offset = self.table_offset + (_SKIPPABLE.size + index * _ENTRY.size if index is not None else 0)
        return _table_damage(message, file=self.file, offset=offset)


def _table_damage(message: str, *, file: str, offset: int) -> LedgerCorrupt:
    return LedgerCorrupt(
        f"seek table of the sealed segment: {message}; the zstd frames before it may be intact "
        "(`zstd -dc` of the file gives the plain segment), otherwise restore the file from a backup",
        file=file,
        offset=offset,
    )


def encode_sealed(data: bytes, *, start_seq: int, level: int, file: str) -> bytes:
    """The sealed form of a complete plain segment ``data`` (header and frames) starting at ``start_seq``.

    Frames are split only between records, found by their length fields; ``data`` was
    checked by whoever seals it (the writer wrote it, recovery walked it), but a length
    that does not hold is refused (LedgerCorrupt naming ``file``) rather than sealed.
    """
    unpack = FRAME_HEAD.unpack_from
    bounds = [(0, start_seq), (_HEADER_SIZE, start_seq)]  # (plain offset, first seq) of each frame
    pos, seq, chunk_start, end = _HEADER_SIZE, start_seq, _HEADER_SIZE, len(data)
    while pos < end:
        if end - pos < FRAME_OVERHEAD:
            raise LedgerCorrupt("cannot seal: the segment ends inside a frame", file=file, offset=pos)
        n, guard, _checksum = unpack(data, pos)
        if guard != n ^ _LENGTH_MASK or n == 0 or n > MAX_PAYLOAD or pos + FRAME_OVERHEAD + n > end:
            raise LedgerCorrupt("cannot seal: a frame's length is damaged", file=file, offset=pos)
        pos += FRAME_OVERHEAD + n
        seq += 1
        if pos - chunk_start >= SEAL_FRAME_BYTES and pos < end:
            bounds.append((pos, seq))
            chunk_start = pos
    if seq == start_seq:
        raise LedgerCorrupt("cannot seal: the segment holds no record", file=file, offset=_HEADER_SIZE)
    parts: list[bytes] = []
    entries: list[bytes] = []
    compressed = 0
    with memoryview(data) as view:
        for index, (plain_start, first_seq) in enumerate(bounds):
            plain_end = bounds[index + 1][0] if index + 1 < len(bounds) else end
            frame = compress(view[plain_start:plain_end], level=level)
            entries.append(_ENTRY.pack(first_seq, plain_start, compressed))
            parts.append(frame)
            compressed += len(frame)
    table = b"".join(entries)
    trailer = _TRAILER.pack(seq, end, len(bounds), _TABLE_VERSION, 0, _TRAILER_MAGIC)
    checked = table + trailer[:24]
    trailer = _TRAILER.pack(
        seq, end, len(bounds), _TABLE_VERSION, xxhash.xxh3_64_intdigest(checked), _TRAILER_MAGIC
    )
    parts.append(_SKIPPABLE.pack(SEEK_TABLE_MAGIC, len(table) + len(trailer)))
    parts.append(table)
    parts.append(trailer)
    return b"".join(parts)


def read_seek_table(
    read_at: Callable[[int, int], bytes], size: int, *, file: str, start_seq: int
) -> SeekTable | None:
    """The checked seek table of a sealed segment file of ``size`` bytes; ``None`` for a single-frame one.

    ``read_at(count, offset)`` reads the file's bytes (fewer only at its end). Damage to
    the table raises LedgerCorrupt naming the file and the table's offset.
    """
    tail = read_at(_TRAILER.size, max(size - _TRAILER.size, 0)) if size >= _TRAILER.size else b""
    if len(tail) != _TRAILER.size or tail[-len(_TRAILER_MAGIC) :] != _TRAILER_MAGIC:
        # No trailer: a segment sealed as one frame, unless frame 0 is a bare segment header
        # (then this layout's trailer is what is damaged).
        head = read_at(_ZSTD_HEADER_MAX, 0)
        try:
            declared = zstandard.frame_content_size(head)
        except zstandard.ZstdError:
            return None  # not even a zstd frame header: the whole-file decompression names it
        if declared != _HEADER_SIZE:
            return None
        raise _table_damage(
            "the file does not end in a seek table although its first frame is a bare segment header",
            file=file,
            offset=max(size - _TRAILER.size, 0),
        )
    end_seq, plain_size, count, version, checksum, _magic = _TRAILER.unpack(tail)
    trailer_at = size - _TRAILER.size
    table_bytes = count * _ENTRY.size
    table_offset = trailer_at - table_bytes - _SKIPPABLE.size
    if count < 2 or table_offset < 0:
        raise _table_damage(
            f"its trailer counts {count} frames, which the file cannot hold", file=file, offset=trailer_at
        )
    raw = read_at(_SKIPPABLE.size + table_bytes, table_offset)
    magic, length = _SKIPPABLE.unpack_from(raw, 0)
    if magic != SEEK_TABLE_MAGIC or length != table_bytes + _TRAILER.size:
        raise _table_damage(
            f"its skippable frame header (magic {magic:#x}, {length} bytes) does not frame a table of "
            f"{count} entries",
            file=file,
            offset=table_offset,
        )
    if xxhash.xxh3_64_intdigest(raw[_SKIPPABLE.size :] + tail[:24]) != checksum:
        raise _table_damage("checksum mismatch", file=file, offset=table_offset)
    if version != _TABLE_VERSION:
        raise _table_damage(f"table version {version} is not {_TABLE_VERSION}", file=file, offset=trailer_at)
    entries = list(_ENTRY.iter_unpack(raw[_SKIPPABLE.size :]))
    table = SeekTable(
        file=file,
        first_seqs=tuple(entry[0] for entry in entries),
        plain=tuple(entry[1] for entry in entries),
        compressed=tuple(entry[2] for entry in entries),
        end_seq=end_seq,
        plain_size=plain_size,
        table_offset=table_offset,
    )
    _check_table(table, start_seq)
    return table


def _check_table(table: SeekTable, start_seq: int) -> None:
    """Refuse a table whose entries are out of order or out of bounds (its checksum held)."""
    first, plain, compressed = table.first_seqs, table.plain, table.compressed
    if first[0] != start_seq or first[1] != start_seq:
        raise table.damage(
            f"it says the segment starts at seq {first[0]}, its name says {start_seq}", index=0
        )
    if plain[0] != 0 or compressed[0] != 0 or plain[1] != _HEADER_SIZE:
        raise table.damage(f"frame 0 must be the {_HEADER_SIZE}-byte segment header at byte 0", index=0)
    for index in range(len(plain)):
        c0, c1, p0, p1, s0, s1 = table.span(index)
        # Every frame holds at least one record (frame 0: the header), and can hold no more
        # plain bytes than its compressed bytes stand for: a damaged size never becomes an
        # allocation of that size.
        if not (c0 < c1 and p0 < p1 and (s0 < s1 or index == 0)) or p1 - p0 > (c1 - c0) * _MAX_RATIO:
            raise table.damage(f"frame {index}'s entry is out of order or out of bounds", index=index)


def decompress_sealed(data: bytes, *, file: str, start_seq: int) -> bytes:
    """The plain segment a sealed segment file's bytes ``data`` hold (either layout); damage raises."""
    size = len(data)
    table = read_seek_table(
        lambda count, offset: data[offset : offset + count], size, file=file, start_seq=start_seq
    )
    if table is None:
        return decompress(data, file=file)
    out: list[bytes] = []
    with memoryview(data) as view:
        for index in range(len(table.plain)):
            c0, c1, _p0, _p1, _s0, _s1 = table.span(index)
            out.append(_checked_frame(table, index, view[c0:c1]))
    # Each frame's first seq was checked against its record; the end seq is checked by
    # counting the last frame's records (by their lengths: damage there is the walk's to name).
    last = len(table.plain) - 1
    _c0, _c1, _p0, _p1, s0, s1 = table.span(last)
    held = _count_records(out[-1])
    if held is not None and held != s1 - s0:
        raise table.damage(
            f"frame {last} holds {held} records, the table says {s1 - s0} (seqs {s0}..{s1 - 1})", index=last
        )
    return b"".join(out)


def _count_records(plain: bytes) -> int | None:
    """How many record frames ``plain`` holds by their length fields; None if one does not hold."""
    unpack = FRAME_HEAD.unpack_from
    pos, count, end = 0, 0, len(plain)
    while pos < end:
        if end - pos < FRAME_OVERHEAD:
            return None
        n, guard, _checksum = unpack(plain, pos)
        if guard != n ^ _LENGTH_MASK or n == 0:
            return None
        pos += FRAME_OVERHEAD + n
        count += 1
    return count if pos == end else None


def read_sealed_frame(path: Path, table: SeekTable, index: int) -> bytes:
    """The plain bytes of frame ``index`` of the sealed segment at ``path``, checked against ``table``."""
    c0, c1, _p0, _p1, _s0, _s1 = table.span(index)
    try:
        fd = open_ledger_file(path, os.O_RDONLY, what="a segment file")
    except FileNotFoundError:
        raise LedgerCorrupt(
            "segment file disappeared while reading; it was deleted outside holon", file=str(path), offset=0
        ) from None
    try:
        raw = os.pread(fd, c1 - c0, c0)
    finally:
        os.close(fd)
    if len(raw) != c1 - c0:
        raise LedgerCorrupt(
            f"the file ends inside zstd frame {index}, which its seek table says ends at byte {c1}",
            file=str(path),
            offset=c0 + len(raw),
        )
    return _checked_frame(table, index, raw)


def _checked_frame(table: SeekTable, index: int, raw: bytes | memoryview) -> bytes:
    """Decompress frame ``index`` (its compressed bytes ``raw``) and check it against the table."""
    c0, _c1, p0, p1, s0, _s1 = table.span(index)
    plain = decompress(raw, file=table.file, base=c0)
    if len(plain) != p1 - p0:
        raise table.damage(
            f"frame {index} (compressed bytes {c0}..{_c1}) decompresses to {len(plain):,} bytes, "
            f"its entry says {p1 - p0:,}",
            index=index,
        )
    if index:
        seq = _first_record_seq(plain)
        if seq is not None and seq != s0:
            raise table.damage(f"frame {index} starts with seq {seq}, its entry says seq {s0}", index=index)
    return plain


def _first_record_seq(plain: bytes) -> int | None:
    """The seq of the record frame at the start of ``plain``; None when that frame is itself damaged.

    A damaged record frame is the frame walk's to name (with its own offset), not the table's.
    """
    if len(plain) < FRAME_OVERHEAD:
        return None
    n, guard, checksum = FRAME_HEAD.unpack_from(plain, 0)
    stop = FRAME_OVERHEAD + n
    if guard != n ^ _LENGTH_MASK or stop > len(plain):
        return None
    with memoryview(plain) as view:
        if xxhash.xxh3_64_intdigest(view[FRAME_HEAD.size : stop], n) != checksum:
            return None
        try:
            return _SEQ_DECODER.decode(view[FRAME_HEAD.size + HASH_SIZE : stop]).seq
        except msgspec.DecodeError:
            return None
