"""Segment files: naming, the 64-byte segment header, loading, creating and sealing.

A segment holds the frames of a contiguous seq range and is named by its first seq::

    segments/00000000000000000000.seg       active (or not yet sealed), appended in place
    segments/00000000000000004096.seg.zst   sealed: the same bytes as zstd frames and a seek
                                            table (holon.ledger.sealed); one zstd frame if
                                            sealed before ledger format version 2

Segment header (64 bytes, little-endian)::

    8B   magic b"HOLONSEG"
    u16  segment layout version (SEGMENT_VERSION)
    u16  reserved (0)
    u32  reserved (0)
    u64  start seq (must equal the number in the file name)
    32B  chain hash of the record before start seq (the genesis hash for segment 0)
    u64  xxh3-64 of the 56 bytes above

Sealing writes ``<name>.zst`` atomically and only then unlinks the plain file, so a
crash leaves the plain file, or both (a writer then finishes the job), never neither.

A segment's name that is a symbolic link, or a segment directory that is one, is
LedgerCorrupt naming it, for readers as for the writer (see holon.ledger.files and
docs/ledger-format.md, *Directory layout*).
"""

from __future__ import annotations

import os
import re
import shlex
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import xxhash

from holon.errors import LedgerCorrupt, NotALedger
from holon.ledger.files import fsync_dir, link_refused, read_ledger_file, refuse_link, write_atomic
from holon.ledger.sealed import decompress_sealed, encode_sealed

__all__ = [
    "ACTIVE_SEGMENT",
    "FORMAT_VERSION",
    "PLAIN_SUFFIX",
    "SEALED_SUFFIX",
    "SEGMENT_DIR",
    "SEGMENT_HEADER",
    "SEGMENT_VERSION",
    "SegmentFile",
    "SegmentHeader",
    "check_segment_header",
    "create_segment",
    "encode_segment_header",
    "find_segment",
    "list_segments",
    "load_segment",
    "parse_segment_header",
    "seal_segment",
    "segment_dir_names",
    "segment_name",
    "seq_gap",
    "short_segment",
]

#: Ledger format version, written into the ledger header. 2: sealed segments are zstd frames
#: with a seek table (holon.ledger.sealed); version 1 ledgers read unchanged, and a writer
#: upgrades their header before it seals a segment the new way (holon.ledger.header).
FORMAT_VERSION: Final = 2

#: How an error names the active segment's file (the writer appends to it, readers index it).
ACTIVE_SEGMENT: Final = "the active segment"

#: Version of the plain segment layout (64-byte header, frames), in every segment header:
#: unchanged by format version 2, which changed only how a segment is sealed.
SEGMENT_VERSION: Final = 1
SEGMENT_MAGIC: Final = b"HOLONSEG"
SEGMENT_HEADER: Final = struct.Struct("<8sHHIQ32sQ")
PLAIN_SUFFIX: Final = ".seg"
SEALED_SUFFIX: Final = ".seg.zst"
_NAME_RE: Final = re.compile(r"^(\d{20})\.seg(\.zst)?$")
ZSTD_LEVEL: Final = 3


def segment_name(start_seq: int) -> str:
    """File name (without the ``.zst`` of a sealed one) of the segment starting at ``start_seq``."""
    return f"{start_seq:020d}{PLAIN_SUFFIX}"


@dataclass(frozen=True)
class SegmentHeader:
    """The decoded 64-byte header of a segment."""

    start_seq: int
    prev_hash: bytes
    version: int


def encode_segment_header(start_seq: int, prev_hash: bytes) -> bytes:
    """The 64 header bytes of a new segment."""
    head = SEGMENT_HEADER.pack(SEGMENT_MAGIC, SEGMENT_VERSION, 0, 0, start_seq, prev_hash, 0)[:-8]
    return head + struct.pack("<Q", xxhash.xxh3_64_intdigest(head))


