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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final, Literal, get_args

import blake3
import msgspec
import xxhash

from holon.errors import InvalidRecord, LedgerCorrupt, RefNotFound, UsageError
from holon.ledger.blobs import BLOB_PREVIEW_CHARS, BlobStore, check_blob_hash
from holon.ledger.files import sync_file
from holon.ledger.frames import FRAME_HEAD, FrameWalk
from holon.ledger.header import LedgerHeader, read_header, write_header
from holon.ledger.lock import WriterLock
from holon.ledger.recovery import RecoveryAction, recover
from holon.ledger.segments import (
    FORMAT_VERSION,
    SEGMENT_HEADER,
    SegmentFile,
    create_segment,
    list_segments,
    load_segment,
    parse_segment_header,
    seal_segment,
)
from holon.ledger.verify import VerifyReport, verify_ledger
from holon.records import (
    BlobRef,
    Record,
    TaskResult,
    ToolResult,
    decode_msgpack_record,
    encode_msgpack_record,
)

__all__ = ["DEFAULT_BLOB_THRESHOLD", "DEFAULT_SEGMENT_BYTES", "FsyncPolicy", "Ledger"]

log = logging.getLogger("holon.ledger")

FsyncPolicy = Literal["always", "batch", "never"]
"""When appends reach stable storage: before each append returns, at ``flush()``, or never."""

DEFAULT_SEGMENT_BYTES: Final = 8 << 20
DEFAULT_BLOB_THRESHOLD: Final = 4096
_MIN_SEGMENT_BYTES: Final = 1024
# Under ``batch``/``never``, buffered frames are handed to the OS once they pass this size,
# so memory stays bounded between flushes (they are fsynced at the next flush).
_WRITE_THRESHOLD: Final = 1 << 20
_SEALED_CACHE_SIZE: Final = 2
_LENGTH_MASK: Final = 0xFFFFFFFF

