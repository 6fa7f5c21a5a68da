"""Cutting a damaged tail off the active segment: the repair for a power loss under batch fsync.

Opening for writing cuts a *torn* tail on its own (a crash leaves a prefix of what was
written). A power loss under fsync ``batch`` or ``never`` can also leave the unsynced
tail written back out of order: a damaged frame with intact ones after it. Opening
refuses that, because only the application knows whether those frames were acknowledged
(a ``flush()`` that returned) — see docs/ledger-format.md, *Recovery*. These functions
let an operator look, then decide:

* :func:`inspect_tail` (read-only) says where the first damaged frame of the active
  segment starts and which seqs a cut there loses, including intact frames found after
  the damage;
* :func:`cut_tail` cuts exactly there, after checking the rest of the ledger as any open
  for writing does, and keeps the bytes it cut in ``<ledger>/cut/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from holon.errors import HolonError, LedgerCorrupt, LedgerLocked
from holon.ledger.frames import FRAME_HEAD, FRAME_OVERHEAD, MAX_PAYLOAD, FrameWalk
from holon.ledger.header import read_header
from holon.ledger.lock import holder_pid
from holon.ledger.recovery import RecoveryAction, payload_seq, walk_segment
from holon.ledger.segments import SEGMENT_HEADER, SegmentFile, list_segments
from holon.ledger.store import Ledger

__all__ = ["DamagedTail", "cut_tail", "inspect_tail"]

# A frame head is u32 n, u32 n ^ 0xFFFFFFFF with n <= MAX_PAYLOAD (2^28): the fourth byte
# of n is below 0x10 and the fourth byte of the guard at least 0xF0. Only positions that
# pass this cheap filter are unpacked while looking for frames after a damaged one.
_HEAD_CANDIDATE: Final = re.compile(rb"(?=[\x00-\xff]{3}[\x00-\x0f][\x00-\xff]{3}[\xf0-\xff])", re.DOTALL)
assert MAX_PAYLOAD <= 1 << 28
#: How many listings :func:`inspect_tail` tries before it gives up on a writer rolling over
#: faster than it reads: each retry follows a seal that completed between a listing and
#: the read (some milliseconds of the writer's work against microseconds of the reader's).
_LISTINGS: Final = 100


@dataclass(frozen=True)
class DamagedTail:
    """The damaged tail of the active segment, as :func:`inspect_tail` found it.

    ``offset`` is where the first damaged frame starts (every frame before it is valid),
    ``length`` the bytes from there to the end of the file, ``damage`` what is wrong with
    that frame. ``first_seq`` is the seq it should hold; ``later_seqs`` the seqs of intact
    frames found after it (their checksums match; their chain cannot be checked across the
    damage). A cut at ``offset`` loses ``first_seq`` and every later seq.

    ``header``: the segment is shorter than its header (a copy or a full disk cut it;
    holon never writes one), so ``offset`` is 0 and the file holds no record: the cut
    loses none, and gives the segment a new header. Whatever records it held are gone
    already.
    """

    file: str
    offset: int
    length: int
    damage: str
    first_seq: int
    later_seqs: tuple[int, ...]
    header: bool = False

    @property
    def last_seq(self) -> int:
        """The highest seq the cut loses, as far as the intact frames after it tell."""
        return self.later_seqs[-1] if self.later_seqs else self.first_seq


def inspect_tail(path: str | Path) -> DamagedTail | None:
    """Find the damaged tail of the active segment, changing nothing.

    ``None`` when the active segment's frames are valid up to its end or a torn tail
    (which any open for writing cuts by itself). An active segment shorter than its
    header is a damaged tail at byte 0 (``header``). Damage that no cut of the active tail
    repairs (a bad segment header, a frame with the wrong seq, a missing segment) raises
    :class:`LedgerCorrupt` as opening would. A writer may be appending meanwhile: a
    rollover between listing the segments and reading the active one is read past (see
    :func:`_read_active`).
    """
    root = Path(path)
    read_header(root)
    seg, buf = _read_active(root)
    assert seg.plain is not None
    file = str(seg.plain)
    walk, next_seq = walk_segment(buf, seg, file, active=True, cut_damage=True)
    torn = walk.torn
    if torn is None or not torn.damaged:
        return None
    return DamagedTail(
        file=file,
        offset=torn.offset,
        length=torn.length,
        damage=torn.reason,
        first_seq=next_seq,
        later_seqs=_later_seqs(buf, torn.offset, file),
        header=len(buf) < SEGMENT_HEADER.size,
    )


def _read_active(root: Path) -> tuple[SegmentFile, bytes]:
    """The active segment (the newest, plain) and its bytes, read without the writer lock.

    A writer may roll over between the listing and the read: the segment listed newest is
    then sealed and its plain file unlinked, and the directory is listed again (the new
    newest is the active one). A listing whose newest segment is not plain, twice in a
    row, is damage (a listing can miss a file renamed in during it: once is not enough to
    tell). A writer that seals faster than this reads, :data:`_LISTINGS` times, is
    LedgerLocked: repair is for a ledger no writer is appending to.
    """
    seg_dir = root / "segments"
    previous: list[SegmentFile] | None = None
    for _ in range(_LISTINGS):
        segs = list_segments(seg_dir)
        newest = segs[-1] if segs else None
        if newest is not None and newest.plain is not None:
            try:
                return newest, newest.plain.read_bytes()
            except FileNotFoundError:
                continue  # sealed by a writer rolling over since the listing: list again
        if segs == previous:
            # Opening names exactly what is missing; a cut cannot help.
            raise LedgerCorrupt(
                "the ledger has no active (plain) segment, so there is no tail to cut; run `holon verify`",
                file=str(seg_dir),
            )
        previous = segs
    raise LedgerLocked(
        str(root),
        holder_pid(root),
        advice=f"it rolled over to a new segment {_LISTINGS} times while holon tried to read the active "
        "one: stop the writer, then run holon repair again",
    )


def cut_tail(path: str | Path, offset: int) -> RecoveryAction:
    """Cut the active segment at ``offset``, the start of its first damaged frame.

    Opens the ledger for writing (so the writer lock is held and every check of an
    ordinary open runs first; any other damage raises with nothing changed), keeps the
    bytes from ``offset`` to the end in ``<ledger>/cut/<segment>.<offset>.cut``, truncates
    (a segment shorter than its header is given a new one),
    and returns the ``cut_damaged_tail`` action (also in the ledger's recovery actions and
    logged at WARNING). An offset that is not where :func:`inspect_tail` says the damage
    starts is a UsageError, and nothing is changed.
    """
    root = Path(path)
    with Ledger(root, read_header(root), readonly=False, fsync="always", cut_at=offset) as ledger:
        return next(a for a in ledger.recovery if a.action == "cut_damaged_tail")


def _later_seqs(buf: bytes, damaged: int, file: str) -> tuple[int, ...]:
    """Seqs of the valid frames found after the damaged frame at ``damaged``.

    From the first position after it that holds a frame with a matching checksum, the
    frames are walked in order (checksums only: the link to the damaged frame cannot be
    checked) until the next damage or the end.
    """
    for match in _HEAD_CANDIDATE.finditer(buf, damaged + 1):
        pos = match.start()
        n, guard, _ = FRAME_HEAD.unpack_from(buf, pos)
        if guard != n ^ 0xFFFFFFFF or n == 0 or pos + FRAME_OVERHEAD + n > len(buf):
            continue
        walk = FrameWalk(buf, file=file, pos=pos, end=len(buf), prev=None, active=True, verify_chain=False)
        seqs: list[int] = []
        try:
            for frame_offset, payload in walk.frames():
                seqs.append(payload_seq(payload, file=file, offset=frame_offset))
        except HolonError:
            pass
        if seqs:
            return tuple(seqs)
    return ()
