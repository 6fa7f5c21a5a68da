"""The canonical JSONL form of a ledger: one record per line, blobs as files beside it.

``export_jsonl(ledger, "run.jsonl")`` writes every record exactly as stored (a moved
tool output stays a ``BlobRef`` in its record) and each referenced blob's original bytes
to ``run.jsonl.blobs/<hash>``. ``import_jsonl("run.jsonl", ledger)`` checks every line and
every blob first and appends nothing unless all are valid. Both stream the file, so
memory stays flat however long the ledger is. Importing an export into a
fresh ledger of the same agent (and blob threshold) reproduces every record and the head
hash exactly. A file without derived records may also be appended to a non-empty ledger
(re-sequenced from its next seq); one with derived records (working-memory deltas,
episodes) only into an empty ledger: they were derived by folding their own ledger from
seq 0 and would not verify after another ledger's records. Such a copy into a ledger that
already holds the file's first records, exactly (an import that was killed or interrupted
part way, after a rollover had made some of its records durable), continues after them.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Final

import blake3
import msgspec

from holon.errors import InvalidRecord, InvalidRef, UsageError
from holon.ledger.blobs import check_blob_hash
from holon.ledger.files import atomic_file, check_outside, fsync_dir, open_regular, write_atomic
from holon.ledger.frames import MAX_PAYLOAD, oversized_payload
from holon.ledger.header import check_outside_ledgers
from holon.ledger.store import Ledger
from holon.records import (
    DERIVED_KINDS,
    MAX_TS,
    MIN_TS,
    Record,
    TaskResult,
    ToolResult,
    decode_json_record,
    encode_json_record,
    encode_msgpack_record,
    ts_out_of_range,
)

__all__ = ["blobs_dir_for", "export_jsonl", "import_jsonl"]

# What the msgpack encoder raises for a record it cannot encode (as in Ledger.append).
_ENCODE_ERRORS: Final = (msgspec.EncodeError, TypeError, OverflowError, ValueError)
# The size of the pieces an export writes and an import reads.
_CHUNK: Final = 1 << 20
# An import appends its records in batches of about this many bytes of JSON lines (a
# decoded record takes several times its line): bounded memory, and few append_many calls.
_BATCH_BYTES: Final = 256 << 10
# A UTF-8 byte order mark: a file re-saved by a Windows editor starts with one.
_BOM: Final = b"\xef\xbb\xbf"

log = logging.getLogger("holon.ledger")


def blobs_dir_for(path: str | os.PathLike[str]) -> Path:
    """The directory holding the blobs of the JSONL file at ``path``: ``<path>.blobs``."""
    p = Path(path)
    return p.with_name(p.name + ".blobs")


def export_jsonl(ledger: Ledger, path: str | os.PathLike[str]) -> int:
    """Write the whole ledger to ``path`` as canonical JSONL; returns the number of records.

    The file is replaced atomically; referenced blobs go to ``<path>.blobs/<hash>``.
    Refused (UsageError, nothing written): a path inside the ledger, a path that exists
    and is not a regular file (a directory, a device such as ``/dev/null``: the atomic
    replace would swap it for a file), a symbolic link (such as ``/dev/stdout``: the
    replace would swap the link for a file), a missing parent directory.
    """
    target = Path(path)
    check_outside(ledger.path, target, what="export file")
    check_outside(ledger.path, blobs_dir_for(target), what="export blob directory")
    # Nor into another ledger: the file and its blobs would be new files in that ledger's tree.
    check_outside_ledgers(target, what="export file")
    check_outside_ledgers(blobs_dir_for(target), what="export blob directory")
    if target.is_symlink():
        # The atomic replace renames a new file over the name: the link itself would be
        # replaced, not written through (as root, `/dev/stdout` became a regular file).
        raise UsageError(
            f"{target} is a symbolic link (to {os.readlink(target)}); an export replaces its file "
            "atomically, which would replace the link, not write through it: pass the path of the "
            "file itself"
        )
    if target.exists() and not target.is_file():
        raise UsageError(
            f"{target} exists and is not a regular file; an export is written as a new file "
            f"(and {blobs_dir_for(target).name}/ beside it): pass a file path"
        )
    if not target.parent.is_dir():
        raise UsageError(f"cannot write {target}: directory {target.parent} does not exist")
    out_dir = blobs_dir_for(target)
    created = not out_dir.exists()
    count = 0
    try:
        with atomic_file(target, outside_ledger=True) as write:
            # Streamed, in pieces of ~1 MiB: memory stays flat however long the ledger is.
            blob_hashes: dict[str, None] = {}
            chunk: list[bytes] = []
            held = 0
            for record in ledger.read():
                line = encode_json_record(record) + b"\n"
                chunk.append(line)
                held += len(line)
                if held >= _CHUNK:
                    write(b"".join(chunk))
                    chunk.clear()
                    held = 0
                count += 1
                body = record.body
                if isinstance(body, ToolResult | TaskResult) and body.blob is not None:
                    blob_hashes[body.blob.hash] = None
            write(b"".join(chunk))
            if blob_hashes:
                # Durable before the JSONL file's name, which is what says the export is
                # complete: each blob's bytes synced as written, their names with one sync
                # of the directory, and a new directory's own name with one of its parent.
                out_dir.mkdir(exist_ok=True)
                for blob_hash in blob_hashes:
                    write_atomic(
                        out_dir / blob_hash, ledger.get_blob(blob_hash), sync_dir=False, outside_ledger=True
                    )
                fsync_dir(out_dir)
                if created:
                    fsync_dir(out_dir.parent)
    except BaseException:
        if created:  # an export that failed leaves nothing of its own behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return count


def import_jsonl(
    path: str | os.PathLike[str],
    ledger: Ledger,
    *,
    require_empty: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> range:
    """Append the records of a canonical JSONL file to ``ledger``; returns their new seqs.

    Every line must decode to a record, seqs must be consecutive (from 0 for a copy: a file
    holding derived records, or any file under ``require_empty``), and every referenced
    blob must be in ``<path>.blobs/`` with matching hash and size (or already in the
    ledger), and every ``ts`` in ``MIN_TS .. MAX_TS`` (as ``append`` checks; an export of
    a ledger written before that check may hold others). Otherwise InvalidRecord names
    ``line N of <file>`` and nothing is appended.
    Records are re-sequenced after the ledger's head. A file holding derived records
    is refused (UsageError) unless the ledger is empty; ``require_empty`` refuses any
    file then (a copy of an export). Both are checked after the file, so a damaged file
    is named first. The one non-empty ledger such a copy goes into is one whose records
    are exactly the file's first ones (an interrupted import of it): the rest are
    appended, and the seqs returned are theirs; a ledger holding all of them is refused
    (UsageError: nothing to import).

    The file is read twice — checked whole, then appended in batches — so memory stays
    flat however long it is; a file that is not a regular file (a pipe) is first copied
    to a temporary file. A file changed between the two reads is refused before anything
    is appended. ``progress(done, total)`` counts bytes over both reads. The seqs are
    consecutive, so they are returned as a ``range`` (a list of a million seqs took 40 MB).
    """
    source = Path(path)
    blob_dir = blobs_dir_for(source)
    with _seekable(source) as file:
        before = os.fstat(file.fileno())
        total = 2 * before.st_size
        checked = _check_lines(file, source, ledger, blob_dir, progress=progress, total=total)
        copy = checked.derived is not None or require_empty
        skip = _resumed_at(checked, ledger, source, copy=copy)
        if copy:
            _check_starts_at_zero(checked.first_seq, source)
        after = os.fstat(file.fileno())
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            raise UsageError(
                f"{source} changed while it was being checked; nothing was appended: import it again "
                "once nothing writes to it"
            )
        return _append_lines(file, source, ledger, blob_dir, skip=skip, progress=progress, total=total)


def _resumed_at(checked: _Checked, ledger: Ledger, source: Path, *, copy: bool) -> int:
    """How many of the file's records the ledger already holds (an interrupted import of a
    copy); raises when a copy goes into a ledger that is not empty otherwise."""
    head = ledger.head()[0]
    if head >= 0 and copy and checked.first_seq == 0 and checked.holds_prefix:
        # An import of this file that was interrupted: a rollover made its first records
        # durable before the kill. They are exactly the file's, so the copy goes on after them.
        if head + 1 == checked.count:
            raise UsageError(
                f"ledger {ledger.path} is not empty: it already holds every record of {source} "
                f"(head seq {head}), from an earlier import of it; there is nothing to import"
            )
        log.warning(
            "import of %s continues an interrupted import: ledger %s holds its first %d records",
            source,
            ledger.path,
            head + 1,
        )
        return head + 1
    if head >= 0 and copy:
        why = (
            f"{source} holds derived records ({checked.derived} among them), which only verify "
            "in the ledger they were folded from"
            if checked.derived is not None
            else "a copy of an export needs an empty ledger"
        )
        raise UsageError(
            f"ledger {ledger.path} is not empty (head seq {head}) and {why}; import the file into a "
            "new ledger, or add evidence records with `holon append`"
        )
    return 0


def _check_starts_at_zero(first_seq: int | None, source: Path) -> None:
    """Raise unless a copy's first line is seq 0 (or the file holds no record)."""
    if first_seq in (None, 0):
        return
    # A copy of a ledger starts at its seq 0; the consecutive-seq check cannot see
    # lines cut from the head of the file. Derived records name seqs, so they only
    # hold in the whole ledger.
    raise InvalidRecord(
        f"seq {first_seq} on the first line: an exported ledger starts at seq 0, so this file "
        f"lost its first {first_seq} record(s) (cut or edited?); import the whole export"
        if first_seq is not None and first_seq > 0
        else f"seq {first_seq} on the first line: an exported ledger starts at seq 0",
        where=f"line 1 of {source}",
        field="seq",
    )