def parse_segment_header(buf: bytes, *, file: str, decompressed: bool = False) -> SegmentHeader:
    """Decode and check a segment header; raise LedgerCorrupt/NotALedger naming ``file``.

    ``decompressed``: ``buf`` is a sealed segment's decompressed bytes (errors say so).
    """
    if len(buf) < SEGMENT_HEADER.size:
        raise LedgerCorrupt(
            short_segment(len(buf), file=file, decompressed=decompressed),
            file=file,
            offset=0,
            decompressed=decompressed,
        )
    magic, version, _r1, _r2, start_seq, prev_hash, checksum = SEGMENT_HEADER.unpack_from(buf, 0)
    if magic != SEGMENT_MAGIC:
        raise LedgerCorrupt(
            f"segment header magic is {magic!r}, expected {SEGMENT_MAGIC!r}",
            file=file,
            offset=0,
            decompressed=decompressed,
        )
    if xxhash.xxh3_64_intdigest(buf[: SEGMENT_HEADER.size - 8]) != checksum:
        raise LedgerCorrupt(
            "segment header checksum mismatch", file=file, offset=0, decompressed=decompressed
        )
    if version > SEGMENT_VERSION:
        raise NotALedger(
            f"segment {file} has format version {version}, newer than the {SEGMENT_VERSION} this "
            "holon reads; upgrade holon to read this ledger"
        )
    return SegmentHeader(start_seq=start_seq, prev_hash=prev_hash, version=version)


def check_segment_header(buf: bytes, start_seq: int, file: str, *, sealed: bool) -> SegmentHeader:
    """Parse a segment's header and check it starts at the seq its file name says."""
    header = parse_segment_header(buf, file=file, decompressed=sealed)
    if header.start_seq != start_seq:
        raise LedgerCorrupt(
            f"segment header says it starts at seq {header.start_seq}, its name says {start_seq}",
            file=file,
            offset=0,
            decompressed=sealed,
        )
    return header


def short_segment(size: int, *, file: str, decompressed: bool = False) -> str:
    """What is wrong with a segment of ``size`` bytes, shorter than its header, and what to do.

    holon writes a segment's header whole when it creates the segment (atomically), so
    only something else leaves one shorter: a copy tool or a full disk. Its records, if it
    held any, are gone with its bytes; the ledger's source or a backup still has them. The
    newest segment (plain, the writer's) can be given a new header by ``holon repair``.
    """
    what = f"segment is {size} bytes, shorter than its {SEGMENT_HEADER.size}-byte header"
    if decompressed:
        return f"{what}; holon never seals such a segment: restore it from a backup"
    ledger = shlex.quote(str(Path(file).parent.parent))
    return (
        f"{what}; holon writes a segment's header whole, so a copy tool or a full disk cut this file, "
        "and any record it held went with its bytes. If the ledger is a copy, copy it again from its "
        f"source (or a backup); if not, and this is the newest segment, `holon repair {ledger}` shows how "
        "to give it a new header (the file holds no record to lose)"
    )


def seq_gap(expected: int, start_seq: int) -> str:
    """What is wrong when a segment starts at ``start_seq`` but the records so far end before ``expected``."""
    if start_seq > expected:
        return (
            f"records {expected}..{start_seq - 1} are missing: the segment holding them was deleted; "
            "restore it from a backup"
        )
    return (
        f"the segment starts at seq {start_seq}, but the segment before it holds records up to seq "
        f"{expected - 1}: the two overlap (a segment file from another copy of the ledger?); "
        "restore the segment directory from a backup"
    )


@dataclass(frozen=True)
class SegmentFile:
    """One segment on disk: its plain file, its sealed file, or (mid-seal) both."""

    start_seq: int
    plain: Path | None
    sealed: Path | None

    @property
    def name(self) -> str:
        """The file a reader would open first (for error messages)."""
        path = self.plain or self.sealed
        assert path is not None
        return str(path)


def _missing_dir(seg_dir: Path) -> LedgerCorrupt:
    # The header says this is a ledger: a missing segment directory is damage to it.
    return LedgerCorrupt(
        "the segment directory is missing (every record is gone); restore it from a backup",
        file=str(seg_dir),
    )


#: The segment directory as errors name it.
SEGMENT_DIR: Final = "the segment directory"


def segment_dir_names(seg_dir: Path) -> list[str]:
    """The names in the segment directory; LedgerCorrupt if it is missing, a link or not a directory."""
    refuse_link(seg_dir, SEGMENT_DIR)
    try:
        return os.listdir(seg_dir)
    except (FileNotFoundError, NotADirectoryError):
        raise _missing_dir(seg_dir) from None


