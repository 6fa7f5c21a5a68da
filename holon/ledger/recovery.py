"""What a writer does on open after a crash: cut a torn tail, finish an interrupted seal.

Every action is returned as a :class:`RecoveryAction` (``Ledger.recovery``) and logged
at WARNING on the ``holon.ledger`` logger; nothing is repaired silently. Damage that a
crash cannot explain (a bad frame before the tail, a broken link, a missing segment)
raises :class:`~holon.errors.LedgerCorrupt` instead.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, NamedTuple

import msgspec
import zstandard

from holon.errors import InvalidRecord, LedgerCorrupt, UsageError
from holon.ledger.blobs import BlobStore
from holon.ledger.files import (
    DEBRIS,
    TMP_SUFFIX,
    fsync_dir,
    open_ledger_file,
    read_ledger_file,
    real_dir,
    refuse_link,
    sync_file,
    write_atomic,
)
from holon.ledger.frames import FrameWalk, TornTail
from holon.ledger.header import LedgerHeader, upgrade_header
from holon.ledger.sealed import decompress_sealed
from holon.ledger.segments import (
    SEGMENT_HEADER,
    SegmentFile,
    encode_segment_header,
    list_segments,
    load_segment,
    parse_segment_header,
    seal_segment,
    segment_dir_names,
    seq_gap,
    short_segment,
)

__all__ = [
    "CUT_DIR",
    "RecoveredState",
    "RecoveryAction",
    "payload_seq",
    "raise_format",
    "recover",
    "walk_segment",
]

#: Directory in the ledger root that keeps the bytes a requested cut removed.
CUT_DIR: Final = "cut"
_ACTIVE: Final = "the active segment"

log = logging.getLogger("holon.ledger")


@dataclass(frozen=True)
class RecoveryAction:
    """One repair a writer made on open, with where it happened."""

    action: Literal[
        "truncated_torn_tail", "removed_temp_file", "sealed_segment", "finished_seal", "cut_damaged_tail"
    ]
    file: str
    offset: int
    bytes_cut: int
    detail: str
    #: ``cut_damaged_tail`` only: the file that keeps the bytes cut.
    kept: str | None = None


@dataclass(frozen=True)
class RecoveredState:
    """Where the writer resumes: the active segment, the next seq and the head hash."""

    active_path: Path
    active_start: int
    active_size: int
    next_seq: int
    head_hash: bytes
    actions: tuple[RecoveryAction, ...]
    #: The ledger header, raised to this holon's format version if it was older.
    header: LedgerHeader


class _SeqOnly(msgspec.Struct):
    seq: int


_SEQ_DECODER = msgspec.msgpack.Decoder(_SeqOnly)


def payload_seq(payload: memoryview, *, file: str, offset: int) -> int:
    """The seq in a frame payload, without decoding the body."""
    try:
        return _SEQ_DECODER.decode(payload).seq
    except msgspec.DecodeError as exc:
        raise InvalidRecord(
            f"frame payload is not a record envelope ({exc})", where=f"{file} at byte {offset}", field="seq"
        ) from None


def _note(actions: list[RecoveryAction], action: RecoveryAction) -> None:
    log.warning(
        "ledger recovery: %s %s at byte %d (%s)", action.action, action.file, action.offset, action.detail
    )
    actions.append(action)


def walk_segment(
    buf: bytes, seg: SegmentFile, file: str, *, active: bool, cut_damage: bool = False
) -> tuple[FrameWalk, int]:
    """Walk a segment checking checksums and seqs (not chain links); return walk and next seq.

    ``cut_damage`` (active segment only): frame damage the walk meets ends it like a
    torn tail of everything from the damaged frame (``walk.torn``, marked ``damaged``),
    instead of raising. Every frame before it is valid. A frame
    that passes its checksum but holds the wrong seq still raises: no crash or power
    loss writes one. A segment shorter than its header is then damaged from byte 0 (the
    whole file, which holds no record: the repair gives it a new header).
    """
    if cut_damage and active and len(buf) < SEGMENT_HEADER.size:
        walk = FrameWalk(buf, file=file, pos=0, end=len(buf), prev=None, active=active)
        walk.torn = TornTail(file, 0, len(buf), short_segment(len(buf), file=file), damaged=True)
        return walk, seg.start_seq
    header = parse_segment_header(buf, file=file)
    if header.start_seq != seg.start_seq:
        raise LedgerCorrupt(
            f"segment header says it starts at seq {header.start_seq}, its name says {seg.start_seq}",
            file=file,
            offset=0,
        )
    walk = FrameWalk(
        buf, file=file, pos=SEGMENT_HEADER.size, end=len(buf), prev=header.prev_hash, active=active
    )
    expected = seg.start_seq
    try:
        for offset, payload in walk.frames():
            seq = payload_seq(payload, file=file, offset=offset)
            if seq != expected:
                raise LedgerCorrupt(
                    f"frame holds seq {seq} where seq {expected} belongs", file=file, offset=offset
                )
            expected += 1
    except LedgerCorrupt as exc:
        # The walk raises at its frontier (walk.pos); the seq check raises after it.
        if not (cut_damage and active) or exc.offset != walk.pos:
            raise
        walk.torn = TornTail(file, walk.pos, len(buf) - walk.pos, exc.detail, damaged=True)
    return walk, expected


def raise_format(ledger_dir: Path, header: LedgerHeader) -> LedgerHeader:
    """Raise an older header to this holon's format version before a seal, logging it; return it."""
    raised = upgrade_header(ledger_dir, header)
    if raised.format_version != header.format_version:
        log.info(
            "ledger %s: format version %d -> %d (sealed segments get a seek table); older holons "
            "refuse it from now on",
            ledger_dir,
            header.format_version,
            raised.format_version,
        )
    return raised


