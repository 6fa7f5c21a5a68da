"""Full verification of a ledger: every frame, every chain link, every blob.

Unlike reading, verification does not stop at the first problem: it checks each
segment on its own (re-synchronising the chain at the next segment's header) and
returns a :class:`VerifyReport` listing every problem with its file and offset, and
the torn tail of the active segment, if there is one.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from holon.errors import HolonError, InvalidRef, LedgerCorrupt, RefNotFound, byte_location
from holon.ledger.blobs import BlobStore, check_blob_hash
from holon.ledger.files import link_refused
from holon.ledger.frames import FrameWalk, TornTail
from holon.ledger.header import LedgerHeader
from holon.ledger.segments import (
    SEGMENT_HEADER,
    SegmentFile,
    find_segment,
    list_segments,
    load_segment,
    parse_segment_header,
    seq_gap,
)
from holon.records import MAX_TS, MIN_TS, TaskResult, ToolResult, decode_msgpack_record

__all__ = ["TS_EXAMPLES", "Problem", "VerifyReport", "verify_ledger"]

#: How many records with an out-of-range ``ts`` a report names (it counts them all).
TS_EXAMPLES = 10
# How many skipped dotfiles the warning names (the report lists them all).
_IGNORED_SHOWN = 5


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a ledger, and where.

    ``offset`` is a byte offset into ``file`` as stored, unless ``decompressed`` is true:
    then it is into the decompressed bytes of a sealed segment (and ``str`` says so).
    """

    file: str
    offset: int | None
    message: str
    decompressed: bool = False

    def __str__(self) -> str:
        return f"{byte_location(self.file, self.offset, decompressed=self.decompressed)}: {self.message}"


@dataclass(frozen=True)
class VerifyReport:
    """The result of :meth:`Ledger.verify`: ``ok`` when no problem was found.

    ``ok`` is about complete records: a torn tail (``torn_tail``, the bytes after the
    last valid frame of the active segment) does not make a ledger not ok, because a
    crash mid-append leaves exactly that. It is reported in :attr:`warnings`.
    """

    ok: bool
    records_checked: int
    blobs_checked: int
    #: ``(seq, hash hex)`` of the last record of the unbroken run from seq 0 whose frames,
    #: seqs and chain links verified, ``(-1, genesis)`` when there is none. When ``ok``,
    #: the ledger's head; otherwise the head the ledger holds intact up to its first
    #: damaged record or segment (records after damage may verify too, but not as a chain
    #: from the genesis hash).
    head: tuple[int, str]
    problems: tuple[Problem, ...]
    torn_tail: TornTail | None = None
    #: ``(seq, ts)`` of the first :data:`TS_EXAMPLES` records whose ``ts`` is outside
    #: ``MIN_TS .. MAX_TS`` (written before the ledger refused them), in seq order.
    ts_out_of_range: tuple[tuple[int, int], ...] = ()
    #: How many records hold such a ``ts`` in all.
    ts_out_of_range_count: int = 0
    #: Entries of the blob store that are no blobs and were not checked: dotfiles that a
    #: file manager leaves (``.DS_Store``), see :func:`~holon.ledger.blobs.is_dotfile`.
    ignored: tuple[str, ...] = ()

    @property
    def warnings(self) -> tuple[str, ...]:
        """What is not wrong with the stored bytes but deserves attention.

        The torn tail, if any, and records holding a ``ts`` outside the range ``append``
        accepts (older ledgers may): intact, hash-chained records, so not corruption.
        """
        return tuple(
            w for w in (self.torn_tail_warning, self.ts_warning, self.ignored_warning) if w is not None
        )

    @property
    def ignored_warning(self) -> str | None:
        """The warning about :attr:`ignored` files, None without any."""
        if not self.ignored:
            return None
        shown = ", ".join(self.ignored[:_IGNORED_SHOWN])
        more = f" and {len(self.ignored) - _IGNORED_SHOWN} more" if len(self.ignored) > _IGNORED_SHOWN else ""
        return (
            f"{len(self.ignored)} file(s) in the blob store are not blobs and were skipped: {shown}{more}; "
            "their names start with a dot, as a file manager's files do (.DS_Store from macOS Finder, "
            "._ AppleDouble files), and holon never writes such a name; they do no harm, and deleting "
            "them is safe"
        )

    @property
    def torn_tail_warning(self) -> str | None:
        """The warning about :attr:`torn_tail`, None without one."""
        tail = self.torn_tail
        if tail is None:
            return None
        cut = "that byte" if tail.length == 1 else f"those {tail.length} bytes"
        return (
            f"torn tail: {tail} — this is what a crash mid-append leaves (damage to the final frame, "
            "or a write in progress, looks the same); the records before it verify, and opening the "
            f"ledger for writing will cut {cut}"
        )

    @property
    def ts_warning(self) -> str | None:
        """The warning about records whose ``ts`` is out of range, None without any."""
        count = self.ts_out_of_range_count
        if not count:
            return None
        shown = self.ts_out_of_range
        named = ", ".join(f"seq {seq} (ts {ts})" for seq, ts in shown)
        more = f" and {count - len(shown)} more" if count > len(shown) else ""
        return (
            f"{count} record(s) hold a ts outside {MIN_TS}..{MAX_TS} (milliseconds since the epoch, "
            f"1970 to the year 5138), which appends refuse: {named}{more}; written before that check, "
            "they verify as stored (the hash chain commits to them), but their times are no times: "
            "audit durations from them are wrong (NULL past 64 bits), and an export of this ledger "
            "does not import"
        )

    def __str__(self) -> str:
        if self.ok:
            seq, digest = self.head
            head = f"head seq {seq} hash {digest}" if seq >= 0 else f"empty, genesis {digest}"
            lines = [f"ledger ok: {self.records_checked} records, {self.blobs_checked} blobs, {head}"]
        else:
            lines = [f"ledger has {len(self.problems)} problem(s):"]
            lines += [f"  {p}" for p in self.problems]
            seq, digest = self.head
            lines.append(
                f"records verified up to seq {seq} (hash {digest}), a chain from seq 0"
                if seq >= 0
                else "no record verified as a chain from seq 0"
            )
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _problem(exc: HolonError, default_file: str) -> Problem:
    if isinstance(exc, LedgerCorrupt):
        # The bare message: the report already says where, and it is the full report.
        return Problem(exc.file, exc.offset, exc.detail, exc.decompressed)
    return Problem(default_file, None, str(exc))