def list_segments(seg_dir: Path) -> list[SegmentFile]:
    """All segments in ``seg_dir`` sorted by start seq; other files are ignored.

    An entry with a segment's name that is not a regular file (a directory, a device) is
    LedgerCorrupt naming it: every reader lists first, so none of them meets it as an
    IsADirectoryError, or blocks reading a pipe. So is one that is a symbolic link, and a
    segment directory that is one: a writer would append to, truncate or seal what it
    points to, and a reader would read bytes from outside the ledger as its records.
    """
    plain: dict[int, Path] = {}
    sealed: dict[int, Path] = {}
    refuse_link(seg_dir, SEGMENT_DIR)
    try:
        entries = list(os.scandir(seg_dir))
    except (FileNotFoundError, NotADirectoryError):
        raise _missing_dir(seg_dir) from None
    for entry in entries:
        match = _NAME_RE.match(entry.name)
        if match is None:
            continue
        path = seg_dir / entry.name
        # d_type from the listing: no extra stat on Linux. Where entries carry no type (XFS
        # without ftype, NFS) is_file() stats the name, and a plain segment the writer's
        # sealing thread unlinked since the readdir answers False: it was a regular file,
        # and reading it falls back to its sealed copy.
        if entry.is_symlink():
            raise link_refused(path, "a segment file")
        if not entry.is_file() and os.path.lexists(path):
            raise LedgerCorrupt(
                "a segment's name holds something that is not a regular file; move it away and "
                "restore the segment from a backup",
                file=str(path),
            )
        start = int(match.group(1))
        (sealed if match.group(2) else plain)[start] = path
    return [SegmentFile(s, plain.get(s), sealed.get(s)) for s in sorted(plain.keys() | sealed.keys())]


def find_segment(seg_dir: Path, start_seq: int) -> SegmentFile | None:
    """The segment starting at ``start_seq``, looked up by name; None if it has no file.

    A listing of a directory too large for one ``getdents`` call can miss a segment that
    the writer's sealing thread sealed during it (its ``.zst`` renamed in where the listing
    had already passed, its plain file unlinked where it had not yet arrived: POSIX leaves
    entries added or removed during a readdir unspecified). A reader that finds a gap
    asks for the missing name directly before it calls the gap damage. The plain name is
    tried first: the sealed file exists before the plain one is unlinked. A link under
    either name is LedgerCorrupt, as in a listing.
    """
    plain = seg_dir / segment_name(start_seq)
    sealed = plain.with_name(plain.name + ".zst")
    for path in (plain, sealed):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise link_refused(path, "a segment file")
        if stat.S_ISREG(mode):
            return SegmentFile(start_seq, path, None) if path is plain else SegmentFile(start_seq, None, path)
    return None


def load_segment(seg: SegmentFile) -> tuple[bytes, str, bool]:
    """Read a segment's frame bytes: ``(bytes, file name, sealed?)``.

    The plain file wins when both exist (a seal in progress). A plain file that vanishes
    between listing and opening was just sealed by the writer: read the sealed one.
    """
    if seg.plain is not None:
        try:
            return read_ledger_file(seg.plain, what="a segment file"), str(seg.plain), False
        except FileNotFoundError:
            pass
    sealed = seg.sealed
    if sealed is None:
        assert seg.plain is not None
        sealed = seg.plain.with_name(seg.plain.name + ".zst")
    try:
        data = read_ledger_file(sealed, what="a segment file")
    except FileNotFoundError:
        raise LedgerCorrupt(
            "segment file disappeared while reading; it was deleted outside holon",
            file=str(sealed),
            offset=0,
        ) from None
    return decompress_sealed(data, file=str(sealed), start_seq=seg.start_seq), str(sealed), True


def create_segment(seg_dir: Path, start_seq: int, prev_hash: bytes) -> Path:
    """Create the empty active segment starting at ``start_seq``, atomically and durably."""
    path = seg_dir / segment_name(start_seq)
    write_atomic(path, encode_segment_header(start_seq, prev_hash), what="a new segment")
    return path


def seal_segment(plain: Path, data: bytes) -> Path:
    """Replace a finished plain segment by its sealed form (zstd frames and a seek table), crash-safely.

    ``data`` is the segment's full content (header and frames, nothing after the last
    frame). The compressed file is made durable under its final name before the plain
    file is removed.
    """
    sealed = plain.with_name(plain.name + ".zst")
    start_seq = parse_segment_header(data, file=str(plain)).start_seq
    write_atomic(
        sealed,
        encode_sealed(data, start_seq=start_seq, level=ZSTD_LEVEL, file=str(plain)),
        what="a sealed segment",
    )
    plain.unlink()
    fsync_dir(plain.parent)
    return sealed
