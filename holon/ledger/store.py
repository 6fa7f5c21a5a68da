"""The ledger: a durable, append-only, hash-chained record log for one agent.

Layout of a ledger directory (see docs/ledger-format.md for the bytes)::

    <ledger>/holon-ledger.json      header: agent id, format version, settings
    <ledger>/holon-ledger.lock      writer lock (flock), holds the writer's pid
    <ledger>/segments/<seq>.seg     active segment, frames appended in place
    <ledger>/segments/<seq>.seg.zst sealed segments, zstd-compressed
    <ledger>/blobs/ab/<hash>        content-addressed blobs, zstd-compressed

One process writes (``Ledger.create`` / ``Ledger.open``); any number read
(``Ledger.open(path, readonly=True)``), in this process or others, while it appends.

:class:`Ledger` is the facade: it makes and opens ledgers and composes the parts that do
the work, the writer (:mod:`holon.ledger.writer`) of a ledger opened for writing and the
reader (:mod:`holon.ledger.reader`) of every one, which share only the writer's
:class:`~holon.ledger.tip.Tip`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import get_args

from holon.errors import RefNotFound, UsageError
from holon.ledger.blobs import BlobStore, check_blob_hash
from holon.ledger.files import fsync_dir
from holon.ledger.frames import FrameWalk
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
from holon.ledger.reader import Reader
from holon.ledger.recovery import RecoveryAction
from holon.ledger.segments import FORMAT_VERSION, SegmentFile, create_segment
from holon.ledger.tip import Tip
from holon.ledger.verify import VerifyReport, verify_ledger
from holon.ledger.writer import FsyncPolicy, Writer, ledger_closed
from holon.records import BlobRef, Record

__all__ = ["DEFAULT_BLOB_THRESHOLD", "DEFAULT_SEGMENT_BYTES", "FsyncPolicy", "Ledger"]

log = logging.getLogger("holon.ledger")


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
        self.readonly = readonly
        self._fsync: FsyncPolicy = fsync
        self._header = header
        self._seg_dir = path / "segments"
        self.blobs = BlobStore(path / "blobs", durable=fsync != "never")
        self._closed = False
        self._tip = Tip(self._seg_dir)
        self._reader = Reader(path, self._tip)
        self._writer: Writer | None = None
        if not readonly:
            self._writer = Writer(path, header, self.blobs, self._tip, fsync=fsync, cut_at=cut_at, lock=lock)

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

    # ------------------------------------------------------------------ properties

    @property
    def header(self) -> LedgerHeader:
        """The ledger's header, as read on opening or as this writer last wrote it."""
        return self._header if self._writer is None else self._writer.header

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
        return () if self._writer is None else self._writer.recovery

    def head(self) -> tuple[int, str]:
        """``(seq, hash hex)`` of the newest record; ``(-1, genesis hash)`` when empty.

        A writer whose write failed answers from the files, as a reader does: the records
        of the failed call were counted in memory, but reached the disk in part or not at all.
        """
        if self._writer is not None and self._tip.failed is None:
            return self._writer.head()
        return self._reader.head()

    # ------------------------------------------------------------------ appending

    def append(self, record: Record) -> int:
        """Append one record and return its seq (durable on return under ``always``).

        A record built with the default ``seq=-1`` gets the next seq; an explicit seq must
        be exactly the next one. Tool and task outputs over the blob threshold are moved
        to the blob store first: the stored record has ``output=""`` and ``blob=BlobRef``.
        ``ts`` must be in ``MIN_TS .. MAX_TS`` (:mod:`holon.records`): milliseconds since
        the epoch, 1970 to the year 5138; any other is InvalidRecord, nothing appended.
        """
        writer = self._writer
        if writer is None:
            writer = self._writer_or_refuse()
        return writer.append(record)

    def append_many(self, records: Iterable[Record]) -> list[int]:
        """Append records in order and return their seqs; nothing is appended if one is invalid.

        The checks are :meth:`append`'s; an error names the seq the record would get and
        its index in ``records``.
        """
        return self._writer_or_refuse().append_many(records)

    def flush(self) -> None:
        """Write buffered appends and, unless the policy is ``never``, fsync them."""
        self._writer_or_refuse().flush()

    @contextmanager
    def batch(self) -> Iterator[Ledger]:
        """Group appends: ``with ledger.batch(): ...`` flushes once when the block ends."""
        self._writer_or_refuse().check_writable()
        try:
            yield self
        finally:
            if self._tip.failed is None and not self._closed:
                self.flush()

    def _writer_or_refuse(self) -> Writer:
        """The writer; UsageError for a read-only ledger (closed or not), which has none."""
        if self._writer is None:
            if self._closed:
                raise ledger_closed(self.path)
            raise UsageError(
                f"ledger {self.path} was opened read-only; open it with readonly=False to append"
            )
        return self._writer

    # ------------------------------------------------------------------ blobs

    def put_blob(self, data: bytes, *, preview: str = "", tail: str = "") -> BlobRef:
        """Store bytes in the blob store and return the reference a record can carry.

        ``preview`` and ``tail`` are the start and the end of the text the bytes hold, kept in
        the reference so a reader sees what it is without reading the blob."""
        self._writer_or_refuse().check_writable()
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
        return self._reader.records(from_seq, to_seq)

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
        return self._reader.get(seq)

    def verify(self, *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Check every frame, the whole chain and every blob; report problems instead of raising.

        A torn tail of the active segment is not a problem (a crash mid-append leaves one)
        but is named in the report's ``torn_tail`` and ``warnings``. ``progress(done,
        total)``, if given, is called as the files are checked (bytes on disk).
        """
        self._publish()
        return verify_ledger(self._seg_dir, self.blobs, self.header, progress=progress)

    def _walk(
        self, from_seq: int, to_seq: int | None, segs: list[SegmentFile] | None
    ) -> Iterator[tuple[int, memoryview, FrameWalk]]:
        """Yield ``(seq, payload, walk)`` for verified frames from ``from_seq``, undecoded.

        The walk ``read`` runs, minus the decode: for holon.audit, which decodes in batches.
        """
        return self._reader.walk(from_seq, to_seq, segs)

    def _publish(self) -> None:
        """Let this writer's own reads see its buffered appends."""
        if self._writer is not None:
            self._writer.publish()

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Flush (per the fsync policy), release the writer lock; idempotent."""
        if self._closed:
            return
        try:
            if self._writer is not None and self._tip.failed is None:
                self.flush()
        finally:
            self._closed = True
            if self._writer is not None:
                self._writer.close()
            self._reader.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "read-only" if self.readonly else f"writer, fsync={self.fsync}"
        return f"<Ledger {self.path} agent={self.agent_id!r} {mode}>"
