"""Crash-safe file primitives: atomic replace and directory fsync.

A file that must appear whole or not at all (ledger header, new segment, sealed
segment, blob) is written to ``<name>.tmp``, fsynced, renamed over its final name, and
the directory is fsynced so the rename itself survives a crash. Leftover ``.tmp``
files are debris from a crash between those steps; a writer removes them on open.

holon never makes a symbolic link in a ledger, and never goes through one there: every
file it writes, truncates or renames over is opened without following a link, and a
link where holon keeps a file or a directory is refused by name (:func:`link_refused`):
through it, holon would write, truncate or clean up whatever it points to, outside the
ledger. That guards against a link planted in a ledger or copied into one (``cp -s``, an
archive restored with its links), not against a process racing holon with write access
to the ledger directory, which can damage it in any case.
"""

from __future__ import annotations

import errno
import os
import shlex
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from holon.errors import LedgerCorrupt, UsageError

__all__ = [
    "COPY_BACK",
    "DEBRIS",
    "TMP_SUFFIX",
    "atomic_file",
    "check_outside",
    "fsync_dir",
    "link_refused",
    "open_ledger_file",
    "open_regular",
    "read_ledger_file",
    "real_dir",
    "refuse_link",
    "sync_file",
    "write_atomic",
]

TMP_SUFFIX: Final = ".tmp"
#: What to do about a link where a file or directory holding ledger data belongs.
COPY_BACK: Final = (
    "if what it points to is this ledger's, put a copy of it in the link's place ({copy}); "
    "otherwise restore it from a backup"
)
#: What to do about a link where holon writes a temporary file.
DEBRIS: Final = "remove the link (holon writes a temporary file there and removes it again)"


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


def link_refused(path: Path, what: str, remedy: str = COPY_BACK) -> LedgerCorrupt:
    """LedgerCorrupt for a symbolic link at ``path``, where holon keeps ``what``.

    ``remedy`` says what to do; ``{copy}`` in it becomes the shell command that replaces
    the link by a copy of its target.
    """
    try:
        target = os.path.normpath(path.parent / os.readlink(path))
    except OSError:  # gone since it was seen: still a link where none belongs
        target = "?"
    copy = f"rm {shlex.quote(str(path))} && cp -a {shlex.quote(target)} {shlex.quote(str(path))}"
    return LedgerCorrupt(
        f"{what} is a symbolic link (to {target}); holon never makes one in a ledger (through it, a "
        "writer would write to or remove what it points to, outside the ledger), so it is refused and "
        "nothing was changed: " + remedy.format(copy=copy),
        file=str(path),
    )


def refuse_link(path: Path, what: str, remedy: str = COPY_BACK) -> None:
    """Raise :func:`link_refused` if ``path`` is a symbolic link (a missing path is fine)."""
    if os.path.islink(path):
        raise link_refused(path, what, remedy)


def real_dir(path: Path, what: str, remedy: str = COPY_BACK) -> bool:
    """Whether the directory ``path`` exists; a symbolic link there raises :func:`link_refused`.

    For a directory holon creates files in, renames over or removes from: through a link to
    a directory, holon would do that to the directory it points to. Anything else at
    ``path`` (a file) answers False, and making the directory then fails naming it.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise link_refused(path, what, remedy)
    return stat.S_ISDIR(mode)


def open_ledger_file(path: Path, flags: int, mode: int = 0o644, *, what: str, remedy: str = COPY_BACK) -> int:
    """:func:`open_regular` for a file of a ledger: a link or non-file there is LedgerCorrupt.

    A missing file (FileNotFoundError) and the system's refusals (a full disk, permissions)
    are raised as they are.
    """
    try:
        return open_regular(path, flags, mode)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.EINVAL, errno.ENXIO):
            raise
        if os.path.islink(path):
            raise link_refused(path, what, remedy) from None
        raise LedgerCorrupt(
            f"{what} is not a regular file (a directory, a pipe or a device), which holon never makes "
            "there, so nothing was changed: move it away (and restore the file from a backup if it "
            "held this ledger's data)",
            file=str(path),
        ) from None


def read_ledger_file(path: Path, *, what: str, remedy: str = COPY_BACK) -> bytes:
    """The bytes of a file of a ledger, opened as :func:`open_ledger_file` opens it."""
    with os.fdopen(open_ledger_file(path, os.O_RDONLY, what=what, remedy=remedy), "rb") as stream:
        return stream.read()


def fsync_dir(path: Path) -> None:
    """Make directory entries (creates, renames, unlinks) in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    durable: bool = True,
    sync_dir: bool = True,
    what: str = "a file of the ledger",
    replace_link: bool = False,
    outside_ledger: bool = False,
) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old state or all of it.

    ``durable``: the data and the new name survive a power loss once this returns.
    ``sync_dir=False`` leaves the name's durability to the caller, who writes many files
    into one directory and syncs it once after the last (the data is still synced).
    ``what``, ``replace_link`` and ``outside_ledger``: see :func:`atomic_file`.
    """
    with atomic_file(
        path,
        durable=durable,
        sync_dir=sync_dir,
        what=what,
        replace_link=replace_link,
        outside_ledger=outside_ledger,
    ) as write:
        write(data)


@contextmanager
def atomic_file(
    path: Path,
    *,
    durable: bool = True,
    sync_dir: bool = True,
    what: str = "a file of the ledger",
    replace_link: bool = False,
    outside_ledger: bool = False,
) -> Iterator[Callable[[bytes], None]]:
    """A ``write(data)`` function for ``path``: the file written replaces ``path`` when the block ends.

    What :func:`write_atomic` does for bytes held in memory, for a file written as it is
    produced (an export of a million records). The file is ``<name>.tmp`` until then; an
    exception in the block removes it and leaves ``path`` as it was. Each ``write`` is one
    or more ``os.write`` calls: callers gather small pieces into larger ones.

    The temporary file is opened without following a link (O_NOFOLLOW), which would have it
    truncated and overwritten wherever it points. For a file of a ledger (``what`` names it
    in errors) a link at the temporary name, or at ``path`` unless ``replace_link`` (the
    rename replaces the link, never what it points to: the blob store's repair of a damaged
    blob), is LedgerCorrupt naming it, with nothing written. ``outside_ledger`` (an export,
    whose caller checks ``path`` itself): a link at the temporary name is an OSError (ELOOP).
    """
    tmp = path.with_name(path.name + TMP_SUFFIX)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    if outside_ledger:
        fd = open_regular(tmp, flags)
    else:
        if not replace_link:
            refuse_link(path, what)
        fd = open_ledger_file(tmp, flags, what=f"the temporary file of {what}", remedy=DEBRIS)

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