def _size(path: Path | None) -> int:
    """A file's size on disk, 0 if it is gone (a segment sealed meanwhile)."""
    if path is None:
        return 0
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def verify_ledger(
    seg_dir: Path,
    blobs: BlobStore,
    header: LedgerHeader,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyReport:
    """Verify the ledger whose segments are in ``seg_dir`` and blobs in ``blobs``.

    ``progress(done, total)`` is called after each segment and each blob, counting the
    bytes of the files checked so far (as stored on disk) out of all of them.
    """
    check = _LedgerCheck(
        seg_dir=seg_dir, progress=progress, verified=(-1, header.genesis), prev=header.genesis
    )
    try:
        check.segs = list_segments(seg_dir)
        if not check.segs:
            check.problems.append(Problem(str(seg_dir), None, "the ledger has no segment files"))
    except LedgerCorrupt as exc:  # no segment directory: reported, and the blobs still checked
        check.problems.append(_problem(exc, str(seg_dir)))
    ignored: list[Path] = []
    if blobs.root.is_symlink():
        check.problems.append(_problem(link_refused(blobs.root, "the blob store directory"), str(blobs.root)))
        stored = []
    else:
        stored = list(blobs.hashes(ignored))
    # Progress counts bytes as stored: the sizes are read once, only when asked for.
    check.seg_sizes = [check.sized(seg) for seg in check.segs]
    blob_sizes = [_size(path) if progress else 0 for _, path in stored]
    check.total = sum(check.seg_sizes) + sum(blob_sizes)
    # Not a for loop over the listing: checking a segment may insert one missed before it
    # and append those a rollover wrote after it, and each is checked in its turn.
    index = 0
    while index < len(check.segs):
        check.segment(index)
        index += 1
    actual, blobs_checked = check.stored_blobs(blobs, stored, blob_sizes)
    check.references(blobs, actual)
    seq, digest = check.verified
    assert digest is not None  # the walk checks chain links, so each frame's hash is known
    return VerifyReport(
        ok=not check.problems,
        records_checked=check.checked,
        blobs_checked=blobs_checked,
        head=(seq, digest.hex()),
        problems=tuple(check.problems),
        torn_tail=check.torn,
        ts_out_of_range=tuple(check.odd_ts),
        ts_out_of_range_count=check.bad_ts,
        ignored=tuple(str(path) for path in ignored),
    )


@dataclass
class _LedgerCheck:
    """What :func:`verify_ledger` found so far, going through the segments, then the blobs."""

    seg_dir: Path
    progress: Callable[[int, int], None] | None
    #: (seq, chain hash) of the last record of the verified run from seq 0.
    verified: tuple[int, bytes | None]
    #: The chain hash the next segment's header must name, ``None`` after damage.
    prev: bytes | None
    #: The seq the next segment must start at, ``None`` after damage.
    expected: int | None = 0
    problems: list[Problem] = field(default_factory=list)
    #: (blob hash, size the record states) -> first seq stating it: each referenced blob
    #: must exist and hold that many bytes.
    claimed: dict[tuple[str, int], int] = field(default_factory=dict)
    checked: int = 0
    #: (seq, ts) of the first records holding a ts out of range.
    odd_ts: list[tuple[int, int]] = field(default_factory=list)
    bad_ts: int = 0
    torn: TornTail | None = None
    segs: list[SegmentFile] = field(default_factory=list)
    seg_sizes: list[int] = field(default_factory=list)
    done: int = 0
    total: int = 0

    def sized(self, seg: SegmentFile) -> int:
        """A segment's size as stored, for progress (0 when none is asked for)."""
        return _size(seg.plain or seg.sealed) if self.progress else 0

    def advance(self, size: int) -> None:
        """Count ``size`` more bytes checked, and tell the progress callback."""
        if self.progress is not None:
            self.done += size
            self.progress(self.done, self.total)

    def segment(self, index: int) -> None:
        """Check the segment at ``index``: its header, every frame, and what follows it."""
        seg = self._listed_or_missed(index)
        file = seg.name
        try:
            buf, file, sealed = load_segment(seg)
            self._segment_header(seg, buf, file, sealed)
            last = index == len(self.segs) - 1
            # Whether this segment's records continue the verified run from seq 0: nothing
            # before them (a segment, a header, a link) was found wrong.
            chained = not self.problems
            walk = FrameWalk(
                buf,
                file=file,
                pos=SEGMENT_HEADER.size,
                end=len(buf),
                prev=self.prev,
                active=last and not sealed,
                decompressed=sealed,
            )
            self._frames(walk, seg.start_seq, file, sealed, chained=chained)
            self.prev = walk.prev
            self.torn = walk.torn
            if last and sealed:
                self._rolled_over(seg, file)
        except HolonError as exc:
            self.problems.append(_problem(exc, file))
            self.expected = None
            self.prev = None
        self.advance(self.seg_sizes[index])

    def _listed_or_missed(self, index: int) -> SegmentFile:
        """The segment to check at ``index``: the one listed there, or one the listing missed."""
        seg = self.segs[index]
        if self.expected is not None and seg.start_seq > self.expected:
            # A gap in the listing may be a segment sealed during it (see find_segment): it
            # goes in here, and the segment after it is checked next.
            missed = find_segment(self.seg_dir, self.expected)
            if missed is not None:
                seg = missed
                self.segs.insert(index, seg)
                self.seg_sizes.insert(index, self.sized(seg))
                self.total += self.seg_sizes[index]
        return seg

    def _segment_header(self, seg: SegmentFile, buf: bytes, file: str, sealed: bool) -> None:
        """Check a segment's header against its name and the segment before it."""
        seg_header = parse_segment_header(buf, file=file, decompressed=sealed)
        if seg_header.start_seq != seg.start_seq:
            self.problems.append(
                Problem(
                    file,
                    0,
                    f"header says start seq {seg_header.start_seq}, name says {seg.start_seq}",
                    sealed,
                )
            )
        if self.expected is not None and seg.start_seq != self.expected:
            self.problems.append(Problem(file, 0, seq_gap(self.expected, seg.start_seq), sealed))
        elif self.prev is not None and seg_header.prev_hash != self.prev:
            self.problems.append(Problem(file, 24, "broken hash chain across segments", sealed))
        self.expected = seg.start_seq
        self.prev = seg_header.prev_hash

    def _frames(self, walk: FrameWalk, expected: int, file: str, sealed: bool, *, chained: bool) -> None:
        """Check each frame of a segment from seq ``expected`` on; raises at the first bad one."""
        # An incomplete final frame of the active segment is not a problem: a writer may be
        # mid-append, or died there. It is reported as the torn tail, which the next open
        # for writing cuts (and reports).
        for offset, payload in walk.frames():
            location = byte_location(file, offset, decompressed=sealed)
            record = decode_msgpack_record(payload, where=f"seq {expected} ({location})")
            if record.seq != expected:
                raise LedgerCorrupt(
                    f"frame holds seq {record.seq} where seq {expected} belongs",
                    file=file,
                    offset=offset,
                    decompressed=sealed,
                )
            body = record.body
            if isinstance(body, ToolResult | TaskResult) and body.blob is not None:
                self.claimed.setdefault((body.blob.hash, body.blob.size), expected)
            if not MIN_TS <= record.ts <= MAX_TS:
                self.bad_ts += 1
                if len(self.odd_ts) < TS_EXAMPLES:
                    self.odd_ts.append((expected, record.ts))
            if chained:
                self.verified = (expected, walk.prev)
            expected += 1
            self.expected = expected
            self.checked += 1

    def _rolled_over(self, seg: SegmentFile, file: str) -> None:
        """Listed as the active segment, read as sealed: the writer rolled over since the
        listing (or the active segment was deleted). Go on into what it wrote."""
        newer = [s for s in list_segments(self.seg_dir) if s.start_seq > seg.start_seq]
        if not newer:
            self.problems.append(
                Problem(file, None, "the active segment after this sealed segment is missing")
            )
        sizes = [self.sized(s) for s in newer]
        self.segs += newer
        self.seg_sizes += sizes
        self.total += sum(sizes)

    def stored_blobs(
        self, blobs: BlobStore, stored: list[tuple[str, Path]], sizes: list[int]
    ) -> tuple[dict[str, int], int]:
        """Check every file of the blob store: the size of each blob that checked out, by
        hash, and how many did."""
        blobs_checked = 0
        actual: dict[str, int] = {}  # hash -> size of each blob that checked out
        for (name, path), size in zip(stored, sizes, strict=True):
            problem = _check_stored_blob(blobs, name, path, actual)
            if problem is not None:
                self.problems.append(problem)
            elif name in actual:  # not when it was removed since the listing
                blobs_checked += 1
            self.advance(size)
        return actual, blobs_checked

    def references(self, blobs: BlobStore, actual: dict[str, int]) -> None:
        """Check that each blob a record names exists and holds the size the record states."""
        references = sorted(self.claimed.items(), key=lambda item: item[1])
        first: dict[str, int] = {}  # each blob by the first seq naming it, in seq order
        for (blob_hash, _stated), seq in references:
            first.setdefault(blob_hash, seq)
        for blob_hash, seq in first.items():
            try:
                present = blobs.contains(blob_hash)
            except InvalidRef:
                present = False
            if not present:
                self.problems.append(
                    Problem(
                        str(blobs.root / blob_hash[:2] / blob_hash),
                        None,
                        f"blob referenced by seq {seq} is missing",
                    )
                )
        for (blob_hash, stated), seq in references:
            held = actual.get(blob_hash)
            if held is not None and held != stated:
                # The blob is fine; the record misstates it (audit's output_bytes reads this).
                self.problems.append(
                    Problem(
                        str(blobs.path_of(blob_hash)),
                        None,
                        f"seq {seq} says this blob holds {stated:,} bytes, it holds {held:,}",
                    )
                )


def _check_stored_blob(blobs: BlobStore, name: str, path: Path, actual: dict[str, int]) -> Problem | None:
    """The problem with one file of the blob store (a stray name, bad zstd, wrong hash), if any.

    The size of a blob that checks out goes into ``actual``.
    """
    if path.is_symlink():
        return _problem(link_refused(path, "an entry of the blob store"), str(path))
    try:
        check_blob_hash(name)
    except InvalidRef:
        return Problem(str(path), None, "stray file in the blob store (its name is not a blob hash)")
    if path != blobs.path_of(name):
        # Not where the store looks for that hash: reading the name would check another file.
        return Problem(
            str(path),
            None,
            f"stray file in the blob store: a blob named {name} belongs in {blobs.path_of(name)}",
        )
    try:
        actual[name] = len(blobs.get(name))
    except RefNotFound:
        # Listed, then removed: by the writer of a live ledger, whose refused append takes
        # back the blob it had just stored. No record names it (one that did would be
        # reported missing by the reference check).
        return None
    except HolonError as exc:
        return _problem(exc, str(path))
    return None
