"""Crash-safe file primitives: atomic replace and directory fsync.

A file that must appear whole or not at all (ledger header, new segment, sealed
segment, blob) is written to ``<name>.tmp``, fsynced, renamed over its final name, and
the directory is fsynced so the rename itself survives a crash. Leftover ``.tmp``
files are debris from a crash between those steps; a writer removes them on open.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from holon.errors import UsageError

__all__ = [
    "TMP_SUFFIX",
    "atomic_file",
    "check_outside",
    "fsync_dir",
    "open_regular",
    "sync_file",
    "write_atomic",
]

TMP_SUFFIX: Final = ".tmp"


def sync_file(fd: int) -> None:
    """Make a file's data durable; fdatasync where available (file size is included)."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS/Windows
        os.fsync(fd)


def open_regular(path: Path, flags: int, mode: int = 0o644, *, follow_symlinks: bool = False) -> int:
    """``os.open`` for a file holon made: never through a symlink, and only a regular file.

    A symlink (ELOOP), a directory (EISDIR) or a pipe or device (EINVAL, opened without
    blocking) planted or copied into a ledger raises OSError: through a link, holon would
    read or overwrite whatever it points to; a pipe would block a read for ever.
    ``follow_symlinks``: a link to a regular file is opened (a file the user gave, whose
    bytes are checked after reading); still only a regular file.
    """
    fd = os.open(path, flags | (0 if follow_symlinks else os.O_NOFOLLOW) | os.O_NONBLOCK, mode)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def fsync_dir(path: Path) -> None:
    """Make directory entries (creates, renames, unlinks) in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool = True, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old state or all of it.

    ``durable``: the data and the new name survive a power loss once this returns.
    ``sync_dir=False`` leaves the name's durability to the caller, who writes many files
    into one directory and syncs it once after the last (the data is still synced).
    """
    with atomic_file(path, durable=durable, sync_dir=sync_dir) as write:
        write(data)


@contextmanager
def atomic_file(
    path: Path, *, durable: bool = True, sync_dir: bool = True
) -> Iterator[Callable[[bytes], None]]:
    """A ``write(data)`` function for ``path``: the file written replaces ``path`` when the block ends.

    What :func:`write_atomic` does for bytes held in memory, for a file written as it is
    produced (an export of a million records). The file is ``<name>.tmp`` until then; an
    exception in the block removes it and leaves ``path`` as it was. Each ``write`` is one
    or more ``os.write`` calls: callers gather small pieces into larger ones.
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)

    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:  # os.write may take part of it
            view = view[os.write(fd, view) :]

    try:
        try:
            yield write
            if durable:
                sync_file(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        # A failed write (disk full, a directory in the way) leaves no half file behind.
        tmp.unlink(missing_ok=True)
        raise
    if durable and sync_dir:
        fsync_dir(path.parent)


def check_outside(ledger_dir: Path, out: Path, *, what: str) -> None:
    """Refuse an output path inside a ledger directory (an export must never write into
    the ledger it reads: it would replace a segment, the header or a blob)."""
    root = ledger_dir.resolve()
    target = out.resolve()
    if target == root or root in target.parents:
        raise UsageError(
            f"{what} {out} is inside the ledger {ledger_dir}: writing there would damage it; "
            "choose a path outside the ledger directory"
        )
