"""The canonical JSONL form of a ledger: one record per line, blobs as files beside it.

``export_jsonl(ledger, "run.jsonl")`` writes every record exactly as stored (a moved
tool output stays a ``BlobRef`` in its record) and each referenced blob's original bytes
to ``run.jsonl.blobs/<hash>``. ``import_jsonl("run.jsonl", ledger)`` checks every line and
every blob first and appends nothing unless all are valid. Importing an export into a
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
from collections.abc import Callable
from pathlib import Path
from typing import Final

import blake3
import msgspec

from holon.errors import InvalidRecord, InvalidRef, UsageError
from holon.ledger.blobs import check_blob_hash
from holon.ledger.files import check_outside, fsync_dir, open_regular, write_atomic
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
    lines: list[bytes] = []
    blob_hashes: list[str] = []
    for record in ledger.read():
        lines.append(encode_json_record(record) + b"\n")
        body = record.body
        if isinstance(body, ToolResult | TaskResult) and body.blob is not None:
            blob_hashes.append(body.blob.hash)
    out_dir = blobs_dir_for(target)
    created = bool(blob_hashes) and not out_dir.exists()
    try:
        if blob_hashes:
            out_dir.mkdir(exist_ok=True)
            # Durable before the JSONL file, which is what says the export is complete:
            # each blob's bytes synced as written, their names with one sync of the
            # directory, and a new directory's own name with one of its parent.
            for blob_hash in dict.fromkeys(blob_hashes):
                write_atomic(out_dir / blob_hash, ledger.get_blob(blob_hash), sync_dir=False)
            fsync_dir(out_dir)
            if created:
                fsync_dir(out_dir.parent)
        write_atomic(target, b"".join(lines))
    except BaseException:
        if created:  # an export that failed leaves nothing of its own behind
            shutil.rmtree(out_dir, ignore_errors=True)
        raise
    return len(lines)


def import_jsonl(
    path: str | os.PathLike[str],
    ledger: Ledger,
    *,
    require_empty: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[int]:
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
    (UsageError: nothing to import). ``progress(done, total)`` is
    called as lines are checked (the slow part); the append follows the last call.
    """
    source = Path(path)
    blob_dir = blobs_dir_for(source)
    # A leading byte order mark is not part of the first record (as holon append reads it).
    raw = source.read_bytes().removeprefix(_BOM)
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    records: list[Record] = []
    blobs: dict[str, bytes] = {}
    prev_seq: int | None = None
    first_seq: int | None = None
    for number, line in enumerate(lines, 1):
        where = f"line {number} of {source}"
        if not line.strip():
            raise InvalidRecord(
                "empty line; a canonical JSONL file has one record on every line", where=where
            )
        record = decode_json_record(line, where=where)
        if prev_seq is not None and record.seq != prev_seq + 1:
            raise InvalidRecord(
                f"seq {record.seq} follows seq {prev_seq}; lines must hold consecutive seqs "
                "(the file was edited or cut)",
                where=where,
                field="seq",
            )
        if prev_seq is None:
            first_seq = record.seq
        prev_seq = record.seq
        # Encoded here, not only by append_many, so the error names the line and no blob is
        # stored for an import that fails: JSON holds integers msgpack cannot (beyond 64
        # bits, in ts, turn or args), and a payload can be longer than its JSON line, at
        # most ~2.25x ("0.0," packs into 9 bytes).
        try:
            size = len(encode_msgpack_record(record))
        except _ENCODE_ERRORS as exc:
            raise InvalidRecord(f"record cannot be stored ({exc})", where=where) from None
        if size > MAX_PAYLOAD:
            raise oversized_payload(size, where=where)
        if not MIN_TS <= record.ts <= MAX_TS:
            # Refused here, as append_many would, so the error names the line.
            raise ts_out_of_range(record.ts, where=where)
        body = record.body
        if isinstance(body, ToolResult | TaskResult) and body.blob is not None:
            _load_blob(body.blob.hash, body.blob.size, blob_dir, ledger=ledger, blobs=blobs, where=where)
        records.append(msgspec.structs.replace(record, seq=-1))
        if progress is not None:
            progress(number, len(lines))
    head = ledger.head()[0]
    derived = next((rec for rec in records if rec.kind in DERIVED_KINDS), None)
    copy = derived is not None or require_empty
    if head >= 0 and copy and first_seq == 0 and _holds_prefix(ledger, records, head):
        # An import of this file that was interrupted: a rollover made its first records
        # durable before the kill. They are exactly the file's, so the copy goes on after them.
        if head + 1 == len(records):
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
        records = records[head + 1 :]
    elif head >= 0 and copy:
        why = (
            f"{source} holds derived records ({derived.kind} among them), which only verify in the "
            "ledger they were folded from"
            if derived is not None
            else "a copy of an export needs an empty ledger"
        )
        raise UsageError(
            f"ledger {ledger.path} is not empty (head seq {head}) and {why}; import the file into a new "
            "ledger, or add evidence records with `holon append`"
        )
    if first_seq not in (None, 0) and copy:
        # A copy of a ledger starts at its seq 0; the consecutive-seq check above cannot see
        # lines cut from the head of the file. Derived records name seqs, so they only hold
        # in the whole ledger.
        raise InvalidRecord(
            f"seq {first_seq} on the first line: an exported ledger starts at seq 0, so this file lost "
            f"its first {first_seq} record(s) (cut or edited?); import the whole export"
            if first_seq is not None and first_seq > 0
            else f"seq {first_seq} on the first line: an exported ledger starts at seq 0",
            where=f"line 1 of {source}",
            field="seq",
        )
    for data in blobs.values():
        ledger.put_blob(data)
    seqs = ledger.append_many(records)
    ledger.flush()
    return seqs


def _holds_prefix(ledger: Ledger, records: list[Record], head: int) -> bool:
    """Whether the ledger's records ``0..head`` are exactly the first ``head + 1`` of ``records``.

    Compared as stored (the msgpack payloads the chain commits to), so a ledger that moved
    an output to a blob where the file kept it inline is not taken for a prefix.
    """
    if head >= len(records):
        return False
    for stored, record in zip(ledger.read(0, head + 1), records, strict=False):
        if encode_msgpack_record(stored) != encode_msgpack_record(
            msgspec.structs.replace(record, seq=stored.seq)
        ):
            return False
    return True


def _load_blob(
    blob_hash: str, size: int, blob_dir: Path, *, ledger: Ledger, blobs: dict[str, bytes], where: str
) -> None:
    """Read and check one referenced blob from beside the JSONL file (or find it in the ledger)."""
    if blob_hash in blobs:
        return
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
            return
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
    blobs[blob_hash] = data


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
