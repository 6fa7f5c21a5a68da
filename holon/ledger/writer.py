"""The single writer of a ledger: appends, group commit, segment rollover and sealing.

:class:`Writer` holds the writer lock from the moment it has recovered the ledger (torn
tail cut, interrupted seal finished) until it is closed. Appended records are framed
(length, checksum, chain hash) into a pending buffer and handed to the OS per the fsync
policy: before each append returns (``always``), at ``flush()`` (``batch``) or whenever
the buffer passes a size (``batch`` and ``never``). A full active segment is synced, the
next one started, and the old one sealed by a thread beside the appends.

A write that fails leaves its state on disk unknown, so the writer refuses every later
append (``failed`` on the :class:`~holon.ledger.tip.Tip`, which the reader also heeds).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final, Literal

import blake3
import msgspec
import xxhash

from holon.errors import InvalidRecord, UsageError
from holon.ledger.blobs import BLOB_PREVIEW_CHARS, BlobStore
from holon.ledger.files import open_ledger_file, read_ledger_file, sync_file
from holon.ledger.frames import (
    FRAME_HEAD,
    FRAME_OVERHEAD,
    HASH_SIZE,
    LENGTH_MASK,
    MAX_PAYLOAD,
    oversized_payload,
)
from holon.ledger.header import LedgerHeader
from holon.ledger.lock import WriterLock
from holon.ledger.recovery import RecoveryAction, raise_format, recover
from holon.ledger.segments import (
    ACTIVE_SEGMENT,
    FORMAT_VERSION,
    SEGMENT_HEADER,
    create_segment,
    seal_segment,
    segment_name,
)
from holon.ledger.tip import Tip
from holon.records import (
    BODY_TYPES,
    MAX_TS,
    MIN_TS,
    Record,
    TaskResult,
    ToolResult,
    check_payload,
    encode_msgpack_record_into,
    ts_out_of_range,
)

__all__ = ["FsyncPolicy", "Writer", "ledger_closed"]

log = logging.getLogger("holon.ledger")

FsyncPolicy = Literal["always", "batch", "never"]
"""When appends reach stable storage: before each append returns, at ``flush()``, or never."""

# Under ``batch``/``never``, buffered frames are handed to the OS once they pass this size,
# so memory stays bounded between flushes (they are fsynced at the next flush).
_WRITE_THRESHOLD: Final = 1 << 20
_PENDING_START: Final = 1 << 16
# Records that do not encode raise one of these from the codec.
_ENCODE_ERRORS: Final = (msgspec.EncodeError, TypeError, OverflowError, ValueError)

_pack_into = FRAME_HEAD.pack_into
_HEAD_SIZE: Final = FRAME_HEAD.size
_xxh3 = xxhash.xxh3_64_intdigest
_replace = msgspec.structs.replace
_encode_into = encode_msgpack_record_into
_BLOB_KINDS: Final = frozenset({ToolResult, TaskResult})
_BODY_CLASSES: Final = frozenset(BODY_TYPES.values())
# The ts range every append checks (module globals, so a test can write the out-of-range
# ts of a ledger from before the check).
_MIN_TS = MIN_TS
_MAX_TS = MAX_TS


def ledger_closed(path: Path) -> UsageError:
    """The error for a write to a closed ledger."""
    return UsageError(f"ledger {path} is closed")


def _not_a_record(value: object, seq: int) -> InvalidRecord:
    # Passing a body (ledger.append(Message(...))) is the likely mistake; it raised
    # AttributeError from deep inside append.
    hint = (
        f"wrap the body: Record(body={type(value).__name__}(...), ts=...)"
        if type(value) in _BODY_CLASSES
        else "build one with Record(body=..., ts=...)"
    )
    return InvalidRecord(f"a {type(value).__name__} is not a Record; {hint}", where=f"seq {seq}")


class Writer:
    """The writer of the ledger at ``path``: built by ``Ledger`` when opened for writing.

    Construction takes the writer lock (or holds ``lock``, the one ``Ledger.create`` took)
    and recovers the ledger, cutting its active segment at ``cut_at`` if given
    (:func:`holon.ledger.repair.cut_tail`). ``header`` is the ledger's header as this
    writer last wrote it (recovery and a first seal in format version 2 raise it).
    """

    def __init__(
        self,
        path: Path,
        header: LedgerHeader,
        blobs: BlobStore,
        tip: Tip,
        *,
        fsync: FsyncPolicy,
        cut_at: int | None,
        lock: WriterLock | None,
    ) -> None:
        self.path = path
        self.header = header
        self.blobs = blobs
        self.recovery: tuple[RecoveryAction, ...] = ()
        self._tip = tip
        self._fsync: FsyncPolicy = fsync
        self._sync_each = fsync == "always"
        self._seg_dir = path / "segments"
        self._lock: WriterLock | None = None
        self._sealer: threading.Thread | None = None
        self._closed = False
        # Framed records not yet handed to the OS: the first _pend_len bytes of _pend, a
        # buffer kept at its size (appending by slice assignment never reallocates it).
        self._pend = bytearray(_PENDING_START)
        self._pend_len = 0
        # The record being framed: the chain hash it commits to (32 bytes) then its payload,
        # i.e. exactly the bytes its checksum and its own chain hash cover. Between appends
        # it starts with the head hash; the payload is encoded in place after it.
        self._scratch = bytearray(header.genesis)
        self._hasher = blake3.blake3()
        self._segment_bytes = header.segment_bytes
        self._active_size = 0
        self._head_hash = header.genesis
        self._writable = False
        self._start(cut_at, lock)
        self._writable = True

    def _start(self, cut_at: int | None, lock: WriterLock | None) -> None:
        self._lock = lock if lock is not None else WriterLock(self.path)
        try:
            state = recover(self._seg_dir, self.blobs, self.header, cut_at=cut_at)
            tip = self._tip
            self.recovery = state.actions
            self.header = state.header
            tip.active_path = state.active_path
            tip.active_start = state.active_start
            self._active_size = state.active_size
            tip.next_seq = state.next_seq
            self._head_hash = state.head_hash
            self._scratch[:] = state.head_hash
            # Not through a link (recovery refused one already, by name, and this says so too
            # if one was planted since): appends would go to whatever it points to.
            tip.fd = open_ledger_file(state.active_path, os.O_WRONLY, what=ACTIVE_SEGMENT)
        except BaseException:
            self._lock.release()
            raise

    def head(self) -> tuple[int, str]:
        """``(seq, hash hex)`` of the newest record this writer appended (or found on opening)."""
        return self._tip.next_seq - 1, self._head_hash.hex()

    # ------------------------------------------------------------------ appending

    def append(self, record: Record) -> int:
        """``Ledger.append``: append one record and return its seq."""
        if not self._writable:
            self.check_writable()
        tip = self._tip
        seq = tip.next_seq
        if type(record) is not Record:
            raise _not_a_record(record, seq)
        created: list[str] | None = None  # the blobs this append stored, if it may store any
        if type(record.body) in _BLOB_KINDS or record.seq not in (seq, -1):
            created = []
            record = self._prepare(record, seq, created)
        scratch = self._scratch
        try:
            n = _encode_into(record, scratch, seq, offset=HASH_SIZE)
        except _ENCODE_ERRORS as exc:
            if created:
                self._discard(created)
            raise InvalidRecord(f"record does not encode ({exc})", where=f"seq {seq}") from None
        if n > MAX_PAYLOAD:
            # Refused before anything is staged: no reader would accept the frame. The
            # oversized payload is dropped so the scratch buffer does not keep it alive.
            del scratch[HASH_SIZE:]
            if created:
                self._discard(created)
            raise oversized_payload(n, where=f"seq {seq}")
        try:
            # A record no reader would accept (Message(text=123)) is refused here, before
            # it is staged: once appended, every read would fail at its seq.
            check_payload(scratch[HASH_SIZE:], seq=seq)
            # After the payload check, which makes ts an int: a ts outside the range is
            # refused (audit subtracts them, and no clock reads them).
            if not _MIN_TS <= record.ts <= _MAX_TS:
                raise ts_out_of_range(record.ts, where=f"seq {seq}")
        except InvalidRecord:
            if created:
                self._discard(created)
            raise
        try:
            # _stage, inlined: this is the whole per-record cost of the common append.
            start = self._pend_len
            end = start + _HEAD_SIZE + HASH_SIZE + n
            pend = self._pend
            if end > len(pend):
                pend = self._grow_pending(end)
            _pack_into(pend, start, n, n ^ LENGTH_MASK, _xxh3(scratch, n))
            pend[start + _HEAD_SIZE : end] = scratch
            self._pend_len = end
            hasher = self._hasher
            hasher.update(scratch)
            head = self._head_hash = hasher.digest()
            hasher.reset()
            scratch[:HASH_SIZE] = head
            tip.next_seq = seq + 1
            if self._active_size + end >= self._segment_bytes:
                self._rollover()
            if self._sync_each:
                self._sync()
            elif end >= _WRITE_THRESHOLD:
                self._write_pending()
        except BaseException as exc:
            self._fail(exc)
            raise
        return seq

    def append_many(self, records: Iterable[Record]) -> list[int]:
        """``Ledger.append_many``: append records in order, all of them or (if one is invalid) none."""
        self.check_writable()
        first = self._tip.next_seq
        # Every record is checked and encoded before the first frame is staged: each payload
        # is encoded after a gap for its frame head and chain hash, filled by _stage_frames.
        frames = bytearray()
        starts: list[int] = []
        created: list[str] = []  # blobs this call stored: removed again if it is refused
        try:
            for seq, given in enumerate(records, first):
                if type(given) is not Record:
                    raise _not_a_record(given, seq)
                record = given
                if type(record.body) in _BLOB_KINDS or record.seq not in (seq, -1):
                    record = self._prepare(record, seq, created)
                start = len(frames)
                starts.append(start)
                try:
                    # Encoding past the end leaves a gap of unspecified bytes: _stage_frames
                    # overwrites all of them.
                    n = _encode_into(record, frames, seq, offset=start + FRAME_OVERHEAD)
                except _ENCODE_ERRORS as exc:
                    raise InvalidRecord(f"record does not encode ({exc})", where=f"seq {seq}") from None
                if n > MAX_PAYLOAD:
                    # Checked with the encoding, before the first frame is staged: the whole
                    # batch is refused and the ledger is unchanged.
                    raise oversized_payload(n, where=f"seq {seq}")
                payload_start = start + FRAME_OVERHEAD
                check_payload(frames[payload_start : payload_start + n], seq=seq)
                if not _MIN_TS <= record.ts <= _MAX_TS:
                    raise ts_out_of_range(record.ts, where=f"seq {seq} (record {seq - first} of the batch)")
        except BaseException:
            self._discard(created)
            raise
        count = len(starts)
        starts.append(len(frames))
        try:
            self._stage_frames(frames, starts)
            if self._sync_each:
                self._sync()
            elif self._pend_len >= _WRITE_THRESHOLD:
                self._write_pending()
        except BaseException as exc:
            self._fail(exc)
            raise
        return list(range(first, first + count))

    def _stage_frames(self, frames: bytearray, starts: list[int]) -> None:
        """Complete the frames laid out in ``frames`` (head and chain hash gaps) and stage them.

        Frame ``i`` spans ``starts[i]:starts[i + 1]``. Each gets the current head hash and
        its checksum in place; completed frames go to the pending buffer in one copy, or
        in one copy per segment when the batch crosses a rollover.
        """
        tip = self._tip
        hasher = self._hasher
        update, digest, reset = hasher.update, hasher.digest, hasher.reset
        head = self._head_hash
        seq = tip.next_seq
        segment_bytes = self._segment_bytes
        chunk = starts[0]
        with memoryview(frames) as view:
            for index in range(len(starts) - 1):
                start, stop = starts[index], starts[index + 1]
                n = stop - start - FRAME_OVERHEAD
                view[start + _HEAD_SIZE : start + FRAME_OVERHEAD] = head
                body = view[start + _HEAD_SIZE : stop]
                _pack_into(frames, start, n, n ^ LENGTH_MASK, _xxh3(body, n))
                update(body)
                head = digest()
                reset()
                seq += 1
                if self._active_size + self._pend_len + stop - chunk >= segment_bytes:
                    self._pend_frames(view[chunk:stop])
                    chunk = stop
                    self._head_hash, tip.next_seq = head, seq
                    self._rollover()
                    segment_bytes = self._segment_bytes  # later if the rollover was put off
            if chunk < starts[-1]:
                self._pend_frames(view[chunk : starts[-1]])
        self._head_hash, tip.next_seq = head, seq
        self._scratch[:HASH_SIZE] = head

    def _pend_frames(self, data: memoryview) -> None:
        """Copy complete frames to the end of the pending buffer."""
        start = self._pend_len
        end = start + len(data)
        pend = self._pend
        if end > len(pend):
            pend = self._grow_pending(end)
        pend[start:end] = data
        self._pend_len = end

    def _prepare(self, record: Record, seq: int, created: list[str]) -> Record:
        """Check a record's seq and move a large output to a blob (the uncommon cases of append).

        The hash of a blob this stores for the first time is added to ``created``.
        """
        if record.seq not in (seq, -1):
            raise InvalidRecord(
                f"record carries seq {record.seq} but the next seq of this ledger is {seq}; "
                "build records with the default seq=-1 and let the ledger assign it",
                where=f"seq {record.seq}",
                field="seq",
            )
        body = record.body
        if isinstance(body, ToolResult | TaskResult):
            record = self._place_output(record, body, seq, created)
        return record

    def _discard(self, created: list[str]) -> None:
        """Remove the blobs a refused append stored (see :meth:`_prepare`): the store is unchanged."""
        for blob_hash in created:
            self.blobs.discard(blob_hash)

    def _place_output(
        self, record: Record, body: ToolResult | TaskResult, seq: int, created: list[str]
    ) -> Record:
        """Move a large output to the blob store, or check an existing blob reference."""
        threshold = self.header.blob_threshold
        if body.blob is not None:
            try:
                known = self.blobs.contains(body.blob.hash)
            except ValueError:
                known = False
            if not known:
                raise InvalidRecord(
                    f"blob {body.blob.hash!r} is not in this ledger's blob store; store the bytes with "
                    "put_blob() first and use the BlobRef it returns",
                    where=f"seq {seq}",
                    field="body.blob.hash",
                )
            # Its size is what audit reports as the output's bytes, so it must be the blob's:
            # known without a read for a blob this ledger just stored (the runtime's way),
            # read and checked once for any other.
            held = self.blobs.size(body.blob.hash)
            if body.blob.size != held:
                raise InvalidRecord(
                    f"BlobRef says blob {body.blob.hash[:16]}… holds {body.blob.size:,} bytes, it holds "
                    f"{held:,}; use the BlobRef put_blob() returns",
                    where=f"seq {seq}",
                    field="body.blob.size",
                )
            return record
        output = body.output
        if len(output) * 4 <= threshold:  # UTF-8 takes at most 4 bytes a character
            return record
        try:
            data = output.encode("utf-8")
        except UnicodeEncodeError as exc:
            # As the encoder says of a short output (lone surrogates, from bytes decoded
            # with surrogateescape): the ledger holds UTF-8 text only.
            raise InvalidRecord(f"record does not encode ({exc})", where=f"seq {seq}") from None
        if len(data) <= threshold:
            return record
        ref, new = self.blobs.store(
            data, preview=output[:BLOB_PREVIEW_CHARS], tail=output[-BLOB_PREVIEW_CHARS:]
        )
        if new:
            created.append(ref.hash)
        return _replace(record, body=_replace(body, output="", blob=ref))

    def _grow_pending(self, needed: int) -> bytearray:
        """Enlarge the pending buffer (in place) to hold ``needed`` bytes."""
        pend = self._pend
        pend.extend(bytes(max(needed, 2 * len(pend)) - len(pend)))
        return pend

    def _fail(self, exc: BaseException) -> None:
        """A write failed: its state on disk is unknown, so this writer refuses more appends."""
        self._tip.failed = exc
        self._writable = False

    # ------------------------------------------------------------------ writing out

    def _write_pending(self) -> None:
        """Hand buffered frames to the OS (visible to readers; durable only after a sync)."""
        size = self._pend_len
        if not size:
            return
        fd = self._tip.fd
        assert fd is not None
        offset = self._active_size
        written = 0
        with memoryview(self._pend) as view:
            while written < size:
                written += os.pwrite(fd, view[written:size], offset + written)
        self._active_size = offset + size
        self._pend_len = 0

    def _sync(self) -> None:
        self._write_pending()
        fd = self._tip.fd
        assert fd is not None
        sync_file(fd)

    def _rollover(self) -> None:
        """Seal the full active segment and start the next one, crash-safely.

        The old segment is made durable before the new one (which claims the next seq)
        exists, and the new one exists before the old one is sealed, so the newest segment
        on disk is always a plain, appendable file.
        """
        self._sync()
        tip = self._tip
        fd = tip.fd
        assert fd is not None
        old_path = tip.active_path
        try:
            new_path = create_segment(self._seg_dir, tip.next_seq, self._head_hash)
        except OSError as exc:
            if os.path.lexists(self._seg_dir / segment_name(tip.next_seq)):
                raise  # the new segment's name is there (a failed directory sync): state unknown
            # A full disk fails here first, after the records were synced: they are durable in
            # the active segment, which stays valid and appendable, so the append succeeded
            # (it raised, and a caller told its record failed found it on reopen). Try again
            # once the segment has grown by another eighth.
            self._segment_bytes = self._active_size + self.header.segment_bytes // 8
            log.warning(
                "ledger %s: could not start segment %s (%s); appending to %s meanwhile",
                self.path,
                segment_name(tip.next_seq),
                exc.strerror or exc,
                old_path.name,
            )
            return
        self._segment_bytes = self.header.segment_bytes
        os.close(fd)
        tip.fd = None
        tip.fd = open_ledger_file(new_path, os.O_WRONLY, what=ACTIVE_SEGMENT)
        tip.active_path = new_path
        # A reader's listing taken before this point is stale from here (holon.ledger.reader).
        tip.active_start = tip.next_seq
        self._active_size = SEGMENT_HEADER.size
        if self.header.format_version < FORMAT_VERSION:
            # The first seal in this holon's layout: the header says so first (not on open,
            # which may append nothing), so an older holon refuses the ledger by name.
            try:
                self.header = raise_format(self.path, self.header)
            except OSError as exc:
                # The old segment stays plain, which either version reads; the next writer's
                # recovery raises the header and seals it.
                log.warning(
                    "ledger %s: could not raise the header's format version (%s); %s stays plain",
                    self.path,
                    exc.strerror or exc,
                    old_path.name,
                )
                return
        # Compression takes longer than filling many frames, so it runs beside the appends
        # (zstd releases the GIL). Until it finishes the plain file is a valid segment, and
        # a crash before it finishes is completed by the next writer's recovery.
        self._join_sealer()
        self._sealer = threading.Thread(
            target=self._seal, args=(old_path,), name=f"holon-seal-{old_path.name}", daemon=True
        )
        self._sealer.start()

    def _seal(self, plain: Path) -> None:
        """Seal one finished segment (runs in the sealing thread)."""
        try:
            seal_segment(plain, read_ledger_file(plain, what="a segment file"))
            log.debug("ledger %s: sealed %s", self.path, plain.name)
        except Exception:
            # The plain segment stays valid and the next writer to open the ledger seals it.
            log.exception(
                "ledger %s: sealing %s failed; it stays plain until the next open", self.path, plain
            )

    def _join_sealer(self) -> None:
        """Wait for a running seal (one at a time; and before the lock is released)."""
        if self._sealer is not None:
            self._sealer.join()
            self._sealer = None

    def flush(self) -> None:
        """``Ledger.flush``: write buffered appends and, unless the policy is ``never``, fsync them."""
        self.check_writable()
        try:
            if self._fsync == "never":
                self._write_pending()
            else:
                self._sync()
        except BaseException as exc:
            self._fail(exc)
            raise

    def publish(self) -> None:
        """Let this writer's own reads see its buffered appends."""
        if self._writable and self._pend_len:
            try:
                self._write_pending()
            except BaseException as exc:
                self._fail(exc)
                raise

    def check_writable(self) -> None:
        """Raise UsageError if this writer may not append: it is closed, or a write failed."""
        if self._closed:
            raise ledger_closed(self.path)
        failed = self._tip.failed
        if failed is not None:
            raise UsageError(
                f"an earlier write to ledger {self.path} failed ({failed!r}); appends after it may "
                "not be on disk, so this writer refuses more: close it and open the ledger again"
            )

    def close(self) -> None:
        """Stop writing (the caller flushed): wait for a seal, close the segment, release the lock."""
        self._closed = True
        self._writable = False
        self._join_sealer()
        tip = self._tip
        if tip.fd is not None:
            os.close(tip.fd)
            tip.fd = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