def recover(
    seg_dir: Path, blobs: BlobStore, header: LedgerHeader, *, cut_at: int | None = None
) -> RecoveredState:
    """Bring the segment directory to a clean state for appending; report what was done.

    Everything is checked before anything is repaired: damage a crash cannot explain
    raises LedgerCorrupt with the directory exactly as it was found.

    ``cut_at``: also cut the active segment at this byte offset, which must be where its
    first damaged frame starts (``holon repair`` shows it). That is the one repair for
    what a power loss can leave under fsync ``batch``/``never`` (docs/ledger-format.md);
    the bytes cut are kept in ``<ledger>/cut/`` before the segment is truncated.
    """
    names = sorted(segment_dir_names(seg_dir))
    debris = [seg_dir / name for name in names if name.endswith(TMP_SUFFIX)]
    for path in debris:
        # Removing a link would not touch what it points to, but holon never makes one: a
        # link here was planted or copied in, and is reported rather than cleaned up.
        refuse_link(path, "a temporary file in the segment directory", DEBRIS)
    blob_debris = blobs.debris()
    segs, active_path = _listed_segments(seg_dir)
    last = segs[-1]
    # Plain segments before the active one: a crash came before (or during) their sealing.
    # Each is checked now and sealed below; only its end is kept, not its bytes.
    unsealed = [seg for seg in segs[:-1] if seg.plain is not None]
    active = _check_active(
        segs, active_path, header, predecessor=_check_unsealed(segs), seg_dir=seg_dir, cut_at=cut_at
    )

    # Checked: from here on, only the repairs a crash calls for, and the format upgrade
    # before a segment is sealed below in this holon's layout, so an older holon never meets
    # one under a header it reads. Only then: an open that seals nothing leaves the header to
    # the writer's first seal (Ledger._rollover), so a writer that appends nothing (a refused
    # `holon append`, an Agent.open refusing its agent id) leaves an older holon its ledger.
    if unsealed:
        header = raise_format(seg_dir.parent, header)
    actions: list[RecoveryAction] = []
    _remove_debris(debris, blobs, blob_debris, actions)
    fsync_dir(seg_dir)
    _seal_unsealed(unsealed, seg_dir, actions)
    if last.sealed is not None:
        # A seal of the active segment never happens; a stray copy is removed, the plain file rules.
        last.sealed.unlink()
        fsync_dir(seg_dir)
        _note(
            actions,
            RecoveryAction(
                "removed_temp_file", str(last.sealed), 0, 0, "stray sealed copy of the active segment"
            ),
        )
    walk = active.walk
    if walk.torn is not None:
        _cut_tail(walk.torn, active, active_path, last.start_seq, actions)
    head = walk.prev if walk.prev is not None else active.header_prev
    return RecoveredState(
        active_path=active_path,
        active_start=last.start_seq,
        active_size=SEGMENT_HEADER.size if active.short else walk.pos,
        next_seq=active.next_seq,
        head_hash=head,
        actions=tuple(actions),
        header=header,
    )