_pack_head = FRAME_HEAD.pack
_xxh3 = xxhash.xxh3_64_intdigest
_blake3 = blake3.blake3
_replace = msgspec.structs.replace
_BLOB_KINDS: Final = (ToolResult, TaskResult)


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
    ) -> None:
        """Use :meth:`create` or :meth:`open`."""
        if fsync not in get_args(FsyncPolicy):
            raise UsageError(f"fsync policy {fsync!r} is not one of {', '.join(get_args(FsyncPolicy))}")
        self.path = path
        self.header = header
        self.readonly = readonly
        self.fsync: FsyncPolicy = fsync
        self._seg_dir = path / "segments"
        self.blobs = BlobStore(path / "blobs", durable=fsync != "never")
        self._sealed_cache: OrderedDict[int, tuple[bytes, str, list[int] | None]] = OrderedDict()
        self._recovery: tuple[RecoveryAction, ...] = ()
        self._lock: WriterLock | None = None
        self._fd: int | None = None
        self._failed: BaseException | None = None
        self._sealer: threading.Thread | None = None
        self._closed = False
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._active_path = self._seg_dir
        self._active_start = 0
        self._active_size = 0
        self._next_seq = 0
        self._head_hash = header.genesis
        if not readonly:
            self._start_writer()

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
        the header and apply to every later writer.
        """
        root = Path(path)
        if not isinstance(agent_id, str) or not agent_id or len(agent_id) > 256 or not agent_id.isprintable():
            raise UsageError(f"agent_id {agent_id!r} must be 1-256 printable characters")
        if segment_bytes < _MIN_SEGMENT_BYTES:
            raise UsageError(f"segment_bytes {segment_bytes} is below the minimum of {_MIN_SEGMENT_BYTES}")
        if blob_threshold < 0:
            raise UsageError(f"blob_threshold {blob_threshold} must be >= 0")
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise UsageError(f"cannot create a ledger at {root}: it exists and is not an empty directory")
        header = LedgerHeader(
            agent_id=agent_id,
            format_version=FORMAT_VERSION,
            segment_bytes=segment_bytes,
            blob_threshold=blob_threshold,
        )
        root.mkdir(parents=True, exist_ok=True)
        (root / "segments").mkdir()
        (root / "blobs").mkdir()
        create_segment(root / "segments", 0, header.genesis)
        # The header goes last: its presence marks a complete ledger.
        write_header(root, header)
        return cls(root, header, readonly=False, fsync=fsync)

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

    def _start_writer(self) -> None:
        self._lock = WriterLock(self.path)
        try:
            state = recover(self._seg_dir, self.blobs, self.header)
            self._recovery = state.actions
            self._active_path = state.active_path
            self._active_start = state.active_start
            self._active_size = state.active_size
            self._next_seq = state.next_seq
            self._head_hash = state.head_hash
            self._fd = os.open(state.active_path, os.O_WRONLY | os.O_APPEND)
        except BaseException:
            self._lock.release()
            raise

    # ------------------------------------------------------------------ properties

    @property
    def agent_id(self) -> str:
        """The agent this ledger belongs to."""
        return self.header.agent_id

    @property
    def recovery(self) -> tuple[RecoveryAction, ...]:
        """What opening for writing repaired (torn tail cut, seal finished); empty if nothing."""
        return self._recovery

    def head(self) -> tuple[int, str]:
        """``(seq, hash hex)`` of the newest record; ``(-1, genesis hash)`` when empty."""
        if not self.readonly:
            return self._next_seq - 1, self._head_hash.hex()
        segs = self._listing()
        last = segs[-1]
        seq, prev = last.start_seq - 1, None
        for frame_seq, _payload, walk in self._walk(last.start_seq, None, segs):
            seq, prev = frame_seq, walk.prev
        if prev is None:
            buf, file, _ = self._load(last)
            prev = parse_segment_header(buf, file=file).prev_hash
        return seq, prev.hex()

    # ------------------------------------------------------------------ appending

    def append(self, record: Record) -> int:
        """Append one record and return its seq (durable on return under ``always``).

        A record built with the default ``seq=-1`` gets the next seq; an explicit seq must
        be exactly the next one. Tool and task outputs over the blob threshold are moved
        to the blob store first: the stored record has ``output=""`` and ``blob=BlobRef``.
        """
        self._check_writable()
        seq = self._next_seq
        payload = self._payload(record, seq)
        self._commit((payload,))
        return seq

    def append_many(self, records: Iterable[Record]) -> list[int]:
        """Append records in order and return their seqs; nothing is appended if one is invalid."""
        self._check_writable()
        first = self._next_seq
        # Every record is checked and encoded before the first frame is staged.
        payloads = [self._payload(record, seq) for seq, record in enumerate(records, first)]
        self._commit(payloads)
        return list(range(first, first + len(payloads)))

    def _payload(self, record: Record, seq: int) -> bytes:
        """Check a record's seq, move a large output to a blob, and encode it for seq ``seq``."""
        if record.seq != seq:
            if record.seq != -1:
                raise InvalidRecord(
                    f"record carries seq {record.seq} but the next seq of this ledger is {seq}; "
                    "build records with the default seq=-1 and let the ledger assign it",
                    where=f"seq {record.seq}",
                    field="seq",
                )
            record = _replace(record, seq=seq)
        body = record.body
        if isinstance(body, _BLOB_KINDS):
            record = self._place_output(record, body, self.header.blob_threshold)
        try:
            return encode_msgpack_record(record)
        except (msgspec.EncodeError, TypeError, OverflowError) as exc:
            raise InvalidRecord(f"record does not encode ({exc})", where=f"seq {seq}") from None

    def _commit(self, payloads: Iterable[bytes]) -> None:
        """Stage encoded records and apply the fsync policy; a failed write poisons the writer."""
        try:
            stage = self._stage
            for payload in payloads:
                stage(payload)
            if self.fsync == "always":
                self._sync()
            elif self._pending_size >= _WRITE_THRESHOLD:
                self._write_pending()
        except BaseException as exc:
            self._failed = exc
            raise

    def _place_output(self, record: Record, body: ToolResult | TaskResult, threshold: int) -> Record:
        """Move a large output to the blob store, or check an existing blob reference."""
        if body.blob is not None:
            try:
                known = self.blobs.contains(body.blob.hash)
            except ValueError:
                known = False
            if not known:
                raise InvalidRecord(
                    f"blob {body.blob.hash!r} is not in this ledger's blob store; store the bytes with "
                    "put_blob() first and use the BlobRef it returns",
                    where=f"seq {record.seq}",
                    field="body.blob.hash",
                )
            return record
        output = body.output
        if len(output) * 4 <= threshold:  # UTF-8 takes at most 4 bytes a character
            return record
        data = output.encode("utf-8")
        if len(data) <= threshold:
            return record
        ref = self.blobs.put(data, preview=output[:BLOB_PREVIEW_CHARS])
        return _replace(record, body=_replace(body, output="", blob=ref))

    def _stage(self, payload: bytes) -> None:
        """Frame one payload onto the pending buffer and advance seq and head hash."""
        n = len(payload)
        body = self._head_hash + payload
        self._pending.append(_pack_head(n, n ^ _LENGTH_MASK, _xxh3(body, n)))
        self._pending.append(body)
        self._pending_size += FRAME_HEAD.size + len(body)
        self._head_hash = _blake3(body).digest()
        self._next_seq += 1
        if self._active_size + self._pending_size >= self.header.segment_bytes:
            self._rollover()

    def _write_pending(self) -> None:
        """Hand buffered frames to the OS (visible to readers; durable only after a sync)."""
        if not self._pending:
            return
        assert self._fd is not None
        data = memoryview(b"".join(self._pending))
        self._pending.clear()
        self._pending_size = 0
        while data:
            written = os.write(self._fd, data)
            self._active_size += written
            data = data[written:]

    def _sync(self) -> None:
        self._write_pending()
        assert self._fd is not None
        sync_file(self._fd)

    def _rollover(self) -> None:
        """Seal the full active segment and start the next one, crash-safely.

        The old segment is made durable before the new one (which claims the next seq)
        exists, and the new one exists before the old one is sealed, so the newest
        segment on disk is always a plain, appendable file.
        """
        self._sync()
        assert self._fd is not None
        old_path = self._active_path
        new_path = create_segment(self._seg_dir, self._next_seq, self._head_hash)
        os.close(self._fd)
        self._fd = None
        self._fd = os.open(new_path, os.O_WRONLY | os.O_APPEND)
        self._active_path = new_path
        self._active_start = self._next_seq
        self._active_size = SEGMENT_HEADER.size
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
            seal_segment(plain, plain.read_bytes())
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
            self._failed = exc
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

    def put_blob(self, data: bytes, *, preview: str = "") -> BlobRef:
        """Store bytes in the blob store and return the reference a record can carry."""
        self._check_writable()
        return self.blobs.put(bytes(data), preview=preview)

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
        concurrent writer appends meanwhile are included).
        """
        if from_seq < 0:
            raise UsageError(f"from_seq {from_seq} must be >= 0")
        self._publish()
        decode = decode_msgpack_record
        for seq, payload, walk in self._walk(from_seq, to_seq, None):
            try:
                record = decode(payload)
            except InvalidRecord:
                decode(payload, where=f"seq {seq} ({walk.file} at byte {walk.pos - len(payload) - 48})")
                raise
            if record.seq != seq:
                raise LedgerCorrupt(
                    f"frame holds seq {record.seq} where seq {seq} belongs",
                    file=walk.file,
                    offset=walk.pos - len(payload) - 48,
                )
            yield record

    def get(self, seq: int) -> Record:
        """The record with this seq (random access through the segment index).

        Raises RefNotFound when ``seq`` is beyond the head.
        """
        if seq < 0:
            raise RefNotFound(f"seq {seq} does not exist: seqs start at 0")
        self._publish()
        segs = self._listing()
        index = bisect.bisect_right([s.start_seq for s in segs], seq) - 1
        seg = segs[index]
        buf, file, offsets = self._indexed(seg)
        k = seq - seg.start_seq
        if k >= len(offsets):
            if index == len(segs) - 1:
                raise RefNotFound(
                    f"seq {seq} is past the end of ledger {self.path} "
                    f"(next seq is {seg.start_seq + len(offsets)})"
                )
            raise LedgerCorrupt(
                f"segment ends before seq {seq} but the next segment starts at seq "
                f"{segs[index + 1].start_seq}; a segment between them is missing",
                file=segs[index + 1].name,
                offset=0,
            )
        pos = offsets[k]
        walk = FrameWalk(buf, file=file, pos=pos, end=len(buf), prev=None, active=False, verify_chain=False)
        for _offset, payload in walk.frames():
            record = decode_msgpack_record(payload, where=f"seq {seq} ({file} at byte {pos})")
            if record.seq != seq:
                raise LedgerCorrupt(
                    f"frame holds seq {record.seq} where seq {seq} belongs", file=file, offset=pos
                )
            return record
        raise LedgerCorrupt(f"no frame at the indexed offset of seq {seq}", file=file, offset=pos)

    def verify(self) -> VerifyReport:
        """Check every frame, the whole chain and every blob; report problems instead of raising."""
        self._publish()
        return verify_ledger(self._seg_dir, self.blobs, self.header)

    def _publish(self) -> None:
        """Let this writer's own reads see its buffered appends."""
        if not self.readonly and not self._closed and self._failed is None and self._pending:
            try:
                self._write_pending()
            except BaseException as exc:
                self._failed = exc
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
            self._sealed_cache[seg.start_seq] = (buf, file, None)
            while len(self._sealed_cache) > _SEALED_CACHE_SIZE:
                self._sealed_cache.popitem(last=False)
        return buf, file, sealed

    def _indexed(self, seg: SegmentFile) -> tuple[bytes, str, list[int]]:
        """Segment bytes and the offset of each of its frames (cached for sealed segments)."""
        buf, file, sealed = self._load(seg)
        cached = self._sealed_cache.get(seg.start_seq) if sealed else None
        if cached is not None and cached[2] is not None:
            return buf, file, cached[2]
        parse_segment_header(buf, file=file)
        walk = FrameWalk(
            buf,
            file=file,
            pos=SEGMENT_HEADER.size,
            end=len(buf),
            prev=None,
            active=not sealed,
            verify_chain=False,
        )
        offsets = [offset for offset, _payload in walk.frames()]
        if sealed:
            self._sealed_cache[seg.start_seq] = (buf, file, offsets)
        return buf, file, offsets

    def _walk(
        self, from_seq: int, to_seq: int | None, segs: list[SegmentFile] | None
    ) -> Iterator[tuple[int, memoryview, FrameWalk]]:
        """Yield ``(seq, payload, walk)`` for verified frames from ``from_seq``.

        Crossing into the next segment checks that seqs continue and the chain links. When
        the newest segment runs out, the listing is refreshed: if the writer rolled over
        meanwhile, the rest of the (now complete) segment and the next ones are read too.
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
            buf, file, sealed = self._load(seg)
            header = parse_segment_header(buf, file=file)
            if header.start_seq != seg.start_seq:
                raise LedgerCorrupt(
                    f"segment header says it starts at seq {header.start_seq}, its name says {seg.start_seq}",
                    file=file,
                    offset=0,
                )
            if seg.start_seq != expected:
                raise LedgerCorrupt(
                    f"records {expected}..{seg.start_seq - 1} are missing: the segment holding them was "
                    "deleted; restore it from a backup",
                    file=file,
                    offset=0,
                )
            if prev is not None and header.prev_hash != prev:
                raise LedgerCorrupt(
                    "broken hash chain across segments: this segment does not commit to the last record "
                    "of the segment before it",
                    file=file,
                    offset=24,
                )
            pos, prev = SEGMENT_HEADER.size, header.prev_hash
            last = index == len(segs) - 1
            while True:
                walk = FrameWalk(buf, file=file, pos=pos, end=len(buf), prev=prev, active=last and not sealed)
                for _offset, payload in walk.frames():
                    if expected >= from_seq:
                        yield expected, payload, walk
                    expected += 1
                    if to_seq is not None and expected >= to_seq:
                        return
                pos, prev = walk.pos, walk.prev
                if not last:
                    break
                # The newest segment ran out: did the writer roll over meanwhile?
                segs = list_segments(self._seg_dir)
                starts = [s.start_seq for s in segs]
                here = bisect.bisect_left(starts, seg.start_seq)
                if here == len(segs) or starts[here] != seg.start_seq:
                    raise LedgerCorrupt("segment disappeared while reading it", file=file, offset=pos)
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
            self._join_sealer()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._lock is not None:
                self._lock.release()
                self._lock = None
            self._sealed_cache.clear()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else f"writer, fsync={self.fsync}"
        return f"<Ledger {self.path} agent={self.agent_id!r} {mode}>"