class _Checked(msgspec.Struct, kw_only=True):
    """What the first read of an import learned of the file, kept instead of its records."""

    count: int = 0
    first_seq: int | None = None
    derived: str | None = None  # the kind of the first derived record, if any
    holds_prefix: bool = False  # the ledger's records are exactly the file's first ones


@contextmanager
def _seekable(source: Path) -> Iterator[BinaryIO]:
    """``source`` opened for reading twice: a pipe (``/dev/stdin``) is copied to a temporary file."""
    with source.open("rb") as file:
        if stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            yield file
            return
        with tempfile.TemporaryFile(prefix="holon-import-") as spool:
            shutil.copyfileobj(file, spool, _CHUNK)
            spool.seek(0)
            yield spool


def _lines(file: BinaryIO, source: Path) -> Iterator[tuple[int, bytes, int]]:
    """Each line of ``file`` from its start: (line number, line without its newline, its size).

    A leading byte order mark is not part of the first record (as holon append reads it).
    An empty line is refused: a canonical JSONL file has a record on every line.
    """
    file.seek(0)
    for number, raw in enumerate(file, 1):
        line = raw.removesuffix(b"\n")
        if number == 1:
            line = line.removeprefix(_BOM)
        if not line.strip():
            raise InvalidRecord(
                "empty line; a canonical JSONL file has one record on every line",
                where=f"line {number} of {source}",
            )
        yield number, line, len(raw)