def _listed_segments(seg_dir: Path) -> tuple[list[SegmentFile], Path]:
    """The segments, and the active one's path; raises unless seqs start at 0 and the newest
    segment is a plain one."""
    segs = list_segments(seg_dir)
    if not segs:
        raise LedgerCorrupt(
            "the ledger has no segment files (a new ledger has one); restore them from a backup",
            file=str(seg_dir),
        )
    if segs[0].start_seq != 0:
        raise LedgerCorrupt(
            f"the first segment starts at seq {segs[0].start_seq}, so seqs 0..{segs[0].start_seq - 1} "
            "are missing: a segment was deleted; restore it from a backup",
            file=segs[0].name,
            offset=0,
        )
    last = segs[-1]
    if last.plain is None:
        raise LedgerCorrupt(
            "the active segment is missing: the newest segment is sealed, but a writer always keeps a "
            "plain segment after it; restore the deleted segment from a backup",
            file=last.name,
        )
    return segs, last.plain


def _check_unsealed(segs: list[SegmentFile]) -> tuple[int, bytes] | None:
    """Check each plain segment before the active one (a crash came before its seal); the
    (end seq, last chain hash) of the one right before the active one, when it had to be read."""
    predecessor: tuple[int, bytes] | None = None
    for index, seg in enumerate(segs[:-1]):
        if seg.plain is None:
            continue
        data = read_ledger_file(seg.plain, what="a segment file")
        walk, end_seq = walk_segment(data, seg, str(seg.plain), active=False)
        assert walk.prev is not None
        if index == len(segs) - 2:
            predecessor = (end_seq, walk.prev)
        else:
            _check_complete(seg, end_seq, walk.prev, len(data), segs[index + 1])
    return predecessor


class _Active(NamedTuple):
    """The active segment as checked: its walk, the next seq, and what its repair needs."""

    walk: FrameWalk
    next_seq: int
    #: Shorter than its header (the repair asked for writes a new one).
    short: bool
    #: The chain hash its header commits to (the one a rewritten header commits to).
    header_prev: bytes
    #: With ``cut_at``: the bytes cut, and the file in ``<ledger>/cut/`` that keeps them.
    cut_bytes: bytes | None
    cut_file: Path | None


def _check_active(
    segs: list[SegmentFile],
    active_path: Path,
    header: LedgerHeader,
    *,
    predecessor: tuple[int, bytes] | None,
    seg_dir: Path,
    cut_at: int | None,
) -> _Active:
    """Walk the active segment and check that it continues the segment before it (or, the
    only one, this agent's genesis hash); a cut asked for must start at its damage."""
    last = segs[-1]
    buf = read_ledger_file(active_path, what=_ACTIVE)
    walk, next_seq = walk_segment(buf, last, str(active_path), active=True, cut_damage=cut_at is not None)
    # Shorter than its header: the repair asked for (walk_segment raised otherwise) writes a
    # new one, committing to the record before the segment, which must be read for it.
    short = len(buf) < SEGMENT_HEADER.size
    if short and predecessor is None and len(segs) > 1:
        predecessor = _end_of(segs[-2])
    if short:
        header_prev = header.genesis if predecessor is None else predecessor[1]
    else:
        header_prev = parse_segment_header(buf, file=str(active_path)).prev_hash
    cut_bytes: bytes | None = None
    cut_file: Path | None = None
    if cut_at is not None:
        _check_cut(walk, cut_at, str(active_path))
        cut_bytes = buf[cut_at:]
        cut_file = _cut_file(seg_dir.parent, active_path.name, cut_at)
    del buf
    if predecessor is not None:
        _check_predecessor(predecessor, last, header_prev)
    elif len(segs) == 1 and (last.start_seq != 0 or header_prev != header.genesis):
        raise LedgerCorrupt(
            f"the only segment starts at seq {last.start_seq} and does not commit to this agent's genesis "
            "hash; earlier segments are missing or the segment belongs to another ledger",
            file=str(active_path),
            offset=0,
        )
    return _Active(walk, next_seq, short, header_prev, cut_bytes, cut_file)


def _remove_debris(
    debris: list[Path], blobs: BlobStore, blob_debris: list[Path], actions: list[RecoveryAction]
) -> None:
    """Remove the temporary files interrupted writes left, in the segments and the blob store."""
    for path in debris:
        size = path.stat().st_size
        path.unlink()
        _note(
            actions,
            RecoveryAction("removed_temp_file", str(path), 0, size, "debris of an interrupted write"),
        )
    for path in blobs.remove_debris(blob_debris):
        _note(
            actions, RecoveryAction("removed_temp_file", str(path), 0, 0, "debris of an interrupted blob put")
        )


