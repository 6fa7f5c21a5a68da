"""The ledger: a durable, append-only, hash-chained record log for one agent.

Layout of a ledger directory (see docs/ledger-format.md for the bytes)::

    <ledger>/holon-ledger.json      header: agent id, format version, settings
    <ledger>/holon-ledger.lock      writer lock (flock), holds the writer's pid
    <ledger>/segments/<seq>.seg     active segment, frames appended in place
    <ledger>/segments/<seq>.seg.zst sealed segments, zstd-compressed
    <ledger>/blobs/ab/<hash>        content-addressed blobs, zstd-compressed

One process writes (``Ledger.create`` / ``Ledger.open``); any number read
(``Ledger.open(path, readonly=True)``), in this process or others, while it appends.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, get_args

import blake3
import msgspec
import xxhash

from holon.errors import InvalidRecord, LedgerCorrupt, RefNotFound, UsageError, byte_location
from holon.ledger.blobs import BLOB_PREVIEW_CHARS, BlobStore, check_blob_hash
from holon.ledger.files import fsync_dir, open_ledger_file, read_ledger_file, sync_file
from holon.ledger.frames import (
    FRAME_HEAD,
    FRAME_OVERHEAD,
    HASH_SIZE,
    MAX_PAYLOAD,
    FrameWalk,
    oversized_payload,
)
from holon.ledger.header import (
    DEFAULT_BLOB_THRESHOLD,
    DEFAULT_SEGMENT_BYTES,
    HEADER_NAME,
    LedgerHeader,
    enclosing_ledger,
    interrupted_create,
    read_header,
    setting_problem,
    write_header,
)
from holon.ledger.lock import WriterLock
from holon.ledger.recovery import RecoveryAction, raise_format, recover
from holon.ledger.sealed import SeekTable, read_sealed_frame, read_seek_table
from holon.ledger.segments import (
    FORMAT_VERSION,
    SEGMENT_HEADER,
    SegmentFile,
    SegmentHeader,
    create_segment,
    find_segment,
    list_segments,
    load_segment,
    parse_segment_header,
    seal_segment,
    segment_name,
    seq_gap,
)
from holon.ledger.verify import VerifyReport, verify_ledger
from holon.records import (
    BODY_TYPES,
    MAX_TS,
    MIN_TS,
    BlobRef,
    Record,
    TaskResult,
    ToolResult,
    check_payload,
    decode_msgpack_record,
    encode_msgpack_record_into,
    ts_out_of_range,
)

__all__ = ["DEFAULT_BLOB_THRESHOLD", "DEFAULT_SEGMENT_BYTES", "FsyncPolicy", "Ledger"]

log = logging.getLogger("holon.ledger")

FsyncPolicy = Literal["always", "batch", "never"]
"""When appends reach stable storage: before each append returns, at ``flush()``, or never."""

# Under ``batch``/``never``, buffered frames are handed to the OS once they pass this size,
# so memory stays bounded between flushes (they are fsynced at the next flush).
_WRITE_THRESHOLD: Final = 1 << 20
_PENDING_START: Final = 1 << 16
_SEALED_CACHE_SIZE: Final = 2
# get() in a sealed segment keeps the seek tables of this many segments (a few hundred
# bytes each) and the decompressed frames (~256 KiB each, with their offsets) of this many.
_SEEK_TABLES: Final = 256
_FRAME_CACHE_SIZE: Final = 8
_LENGTH_MASK: Final = 0xFFFFFFFF
_ACTIVE: Final = "the active segment"

# The active segment's offset index is extended by reading this much past its end at a time.
_INDEX_CHUNK: Final = 1 << 16
# A get reads this much at a frame's offset first: one read for all but large frames.
_FRAME_READ: Final = 4096
# Records that do not encode raise one of these from the codec.
_ENCODE_ERRORS: Final = (msgspec.EncodeError, TypeError, OverflowError, ValueError)

_pack_into = FRAME_HEAD.pack_into
_unpack_head = FRAME_HEAD.unpack_from
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


def _not_a_record(value: object, seq: int) -> InvalidRecord:
    # Passing a body (ledger.append(Message(...))) is the likely mistake; it raised
    # AttributeError from deep inside append.
    hint = (
        f"wrap the body: Record(body={type(value).__name__}(...), ts=...)"
        if type(value) in _BODY_CLASSES
        else "build one with Record(body=..., ts=...)"
    )
    return InvalidRecord(f"a {type(value).__name__} is not a Record; {hint}", where=f"seq {seq}")


def _check_header(buf: bytes, start_seq: int, file: str, *, sealed: bool) -> SegmentHeader:
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


def _check_fsync(fsync: object) -> None:
    if fsync not in get_args(FsyncPolicy):
        raise UsageError(f"fsync policy {fsync!r} is not one of {', '.join(get_args(FsyncPolicy))}")


def _creatable(root: Path) -> bool:
    """Whether ``Ledger.create`` may make a ledger in the existing directory ``root``.

    An empty one, or one holding only what an interrupted create left (see
    :func:`~holon.ledger.header.interrupted_create`): the same call run again finishes it,
    where it was refused as "not empty" while opening it said "no header", for ever.
    """
    return not any(root.iterdir()) or interrupted_create(root)


class _ActiveIndex:
    """Offsets of the frames of one plain segment, extended incrementally as it grows.

    ``get`` on the active segment reads only the bytes appended since the last call,
    instead of loading and walking the whole segment each time.
    """

    __slots__ = ("end", "fd", "offsets", "path", "start_seq")

    def __init__(self, start_seq: int, path: Path) -> None:
        self.start_seq = start_seq
        self.path = path
        # Set before os.open, which may fail (a missing or unreadable segment): __del__ still
        # runs on the half-built object and must find a descriptor to (not) close.
        self.fd = -1
        # Kept open: if the writer seals and unlinks the file, the open file still reads the
        # same (now complete) bytes.
        self.fd = open_ledger_file(path, os.O_RDONLY, what=_ACTIVE)
        self.offsets: list[int] = []
        self.end = SEGMENT_HEADER.size
        try:
            # The frames are only indexed; the header is what says whose they are. A damaged
            # one, or one naming another start seq, makes every get here LedgerCorrupt.
            _check_header(os.pread(self.fd, SEGMENT_HEADER.size, 0), start_seq, str(path), sealed=False)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        # A reader that is never closed (``Ledger.open(p, readonly=True).get(n)``) must not
        # leak the descriptor.
        self.close()


class Ledger:
    """An open ledger: the single writer, or a read-only view.

    Build one with :meth:`create` or :meth:`open`, and close it (or use ``with``).
    """

    def __init__(
        self,
        path: Path,
        header: LedgerHeader,
        *,
        readonly: bool,
        fsync: FsyncPolicy,
        cut_at: int | None = None,
        lock: WriterLock | None = None,
    ) -> None:
        """Use :meth:`create` or :meth:`open` (``cut_at``: :func:`holon.ledger.repair.cut_tail`;
        ``lock``: the writer lock :meth:`create` took, which this writer then holds)."""
        _check_fsync(fsync)
        self.path = path
        self.header = header
        self.readonly = readonly
        self._fsync: FsyncPolicy = fsync
        self._sync_each = fsync == "always"
        self._seg_dir = path / "segments"
        self.blobs = BlobStore(path / "blobs", durable=fsync != "never")
        self._sealed_cache: OrderedDict[int, tuple[bytes, str, list[int] | None]] = OrderedDict()
        # By start seq: a sealed segment's seek table, None for one sealed as a single frame.
        self._seek_tables: OrderedDict[int, SeekTable | None] = OrderedDict()
        # By (start seq, frame index): a sealed segment's frame and its record offsets.
        self._frame_cache: OrderedDict[tuple[int, int], tuple[bytes, list[int]]] = OrderedDict()
        self._segs: list[SegmentFile] | None = None
        self._active_index: _ActiveIndex | None = None
        self._recovery: tuple[RecoveryAction, ...] = ()
        self._lock: WriterLock | None = None
        self._fd: int | None = None
        self._failed: BaseException | None = None
        self._sealer: threading.Thread | None = None
        self._closed = False
        # Framed records not yet handed to the OS: the first _pend_len bytes of _pend, a
        # buffer kept at its size (appending by slice assignment never reallocates it).
        self._pend = bytearray(_PENDING_START if not readonly else 0)
        self._pend_len = 0
        # The record being framed: the chain hash it commits to (32 bytes) then its payload,
        # i.e. exactly the bytes its checksum and its own chain hash cover. Between appends
        # it starts with the head hash; the payload is encoded in place after it.
        self._scratch = bytearray(header.genesis)
        self._hasher = blake3.blake3()
        self._segment_bytes = header.segment_bytes
        self._active_path = self._seg_dir
        self._active_start = 0
        self._active_size = 0
        self._next_seq = 0
        self._head_hash = header.genesis
        self._writable = False
        if not readonly:
            self._start_writer(cut_at, lock)
            self._writable = True

    # ------------------------------------------------------------------ opening

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        *,
        agent_id: str,
        fsync: FsyncPolicy = "always",
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        blob_threshold: int = DEFAULT_BLOB_THRESHOLD,
    ) -> Ledger:
        """Create a new, empty ledger at ``path`` and open it for writing.

        ``path`` must not exist or be an empty directory. ``segment_bytes`` (when the
        active segment is sealed and a new one started) and ``blob_threshold`` (tool and
        task outputs longer than this many UTF-8 bytes go to the blob store) are stored in
        the header and apply to every later writer; they must lie in
        ``holon.ledger.header.SETTING_RANGES`` (1 KiB..1 GiB and 0..256 MiB), the ranges
        every reader of the header accepts.
        """
        root = Path(path)
        if not isinstance(agent_id, str) or not agent_id or len(agent_id) > 256 or not agent_id.isprintable():
            raise UsageError(f"agent_id {agent_id!r} must be 1-256 printable characters")
        # Before anything is made: a policy the writer would refuse left a ledger behind.
        _check_fsync(fsync)
        # The same check read_header applies: a value create accepts, every reader accepts.
        for field, value in (("segment_bytes", segment_bytes), ("blob_threshold", blob_threshold)):
            problem = setting_problem(field, value)
            if problem is not None:
                raise UsageError(f"{field} {value!r} is out of range: it {problem}")
        if root.exists() and (not root.is_dir() or not _creatable(root)):
            raise UsageError(f"cannot create a ledger at {root}: it exists and is not an empty directory")
        # A ledger inside another one (say, in its blob store) would make the outer one
        # fail verification: refuse, naming the ledger the path is inside.
        parent = enclosing_ledger(root.absolute())
        if parent is not None:
            raise UsageError(
                f"cannot create a ledger at {root}: it is inside the ledger at {parent}; "
                "choose a path outside it"
            )
        header = LedgerHeader(
            agent_id=agent_id,
            format_version=FORMAT_VERSION,
            segment_bytes=segment_bytes,
            blob_threshold=blob_threshold,
        )
        made: list[Path] = []  # the directories mkdir(parents=True) is about to create
        missing = root.absolute()
        while not missing.exists():
            made.append(missing)
            missing = missing.parent
        root.mkdir(parents=True, exist_ok=True)
        # The writer lock first: of two processes creating the same ledger, the second gets
        # LedgerLocked here (it got a FileExistsError from mkdir, or opened the first one's
        # ledger before its creator could), and the new writer holds the lock from the start.
        lock = WriterLock(root)
        try:
            if (root / HEADER_NAME).exists():
                raise UsageError(
                    f"cannot create a ledger at {root}: another process created one there meanwhile; open it"
                )
            if not _creatable(root):
                raise UsageError(f"cannot create a ledger at {root}: it exists and is not an empty directory")
            if interrupted_create(root) and len(os.listdir(root)) > 1:
                # More than this call's lock file: a create was killed part way (the header is
                # written last, so no record was ever appended); the steps below finish it.
                log.warning("ledger %s: finishing a creation that was interrupted before its header", root)
            (root / "segments").mkdir(exist_ok=True)
            (root / "blobs").mkdir(exist_ok=True)
            # Replaces an interrupted create's segment 0 (and its .tmp), which holds no record.
            create_segment(root / "segments", 0, header.genesis)
            # The header goes last: its presence marks a complete ledger.
            write_header(root, header)
            # Each new directory's name is durable only once its parent is synced: without it a
            # crash could lose the whole ledger, acknowledged appends and all.
            for directory in made:
                fsync_dir(directory.parent)
            return cls(root, header, readonly=False, fsync=fsync, lock=lock)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, readonly: bool = False, fsync: FsyncPolicy = "always"
    ) -> Ledger:
        """Open an existing ledger, for writing (takes the lock, recovers) or read-only.

        Raises NotALedger when ``path`` is not a ledger, LedgerLocked when another writer
        holds it, LedgerCorrupt when its bytes are damaged beyond a torn tail.
        """
        root = Path(path)
        return cls(root, read_header(root), readonly=readonly, fsync=fsync)

    def _start_writer(self, cut_at: int | None, lock: WriterLock | None) -> None:
        self._lock = lock if lock is not None else WriterLock(self.path)
        try:
            state = recover(self._seg_dir, self.blobs, self.header, cut_at=cut_at)
            self._recovery = state.actions
            self.header = state.header
            self._active_path = state.active_path
            self._active_start = state.active_start
            self._active_size = state.active_size
            self._next_seq = state.next_seq
            self._head_hash = state.head_hash
            self._scratch[:] = state.head_hash
            # Not through a link (recovery refused one already, by name, and this says so too
            # if one was planted since): appends would go to whatever it points to.
            self._fd = open_ledger_file(state.active_path, os.O_WRONLY, what=_ACTIVE)
        except BaseException:
            self._lock.release()
            raise

    # ------------------------------------------------------------------ properties

    @property
    def fsync(self) -> FsyncPolicy:
        """The fsync policy this ledger was opened with (fixed for the life of the object)."""
        return self._fsync

    @property
    def agent_id(self) -> str:
        """The agent this ledger belongs to."""
        return self.header.agent_id

    @property
    def recovery(self) -> tuple[RecoveryAction, ...]:
        """What opening for writing repaired (torn tail cut, seal finished); empty if nothing."""
        return self._recovery

    def head(self) -> tuple[int, str]:
        """``(seq, hash hex)`` of the newest record; ``(-1, genesis hash)`` when empty.

        A writer whose write failed answers from the files, as a reader does: the records
        of the failed call were counted in memory, but reached the disk in part or not at all.
        """
        if not self.readonly and self._failed is None:
            return self._next_seq - 1, self._head_hash.hex()
        segs = self._listing()
        last = segs[-1]
        seq, prev = last.start_seq - 1, None
        for frame_seq, _payload, walk in self._walk(last.start_seq, None, segs):
            seq, prev = frame_seq, walk.prev
        if prev is None:
            buf, file, sealed = self._load(last)
            prev = parse_segment_header(buf, file=file, decompressed=sealed).prev_hash
        return seq, prev.hex()

    # ------------------------------------------------------------------ appending

    def append(self, record: Record) -> int:
        """Append one record and return its seq (durable on return under ``always``).

        A record built with the default ``seq=-1`` gets the next seq; an explicit seq must
        be exactly the next one. Tool and task outputs over the blob threshold are moved
        to the blob store first: the stored record has ``output=""`` and ``blob=BlobRef``.
        ``ts`` must be in ``MIN_TS .. MAX_TS`` (:mod:`holon.records`): milliseconds since
        the epoch, 1970 to the year 5138; any other is InvalidRecord, nothing appended.
        """
        if not self._writable:
            self._check_writable()
        seq = self._next_seq
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
            _pack_into(pend, start, n, n ^ _LENGTH_MASK, _xxh3(scratch, n))
            pend[start + _HEAD_SIZE : end] = scratch
            self._pend_len = end
            hasher = self._hasher
            hasher.update(scratch)
            head = self._head_hash = hasher.digest()
            hasher.reset()
            scratch[:HASH_SIZE] = head
            self._next_seq = seq + 1
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
        """Append records in order and return their seqs; nothing is appended if one is invalid.

        The checks are :meth:`append`'s; an error names the seq the record would get and
        its index in ``records``.
        """
        self._check_writable()
        first = self._next_seq
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
        hasher = self._hasher
        update, digest, reset = hasher.update, hasher.digest, hasher.reset
        head = self._head_hash
        seq = self._next_seq
        segment_bytes = self._segment_bytes
        chunk = starts[0]
        with memoryview(frames) as view:
            for index in range(len(starts) - 1):
                start, stop = starts[index], starts[index + 1]
                n = stop - start - FRAME_OVERHEAD
                view[start + _HEAD_SIZE : start + FRAME_OVERHEAD] = head
                body = view[start + _HEAD_SIZE : stop]
                _pack_into(frames, start, n, n ^ _LENGTH_MASK, _xxh3(body, n))
                update(body)
                head = digest()
                reset()
                seq += 1
                if self._active_size + self._pend_len + stop - chunk >= segment_bytes:
                    self._pend_frames(view[chunk:stop])
                    chunk = stop
                    self._head_hash, self._next_seq = head, seq
                    self._rollover()
                    segment_bytes = self._segment_bytes  # later if the rollover was put off
            if chunk < starts[-1]:
                self._pend_frames(view[chunk : starts[-1]])
        self._head_hash, self._next_seq = head, seq
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
        self._failed = exc
        self._writable = False

    def _write_pending(self) -> None:
        """Hand buffered frames to the OS (visible to readers; durable only after a sync)."""
        size = self._pend_len
        if not size:
            return
        fd = self._fd
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
        assert self._fd is not None
        sync_file(self._fd)

    def _rollover(self) -> None:
        """Seal the full active segment and start the next one, crash-safely.

        The old segment is made durable before the new one (which claims the next seq)
        exists, and the new one exists before the old one is sealed, so the newest segment
        on disk is always a plain, appendable file.
        """
        self._sync()
        fd = self._fd
        assert fd is not None
        old_path = self._active_path
        try:
            new_path = create_segment(self._seg_dir, self._next_seq, self._head_hash)
        except OSError as exc:
            if os.path.lexists(self._seg_dir / segment_name(self._next_seq)):
                raise  # the new segment's name is there (a failed directory sync): state unknown
            # A full disk fails here first, after the records were synced: they are durable in
            # the active segment, which stays valid and appendable, so the append succeeded
            # (it raised, and a caller told its record failed found it on reopen). Try again
            # once the segment has grown by another eighth.
            self._segment_bytes = self._active_size + self.header.segment_bytes // 8
            log.warning(
                "ledger %s: could not start segment %s (%s); appending to %s meanwhile",
                self.path,
                segment_name(self._next_seq),
                exc.strerror or exc,
                old_path.name,
            )
            return
        self._segment_bytes = self.header.segment_bytes
        os.close(fd)
        self._fd = None
        self._fd = open_ledger_file(new_path, os.O_WRONLY, what=_ACTIVE)
        self._active_path = new_path
        self._active_start = self._next_seq
        self._active_size = SEGMENT_HEADER.size
        self._segs = None
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
        """Write buffered appends and, unless the policy is ``never``, fsync them."""
        self._check_writable()
        try:
            if self.fsync == "never":
                self._write_pending()
            else:
                self._sync()
        except BaseException as exc:
            self._fail(exc)
            raise

    @contextmanager
    def batch(self) -> Iterator[Ledger]:
        """Group appends: ``with ledger.batch(): ...`` flushes once when the block ends."""
        self._check_writable()
        try:
            yield self
        finally:
            if self._failed is None and not self._closed:
                self.flush()

    def _check_writable(self) -> None:
        if self._closed:
            raise UsageError(f"ledger {self.path} is closed")
        if self.readonly:
            raise UsageError(
                f"ledger {self.path} was opened read-only; open it with readonly=False to append"
            )
        if self._failed is not None:
            raise UsageError(
                f"an earlier write to ledger {self.path} failed ({self._failed!r}); appends after it may "
                "not be on disk, so this writer refuses more: close it and open the ledger again"
            )

    # ------------------------------------------------------------------ blobs

    def put_blob(self, data: bytes, *, preview: str = "", tail: str = "") -> BlobRef:
        """Store bytes in the blob store and return the reference a record can carry.

        ``preview`` and ``tail`` are the start and the end of the text the bytes hold, kept in
        the reference so a reader sees what it is without reading the blob."""
        self._check_writable()
        return self.blobs.put(bytes(data), preview=preview, tail=tail)

    def get_blob(self, blob_hash: str) -> bytes:
        """The original bytes of a blob, verified against its hash.

        Raises InvalidRef (malformed hash), RefNotFound (unknown), LedgerCorrupt (damaged).
        """
        return self.blobs.get(check_blob_hash(blob_hash))

    def has_blob(self, blob_hash: str) -> bool:
        """True when the blob store holds this (well-formed) hash."""
        return self.blobs.contains(check_blob_hash(blob_hash))

    # ------------------------------------------------------------------ reading

    def read(self, from_seq: int = 0, to_seq: int | None = None) -> Iterator[Record]:
        """Iterate records with ``from_seq <= seq < to_seq`` in order, verifying every frame.

        Checksums and chain links are checked as frames are read; damage raises
        LedgerCorrupt naming the segment file and byte offset. Without ``to_seq`` the
        iteration runs to the end of the data visible when it gets there (records a
        concurrent writer appends meanwhile are included). Reading starts in the segment
        holding ``from_seq`` (found from the file names); earlier segments are not read.
        """
        if from_seq < 0:
            raise UsageError(f"from_seq {from_seq} must be >= 0")
        if to_seq is not None and to_seq < 0:
            # Not a slice: read(0, -1) read nothing at all, not all but the last record.
            raise UsageError(
                f"to_seq {to_seq} must be >= 0 (it is the seq to stop before, not counted from the end); "
                "pass head()[0] + 1 - n to leave out the last n records"
            )
        self._publish()
        return self._records(from_seq, to_seq)

    def _records(self, from_seq: int, to_seq: int | None) -> Iterator[Record]:
        """Verified, decoded records: the body of :meth:`read`.

        The frame loop is inlined here (it is the whole cost of a scan); at the first frame
        that is not plainly valid it hands over to FrameWalk, which raises LedgerCorrupt
        naming the damage or, at the end of the active segment, stops at a torn tail.
        """
        decode = decode_msgpack_record
        unpack = _unpack_head
        xxh3 = _xxh3
        hasher = blake3.blake3()
        update, digest, reset = hasher.update, hasher.digest, hasher.reset
        head_size, overhead, mask, max_payload = _HEAD_SIZE, FRAME_OVERHEAD, _LENGTH_MASK, MAX_PAYLOAD
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

    def get(self, seq: int) -> Record:
        """The record with this seq (random access through the segment index).

        The segment is found from the file names; in a sealed segment the frame through an
        offset table cached per segment, in the active segment through an offset index
        that is extended by reading only what was appended since the last call.
        Raises RefNotFound when ``seq`` is beyond the head.
        """
        if seq < 0:
            raise RefNotFound(f"seq {seq} does not exist: seqs start at 0")
        self._publish()
        if self._fd is not None and self._failed is None and seq >= self._active_start:
            # The writer knows its active segment without listing the directory (after a
            # failed write it does not: it reads what is on disk, as a reader would).
            if seq >= self._next_seq:
                raise RefNotFound(
                    f"seq {seq} is past the end of ledger {self.path} (next seq is {self._next_seq})"
                )
            return self._get_active(SegmentFile(self._active_start, self._active_path, None), seq)
        segs = self._segs
        if segs is None:
            segs = self._segs = self._listing()
        index = bisect.bisect_right([s.start_seq for s in segs], seq) - 1
        seg = segs[index]
        if index == len(segs) - 1 and seg.plain is not None:
            return self._get_active(seg, seq)
        table = self._seek_table(seg) if seg.plain is None and seg.sealed is not None else None
        if table is not None:
            if seq < table.end_seq:
                return self._get_sealed(seg.start_seq, table, seq)
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
            raise RefNotFound(f"seq {seq} is past the end of ledger {self.path} (next seq is {end})")
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

    def _seek_table(self, seg: SegmentFile) -> SeekTable | None:
        """The checked seek table of a sealed segment (cached), None if it was sealed as one frame.

        Its frame 0, the segment header, is checked once with it: a get reads frames only
        after the header said they are this segment's.
        """
        start = seg.start_seq
        if start in self._seek_tables:
            self._seek_tables.move_to_end(start)
            return self._seek_tables[start]
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
            _check_header(read_sealed_frame(seg.sealed, table, 0), start, file, sealed=True)
        self._seek_tables[start] = table
        while len(self._seek_tables) > _SEEK_TABLES:
            self._seek_tables.popitem(last=False)
        return table

    def _get_sealed(self, start_seq: int, table: SeekTable, seq: int) -> Record:
        """``get`` in a sealed segment with a seek table: decompress the one frame holding ``seq``.

        The frame's records are walked (checksums and seqs) once and their offsets cached
        with it; a frame holding another number of records than its table entry says is
        LedgerCorrupt naming the entry, so a wrong table never yields a wrong record (and the
        record's own seq is checked against ``seq`` as well).
        """
        index = table.frame_of(seq)
        key = (start_seq, index)
        cached = self._frame_cache.get(key)
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
            cached = self._frame_cache[key] = (plain, offsets)
            while len(self._frame_cache) > _FRAME_CACHE_SIZE:
                self._frame_cache.popitem(last=False)
        else:
            self._frame_cache.move_to_end(key)
        plain, offsets = cached
        return self._frame_record(plain, offsets[seq - s0], seq, table.file, base=p0, decompressed=True)

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
                fresh = _ActiveIndex(seg.start_seq, seg.plain)
            except FileNotFoundError:
                # Sealed since it was listed: look it up again.
                if self._fd is not None:
                    raise
                self._segs = None
                return self.get(seq)
            self._drop_index()
            index = self._active_index = fresh
        k = seq - seg.start_seq
        if k >= len(index.offsets):
            self._extend_index(index, index.fd)
        if k >= len(index.offsets):
            if self._fd is None:
                segs = self._segs = self._listing()
                if segs[-1].start_seq != seg.start_seq:
                    # The writer rolled over meanwhile: this segment is complete now.
                    self._drop_index()
                    return self.get(seq)
            raise RefNotFound(
                f"seq {seq} is past the end of ledger {self.path} "
                f"(next seq is {seg.start_seq + len(index.offsets)})"
            )
        pos = index.offsets[k]
        frame = os.pread(index.fd, _FRAME_READ, pos)
        if len(frame) >= _HEAD_SIZE:
            n = _unpack_head(frame, 0)[0]
            if FRAME_OVERHEAD + n > len(frame):
                frame = os.pread(index.fd, FRAME_OVERHEAD + n, pos)
        return self._frame_record(frame, 0, seq, str(index.path), base=pos)

    def _drop_index(self) -> None:
        if self._active_index is not None:
            self._active_index.close()
            self._active_index = None

    def _extend_index(self, index: _ActiveIndex, fd: int) -> None:
        """Index the complete frames appended to a plain segment since the last call.

        Damage in those bytes raises LedgerCorrupt (naming the file and offset), on this
        call and every later one: a damaged segment is reported, not partly served.
        """
        pos = index.end
        want = _INDEX_CHUNK
        file = str(index.path)
        while True:
            chunk = os.pread(fd, want, pos)
            if len(chunk) < _HEAD_SIZE:
                break
            walk = FrameWalk(
                chunk, file=file, pos=0, end=len(chunk), prev=None, active=True, verify_chain=False, base=pos
            )
            found = [pos + offset for offset, _payload in walk.frames()]
            index.offsets += found
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
            whole = FRAME_OVERHEAD + n if guard == n ^ _LENGTH_MASK and 0 < n <= MAX_PAYLOAD else 0
            want = whole if whole > want else 2 * want
        index.end = pos

    def verify(self, *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Check every frame, the whole chain and every blob; report problems instead of raising.

        A torn tail of the active segment is not a problem (a crash mid-append leaves one)
        but is named in the report's ``torn_tail`` and ``warnings``. ``progress(done,
        total)``, if given, is called as the files are checked (bytes on disk).
        """
        self._publish()
        return verify_ledger(self._seg_dir, self.blobs, self.header, progress=progress)

    def _publish(self) -> None:
        """Let this writer's own reads see its buffered appends."""
        if self._writable and self._pend_len:
            try:
                self._write_pending()
            except BaseException as exc:
                self._fail(exc)
                raise

    def _listing(self) -> list[SegmentFile]:
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
        _check_header(buf, seg.start_seq, file, sealed=sealed)
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

    def _walk(
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
            segs = self._listing()
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
            header = _check_header(buf, seg.start_seq, file, sealed=sealed)
            if seg.start_seq != expected:
                raise LedgerCorrupt(
                    seq_gap(expected, seg.start_seq),
                    file=file,
                    offset=0,
                    decompressed=sealed,
                )
            if prev is not None and header.prev_hash != prev:
                raise LedgerCorrupt(
                    "broken hash chain across segments: this segment does not commit to the last record "
                    "of the segment before it",
                    file=file,
                    offset=24,
                    decompressed=sealed,
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
                index = here
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

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush (per the fsync policy), release the writer lock; idempotent."""
        if self._closed:
            return
        try:
            if not self.readonly and self._failed is None:
                self.flush()
        finally:
            self._closed = True
            self._writable = False
            self._join_sealer()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            self._sealed_cache.clear()
            self._seek_tables.clear()
            self._frame_cache.clear()
            self._drop_index()
            self._segs = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else f"writer, fsync={self.fsync}"
        return f"<Ledger {self.path} agent={self.agent_id!r} {mode}>"


class _Span:
    """A stretch of one segment's bytes for a reader to walk (see ``Ledger._spans``)."""

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
