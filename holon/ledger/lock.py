"""The single-writer lock: an OS file lock on ``holon-ledger.lock`` holding the writer's pid."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path
from typing import Final

from holon.errors import LedgerCorrupt, LedgerLocked
from holon.ledger.files import open_regular

__all__ = ["LOCK_NAME", "WriterLock", "holder_pid"]

LOCK_NAME: Final = "holon-ledger.lock"


class WriterLock:
    """An exclusive ``flock`` on the ledger's lock file, released on close or process death.

    flock locks belong to the open file description, so a second writer in the same
    process is refused just like one in another process, and the kernel drops the lock
    when the holder dies (a ``kill -9`` never leaves a stale lock behind).
    """

    def __init__(self, ledger_dir: Path) -> None:
        self.path = ledger_dir / LOCK_NAME
        try:
            # Not through a symlink: the pid is written over the file's contents, and a link
            # planted in a ledger (or copied into one) would have them truncated wherever it
            # points.
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.EINVAL):
                raise
            raise LedgerCorrupt(
                "the writer lock file is a symlink, a directory or another non-file, not a file holon "
                f"made; remove it (holon creates it again) ({exc.strerror})",
                file=str(self.path),
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            raise LedgerLocked(str(ledger_dir), pid) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            # The pid is informational (for the LedgerLocked message); the flock is the lock.
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            # A full disk fails the write: without the close, the descriptor (and with it
            # the flock) stayed open for the life of the process, which then found the
            # ledger "locked by another process" at every later open.
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise
        self._fd: int | None = fd

    def release(self) -> None:
        """Release the lock (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)


def holder_pid(ledger_dir: Path) -> int | None:
    """The pid the lock file names, read without locking it (a reader must not take the
    lock, even shared: a writer starting meanwhile would be refused). Informational only:
    a writer killed with ``kill -9`` leaves its pid behind."""
    try:
        fd = open_regular(ledger_dir / LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        return _read_pid(fd)
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    """The pid the current holder wrote, if readable."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