def _seal_unsealed(unsealed: list[SegmentFile], seg_dir: Path, actions: list[RecoveryAction]) -> None:
    """Seal the checked plain segments a crash left before the active one."""
    for seg in unsealed:
        try:
            _finish_seal(seg, seg_dir, actions)
        except OSError as exc:
            # A full disk: the plain segment is complete and checked, and readers read it as
            # it is; sealing only saves space, the thing that is short. Refusing the open
            # kept the writer from appending what still fits; the next open seals it (as
            # after a seal the writer's own sealing thread could not finish).
            log.warning(
                "ledger recovery: sealing %s failed (%s); it stays plain until the next open",
                seg.plain,
                exc.strerror or exc,
            )


def _cut_tail(
    torn: TornTail, active: _Active, active_path: Path, start_seq: int, actions: list[RecoveryAction]
) -> None:
    """Cut the active segment's torn tail (or, asked for, its damaged frames), keeping the
    bytes of a requested cut; a segment shorter than its header gets a new header."""
    action: Literal["truncated_torn_tail", "cut_damaged_tail"] = "truncated_torn_tail"
    detail = torn.reason
    kept: str | None = None
    if active.cut_bytes is not None and active.cut_file is not None:
        kept = str(_keep_cut(active.cut_file, active.cut_bytes))
        action = "cut_damaged_tail"
        detail = f"damaged frame cut on request: {torn.reason}; the bytes cut are kept in {kept}"
    if active.short:
        # No frame to keep: the whole file is replaced by a new segment's header.
        what = torn.reason.split(";", 1)[0]
        detail = f"segment header rewritten on request: {what}; the bytes cut are kept in {kept}"
        write_atomic(active_path, encode_segment_header(start_seq, active.header_prev), what=_ACTIVE)
    else:
        fd = open_ledger_file(active_path, os.O_WRONLY, what=_ACTIVE)
        try:
            os.ftruncate(fd, torn.offset)
            sync_file(fd)
        finally:
            os.close(fd)
    _note(
        actions,
        RecoveryAction(action, str(active_path), torn.offset, torn.length, detail, kept),
    )


def _end_of(seg: SegmentFile) -> tuple[int, bytes]:
    """(end seq, last chain hash) of a complete segment, sealed or not: read only for a repair."""
    data, file, sealed = load_segment(seg)
    walk, end_seq = walk_segment(data, seg, file, active=False)
    if walk.prev is None:  # pragma: no cover - a walk that checks links always knows the hash
        raise LedgerCorrupt("segment holds no chain hash", file=file, offset=0, decompressed=sealed)
    return end_seq, walk.prev


def _check_cut(walk: FrameWalk, cut_at: int, file: str) -> None:
    """Refuse a requested cut that is not exactly at the active segment's first damaged frame."""
    torn = walk.torn
    if torn is not None and torn.damaged:
        if torn.offset == cut_at:
            return
        raise UsageError(
            f"the first damaged frame of {file} is at byte {torn.offset}, not {cut_at}; nothing was "
            "changed. Run `holon repair` without --cut-at to see what a cut there would lose"
        )
    raise UsageError(
        f"nothing to cut at byte {cut_at} of {file}: its frames are valid up to byte {walk.pos}"
        + (" (the torn tail after them is cut by any open for writing)" if torn is not None else "")
        + "; nothing was changed"
    )


def _cut_file(root: Path, segment: str, offset: int) -> Path:
    """The file that will keep the bytes a requested cut removes (checked, not made yet).

    Named by segment and offset; a second cut at the same place (the same damage found
    again after a restore) gets a numbered name rather than replacing the first. The cut
    directory and the file's temporary name must not be links (checked here, before
    anything is changed).
    """
    folder = root / CUT_DIR
    real_dir(folder, "the cut directory")
    path = folder / f"{segment}.{offset}.cut"
    n = 1
    while os.path.lexists(path):  # a dangling link is a name taken, too
        n += 1
        path = folder / f"{segment}.{offset}.{n}.cut"
    refuse_link(path.with_name(path.name + TMP_SUFFIX), "the temporary file of a cut", DEBRIS)
    return path


