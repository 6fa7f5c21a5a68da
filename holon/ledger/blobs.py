"""The content-addressed blob store: large payloads kept out of ledger frames.

A blob is stored once, zstd-compressed, under its lowercase blake3 hex digest with a
two-character fan-out directory: ``blobs/ab/ab12…ef``. Reading decompresses and checks
the digest, so a damaged blob is an error naming its file, never wrong bytes.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import blake3

from holon.errors import InvalidRef, LedgerCorrupt, RefNotFound
from holon.ledger.compression import compress, decompress
from holon.ledger.files import (
    DEBRIS,
    TMP_SUFFIX,
    fsync_dir,
    link_refused,
    open_regular,
    real_dir,
    write_atomic,
)
from holon.records import BlobRef

__all__ = ["BLOB_PREVIEW_CHARS", "BlobStore", "blob_hash", "check_blob_hash", "is_dotfile"]

log = logging.getLogger("holon.ledger")

_HASH_RE: Final = re.compile(r"[0-9a-f]{64}")
# Blob sizes a store remembers (see BlobStore.size): enough for any recent output.
_SIZES_KEPT: Final = 4096
#: Characters of a moved output kept inline in the record as ``BlobRef.preview``.
BLOB_PREVIEW_CHARS: Final = 200
_ZSTD_LEVEL: Final = 3
_STORE: Final = "the blob store directory"
_FAN: Final = "a fan-out directory of the blob store"


def blob_hash(data: bytes) -> str:
    """The name ``data`` is stored under as a blob: its lowercase blake3 hex digest (``BlobRef.hash``)."""
    return blake3.blake3(data).hexdigest()


def check_blob_hash(blob_hash: object) -> str:
    """Return ``blob_hash`` if it is a well-formed blob name, else raise InvalidRef.

    Only 64 lowercase hex characters are accepted, so no name can contain a path
    separator, ``..`` or anything else that could leave the store.
    """
    if not isinstance(blob_hash, str) or _HASH_RE.fullmatch(blob_hash) is None:
        raise InvalidRef(
            f"malformed blob hash {blob_hash!r}: expected 64 lowercase hex characters "
            "(a blake3 digest), as in a record's BlobRef.hash"
        )
    return blob_hash


def is_dotfile(name: str) -> bool:
    """Whether a name in the blob store is a dotfile: never a blob, never written by holon.

    A file manager or file system puts such files in any directory it touches (macOS
    Finder's ``.DS_Store``, AppleDouble ``._<name>`` files on a non-Mac volume, NFS's
    ``.nfs…``, Spotlight's ``.Spotlight-V100``); ``verify()`` skips them. Any other name
    that is not a blob's stays a problem it reports: that may be a damaged or misnamed blob.
    """
    return name.startswith(".")


class BlobStore:
    """Puts and gets blobs under one ledger's ``blobs/`` directory."""

    def __init__(self, root: Path, *, durable: bool) -> None:
        self.root = root
        self._durable = durable
        # Sizes of blobs this store wrote or checked, newest last: a record naming one of
        # them (the runtime stores an output, then appends its BlobRef) has its size
        # checked without reading the blob back.
        self._sizes: dict[str, int] = {}

    def path_of(self, blob_hash: str) -> Path:
        """Where the blob named ``blob_hash`` lives (the hash must be well-formed)."""
        check_blob_hash(blob_hash)
        return self.root / blob_hash[:2] / blob_hash

    def put(self, data: bytes, *, preview: str = "", tail: str = "") -> BlobRef:
        """Store ``data`` (once: identical bytes share one file) and return its reference."""
        return self.store(data, preview=preview, tail=tail)[0]

    def store(self, data: bytes, *, preview: str = "", tail: str = "") -> tuple[BlobRef, bool]:
        """:meth:`put`, also saying whether the file is new (it was not stored before)."""
        blob_hash = blake3.blake3(data).hexdigest()
        path = self.path_of(blob_hash)
        ref = BlobRef(hash=blob_hash, size=len(data), preview=preview, tail=tail)
        # Not into a directory through a link: the blob would be written where it points.
        store_there = real_dir(self.root, _STORE)
        fan_there = store_there and real_dir(path.parent, _FAN)
        self._remember(blob_hash, len(data))
        if path.exists():
            problem = self._damage(path, data)
            if problem is None:
                return ref, False
            # The file under this name does not hold these bytes: a crash under fsync "never"
            # can leave an empty or partial file behind a durable rename. Keeping it would
            # acknowledge a record whose blob can never be read; these bytes repair it (for
            # the records that already name it, too). Not new: a refused append keeps it.
            log.warning("blob store: replacing damaged blob file %s (%s)", path, problem)
            self._write(path, data)
            return ref, False
        if not fan_there:
            self._make_fan(path.parent)
        self._write(path, data)
        return ref, True

    def _write(self, path: Path, data: bytes) -> None:
        # A link under the blob's name is replaced (the link, never what it points to): it is
        # a damaged blob file (get() refuses it), and these bytes repair it.
        write_atomic(
            path,
            compress(data, level=_ZSTD_LEVEL),
            durable=self._durable,
            what="a blob file",
            replace_link=True,
        )

    @staticmethod
    def _damage(path: Path, data: bytes) -> str | None:
        """What is wrong with the stored file ``path`` that should hold ``data``; None if nothing."""
        try:
            stored = decompress(_read_regular(path), file=str(path))
        except LedgerCorrupt as exc:
            return exc.detail
        except OSError as exc:
            return f"cannot be read: {exc.strerror or exc}"
        return None if stored == data else "holds other bytes"

    def _make_fan(self, fan: Path) -> None:
        """Create a fan-out directory whose entry, like the blob's, survives a crash.

        write_atomic makes the blob's name durable in ``fan``; ``fan``'s own name in the
        store (and the store's, if it was missing) needs its parent synced too, or a crash
        can take the directory, and the blob an acknowledged record names, with it.
        """
        # parents: blobs/ itself may be missing from a ledger that was copied by a tool that
        # drops empty directories (git, some archivers) before its first blob.
        store_missing = not self.root.is_dir()
        fan.mkdir(parents=True, exist_ok=True)
        if self._durable:
            fsync_dir(self.root)
            if store_missing:
                fsync_dir(self.root.parent)

    def discard(self, blob_hash: str) -> None:
        """Remove a blob no record refers to: one stored for an append that was then refused.

        Only the writer calls this, for blobs it created in that same append, so no
        record, written or pending, can name it.
        """
        self.path_of(blob_hash).unlink(missing_ok=True)

    def size(self, blob_hash: str) -> int:
        """The size in bytes of the stored blob ``blob_hash`` (read and checked if not known)."""
        known = self._sizes.get(blob_hash)
        if known is None:
            known = len(self.get(blob_hash))
            self._remember(blob_hash, known)
        return known

    def _remember(self, blob_hash: str, size: int) -> None:
        if blob_hash not in self._sizes and len(self._sizes) >= _SIZES_KEPT:
            del self._sizes[next(iter(self._sizes))]
        self._sizes[blob_hash] = size

    def contains(self, blob_hash: str) -> bool:
        """True when a blob with this (well-formed) hash is stored."""
        return self.path_of(blob_hash).exists()

    def get(self, blob_hash: str) -> bytes:
        """The original bytes of a blob, checked against its hash.

        Raises InvalidRef (malformed hash), RefNotFound (no such blob) or LedgerCorrupt
        (the stored file does not decompress to bytes with that hash).
        """
        path = self.path_of(blob_hash)
        try:
            compressed = _read_regular(path)
        except FileNotFoundError:
            raise RefNotFound(
                f"blob {blob_hash} is not in the blob store {self.root}; "
                "check the hash, or import the blob files that came with an exported ledger"
            ) from None
        except OSError as exc:
            # A directory, a symlink, a device under a blob's name, an unreadable file: the
            # store is damaged there, and the caller gets the file, not an OSError.
            why = "a symlink, not a file holon wrote" if path.is_symlink() else (exc.strerror or str(exc))
            raise LedgerCorrupt(
                f"blob file cannot be read ({why}); restore it from a backup", file=str(path)
            ) from None
        try:
            data = decompress(compressed, file=str(path))
        except LedgerCorrupt as exc:
            raise LedgerCorrupt(
                f"blob does not decompress ({exc.detail})", file=str(path), offset=exc.offset
            ) from None
        actual = blake3.blake3(data).hexdigest()
        if actual != blob_hash:
            raise LedgerCorrupt(
                f"blob content hashes to {actual}, not to its name {blob_hash}", file=str(path), offset=0
            )
        return data

    def hashes(self, skipped: list[Path] | None = None) -> Iterator[tuple[str, Path]]:
        """Every entry of the store as ``(name, path)``, ``.tmp`` debris and dotfiles aside.

        That is each blob, and whatever else is there for ``verify()`` to report: entries
        with malformed names, blobs in the wrong fan-out directory (``path`` is then not
        :meth:`path_of` ``name``), entries directly in the store's root (a link to a
        directory among them, as itself). Entries whose
        names start with a dot (:func:`is_dotfile`) go to ``skipped`` instead, a hidden
        directory as itself (not what it holds).
        """
        if not self.root.is_dir():
            return
        for fan in sorted(os.listdir(self.root)):
            fan_dir = self.root / fan
            if is_dotfile(fan):
                if skipped is not None:
                    skipped.append(fan_dir)
                continue
            if fan_dir.is_symlink() or not fan_dir.is_dir():  # a link to a directory is not looked into
                yield fan, fan_dir
                continue
            for name in sorted(os.listdir(fan_dir)):
                if is_dotfile(name):
                    if skipped is not None:
                        skipped.append(fan_dir / name)
                elif not name.endswith(TMP_SUFFIX):
                    yield name, fan_dir / name

    def debris(self) -> list[Path]:
        """The ``.tmp`` files a crash mid-put left, changing nothing.

        A fan-out directory, the store itself or a ``.tmp`` name that is a symbolic link is
        LedgerCorrupt naming it: removing debris through a link to a directory would remove
        files of the directory it points to.
        """
        found: list[Path] = []
        if not real_dir(self.root, _STORE):
            return found
        with os.scandir(self.root) as fans:
            fan_dirs = [
                Path(entry.path) for entry in fans if not is_dotfile(entry.name) and self._fan_dir(entry)
            ]
        for fan_dir in fan_dirs:
            with os.scandir(fan_dir) as entries:
                for entry in entries:
                    if entry.name.endswith(TMP_SUFFIX):
                        if entry.is_symlink():
                            raise link_refused(Path(entry.path), "a temporary file of the blob store", DEBRIS)
                        found.append(Path(entry.path))
        return found

    @staticmethod
    def _fan_dir(entry: os.DirEntry[str]) -> bool:
        """Whether an entry of the store is a fan-out directory (one that is a link raises)."""
        if entry.is_symlink():
            raise link_refused(Path(entry.path), _FAN)
        return entry.is_dir()  # not holon's otherwise: nothing in it is debris of a put

    def remove_debris(self, found: list[Path] | None = None) -> list[Path]:
        """Delete the ``.tmp`` files a crash mid-put left (``found`` by :meth:`debris`, or
        found now); returns what was removed."""
        removed = self.debris() if found is None else found
        for path in removed:
            path.unlink()
        for fan_dir in sorted({path.parent for path in removed}):
            fsync_dir(fan_dir)
        return removed


def _read_regular(path: Path) -> bytes:
    """The bytes of the blob file ``path``, a regular file read without following a link
    (:func:`~holon.ledger.files.open_regular`): a link could point reads anywhere, or at
    ``/dev/zero``, before the hash check could refuse what it read."""
    with os.fdopen(open_regular(path, os.O_RDONLY), "rb") as stream:
        return stream.read()