def _check_lines(
    file: BinaryIO,
    source: Path,
    ledger: Ledger,
    blob_dir: Path,
    *,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> _Checked:
    """The first read of an import: every check, nothing kept but what :class:`_Checked` holds."""
    checked = _Checked()
    head = ledger.head()[0]
    # The ledger's own records, compared with the file's first ones as the lines go by
    # (an interrupted import of this file), until one differs.
    stored: Iterator[Record] | None = ledger.read(0, head + 1) if head >= 0 else None
    seen_blobs: set[str] = set()
    prev_seq: int | None = None
    done = 0
    for number, line, size in _lines(file, source):
        where = f"line {number} of {source}"
        record = decode_json_record(line, where=where)
        if prev_seq is not None and record.seq != prev_seq + 1:
            raise InvalidRecord(
                f"seq {record.seq} follows seq {prev_seq}; lines must hold consecutive seqs "
                "(the file was edited or cut)",
                where=where,
                field="seq",
            )
        if prev_seq is None:
            checked.first_seq = record.seq
        prev_seq = record.seq
        # Encoded here, not only by append_many, so the error names the line and no blob is
        # stored for an import that fails: JSON holds integers msgpack cannot (beyond 64
        # bits, in ts, turn or args), and a payload can be longer than its JSON line, at
        # most ~2.25x ("0.0," packs into 9 bytes).
        try:
            payload = encode_msgpack_record(record)
        except _ENCODE_ERRORS as exc:
            raise InvalidRecord(f"record cannot be stored ({exc})", where=where) from None
        if len(payload) > MAX_PAYLOAD:
            raise oversized_payload(len(payload), where=where)
        if not MIN_TS <= record.ts <= MAX_TS:
            # Refused here, as append_many would, so the error names the line.
            raise ts_out_of_range(record.ts, where=where)
        body = record.body
        blob = body.blob if isinstance(body, ToolResult | TaskResult) else None
        if blob is not None and blob.hash not in seen_blobs:
            _load_blob(blob.hash, blob.size, blob_dir, ledger=ledger, where=where)
            seen_blobs.add(blob.hash)
        if checked.derived is None and record.kind in DERIVED_KINDS:
            checked.derived = record.kind
        if stored is not None:
            # Compared as stored (the msgpack payloads the chain commits to), so a ledger
            # that moved an output to a blob where the file kept it inline is no prefix.
            held = next(stored, None)
            if held is None:
                checked.holds_prefix = True  # every stored record matched one of the file's
                stored = None
            else:
                # The line's payload, encoded above, unless its seq is not the stored one's.
                mine = (
                    payload
                    if record.seq == held.seq
                    else encode_msgpack_record(msgspec.structs.replace(record, seq=held.seq))
                )
                if encode_msgpack_record(held) != mine:
                    stored = None
        checked.count = number
        done += size
        if progress is not None:
            progress(done, total)
    if stored is not None and next(stored, None) is None:
        checked.holds_prefix = True  # the file ended with the ledger's last record
    return checked


def _append_lines(
    file: BinaryIO,
    source: Path,
    ledger: Ledger,
    blob_dir: Path,
    *,
    skip: int,
    progress: Callable[[int, int], None] | None,
    total: int,
) -> range:
    """The second read of an import: the records after the first ``skip``, appended in batches."""
    first = ledger.head()[0] + 1
    batch: list[Record] = []
    stored_blobs: set[str] = set()
    held = 0  # the batch's size as JSON lines
    done = total // 2
    for number, line, size in _lines(file, source):
        done += size
        if number <= skip:
            continue
        where = f"line {number} of {source}"
        record = decode_json_record(line, where=where)
        body = record.body
        if isinstance(body, ToolResult | TaskResult) and body.blob is not None:
            blob_hash = body.blob.hash
            if blob_hash not in stored_blobs:
                data = _load_blob(blob_hash, body.blob.size, blob_dir, ledger=ledger, where=where)
                if data is not None:
                    ledger.put_blob(data)
                stored_blobs.add(blob_hash)
        batch.append(msgspec.structs.replace(record, seq=-1))
        held += size
        if held >= _BATCH_BYTES:
            ledger.append_many(batch)
            batch.clear()
            held = 0
            if progress is not None:
                progress(done, total)
    ledger.append_many(batch)
    ledger.flush()
    if progress is not None:
        progress(total, total)
    return range(first, ledger.head()[0] + 1)


def _load_blob(blob_hash: str, size: int, blob_dir: Path, *, ledger: Ledger, where: str) -> bytes | None:
    """One referenced blob's bytes from beside the JSONL file, checked; None if the ledger has it."""
    try:
        check_blob_hash(blob_hash)
    except InvalidRef as exc:
        raise InvalidRecord(str(exc), where=where, field="body.blob.hash") from None
    try:
        data = _read_blob_file(blob_dir / blob_hash, size)
    except FileNotFoundError:
        if ledger.has_blob(blob_hash):
            # Trusted for its bytes (the store checks them on read), not for the size the
            # record states: append_many would refuse that at a seq, not at this line, after
            # the import had stored the other blobs.
            stored = ledger.blobs.size(blob_hash)
            if stored != size:
                raise InvalidRecord(
                    f"the record says blob {blob_hash} holds {size} bytes, but the ledger's copy of it "
                    f"holds {stored}; the line was edited, or belongs with other blob files",
                    where=where,
                    field="body.blob.size",
                ) from None
            return None
        raise InvalidRecord(
            f"blob {blob_hash} is referenced but {blob_dir / blob_hash} does not exist; "
            "copy the .blobs directory that came with the export",
            where=where,
            field="body.blob.hash",
        ) from None
    except OSError as exc:  # a directory, pipe or device in its place, no permission
        raise InvalidRecord(
            f"blob file {blob_dir / blob_hash} cannot be read ({exc.strerror or exc}); "
            "copy the .blobs directory that came with the export",
            where=where,
            field="body.blob.hash",
        ) from None
    actual = blake3.blake3(data).hexdigest()
    if actual != blob_hash or len(data) != size:
        held = f"{len(data)} bytes hashing to {actual}" if len(data) <= size else f"more than {size} bytes"
        raise InvalidRecord(
            f"blob file {blob_dir / blob_hash} holds {held}, "
            f"not the {size} bytes hashing to {blob_hash} the record names",
            where=where,
            field="body.blob",
        )
    return data


def _read_blob_file(path: Path, size: int) -> bytes:
    """Read a blob file of an export, at most ``size + 1`` bytes of it.

    The file may be a symlink (its bytes are checked against the hash either way), but
    must be a regular file: a pipe would block the import for ever, ``/dev/zero`` would
    fill memory. Reading one byte more than the record states is enough to tell a file
    that is too long, without reading a huge one whole.
    """
    fd = open_regular(path, os.O_RDONLY, follow_symlinks=True)
    try:
        chunks: list[bytes] = []
        left = size + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