def _keep_cut(path: Path, data: bytes) -> Path:
    """Store the bytes a requested cut removes at ``path`` (:func:`_cut_file`), durably,
    before anything is truncated."""
    folder = path.parent
    if not real_dir(folder, "the cut directory"):
        folder.mkdir()
        fsync_dir(folder.parent)
    write_atomic(path, data, what="a file of the cut directory")
    return path


def _finish_seal(seg: SegmentFile, seg_dir: Path, actions: list[RecoveryAction]) -> None:
    """Seal a checked plain segment, or finish a seal that got as far as a matching ``.zst``."""
    plain = seg.plain
    assert plain is not None
    data = read_ledger_file(plain, what="a segment file")
    if seg.sealed is not None:
        sealed_ok = False
        try:
            sealed_ok = (
                decompress_sealed(
                    read_ledger_file(seg.sealed, what="a segment file"),
                    file=str(seg.sealed),
                    start_seq=seg.start_seq,
                )
                == data
            )
        except LedgerCorrupt:
            sealed_ok = False
        if sealed_ok:
            plain.unlink()
            fsync_dir(seg_dir)
            _note(
                actions,
                RecoveryAction("finished_seal", str(plain), 0, 0, "sealed copy verified; plain removed"),
            )
            return
        seg.sealed.unlink()
    seal_segment(plain, data)
    _note(
        actions,
        RecoveryAction("sealed_segment", str(plain), 0, 0, "rollover was interrupted before sealing"),
    )


def _check_complete(
    seg: SegmentFile, end_seq: int, last_hash: bytes, size: int, following: SegmentFile
) -> None:
    """A plain segment before the last two must end where ``following`` starts, hash-linked.

    Sealing it replaces its sealed copy, if any: a plain copy made by hand (``zstd -dc`` of
    a segment whose seek table is damaged, which stops at a damaged frame between two
    records) that lacks records would otherwise be sealed in place of the file holding them.
    """
    assert seg.plain is not None
    if end_seq != following.start_seq:
        raise LedgerCorrupt(
            f"plain segment holds records up to seq {end_seq - 1} but the next segment starts at seq "
            f"{following.start_seq}, so sealing it would lose or repeat records (a partial copy, such as "
            "a `zstd -dc` that stopped at a damaged frame?); nothing was changed: restore the complete "
            "segment, or remove this plain file"
            + (" to read its sealed copy again" if seg.sealed is not None else ""),
            file=str(seg.plain),
            offset=size,
        )
    file, header = _segment_start(following)
    if parse_segment_header(header, file=file, decompressed=following.plain is None).prev_hash != last_hash:
        raise LedgerCorrupt(
            f"broken hash chain across segments: the segment does not commit to the last record of "
            f"{seg.plain.name} (a plain copy from another ledger?); nothing was changed",
            file=file,
            offset=24,
            decompressed=following.plain is None,
        )


def _segment_start(seg: SegmentFile) -> tuple[str, bytes]:
    """A segment's file and its first bytes (its header), plain or sealed (either layout:
    a sealed segment's first zstd frame begins with them)."""
    if seg.plain is not None:
        with seg.plain.open("rb") as fh:
            return str(seg.plain), fh.read(SEGMENT_HEADER.size)
    assert seg.sealed is not None
    try:
        with seg.sealed.open("rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
            head = b""
            while len(head) < SEGMENT_HEADER.size and (more := reader.read(SEGMENT_HEADER.size - len(head))):
                head += more
            return str(seg.sealed), head
    except zstandard.ZstdError as exc:
        raise LedgerCorrupt(f"bad zstd data ({exc})", file=str(seg.sealed), offset=0) from None


def _check_predecessor(predecessor: tuple[int, bytes], active: SegmentFile, active_prev: bytes) -> None:
    """The plain segment before the active one must end where the active one starts, hash-linked.

    Only a predecessor that recovery read anyway (still plain: the writer died before
    sealing it) is checked here; a sealed one is not decompressed on open. Its link is
    checked by every read that crosses it and by ``verify()``.
    """
    end_seq, last_hash = predecessor
    if end_seq != active.start_seq:
        raise LedgerCorrupt(
            seq_gap(end_seq, active.start_seq),
            file=active.name,
            offset=0,
        )
    if last_hash != active_prev:
        raise LedgerCorrupt(
            "broken hash chain across segments: the active segment does not commit to the last record "
            "of the segment before it",
            file=active.name,
            offset=24,
        )
