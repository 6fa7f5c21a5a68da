"""How a command fails: the exit codes, and the failures shown as one line on stderr
(``holon: error: ...``, a JSON object under ``--json``).

Of the package it imports only :mod:`holon.cli.printing`.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, Final

import click
import msgspec

from holon.cli.printing import _printable, _silence, _visible
from holon.errors import HolonError, LedgerCorrupt, LedgerLocked
from holon.ledger import TMP_SUFFIX

EXIT_OK: Final = 0
EXIT_CHECK_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_CORRUPT: Final = 3
EXIT_INTERNAL: Final = 70
# sysexits' EX_IOERR: the system refused a read or write (a full disk, a read-only file system).
EXIT_SYSTEM: Final = 74
# 128 + SIGINT, as a shell reports a command that Ctrl-C stopped.
EXIT_INTERRUPTED: Final = 130


class _Failure(click.ClickException):
    """A failure shown as one line on stderr (``holon: error: ...``); subclasses set the exit code.

    Under ``--json`` the line is a JSON object instead, for the script that asked for
    JSON: ``{"error": {"exit_code", "kind", "type", "message"}}``, ``type`` naming the
    error class (``NotALedger``, ``LedgerCorrupt``, ``UsageError``, ...).
    """

    exit_code = EXIT_USAGE
    prefix = "error"

    def __init__(self, message: str, *, error_type: str | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type or type(self).__name__
        self.as_json = False

    def show(self, file: Any = None) -> None:
        message = _printable(self.format_message())
        if self.as_json:
            error = {
                "exit_code": self.exit_code,
                "kind": self.prefix,
                "type": self.error_type,
                "message": message,
            }
            line = msgspec.json.encode({"error": error}).decode()
        else:
            line = _visible(f"holon: {self.prefix}: {message}")
        try:
            click.echo(line, err=True)
        except BrokenPipeError:
            # Nobody reads stderr (`holon verify L 2>&1 | head -1`): the exit code still
            # tells, where an escaping exception would end the process with 1 ("a check failed").
            _silence(sys.stderr)


class CheckFailed(_Failure):
    """A check a command was asked to make did not hold (exit code 1)."""

    exit_code = EXIT_CHECK_FAILED
    prefix = "check failed"


class _Usage(_Failure):
    """A click usage error (unknown option, missing argument, bad value), shown as one line."""

    prefix = "usage error"


class _Corrupt(_Failure):
    exit_code = EXIT_CORRUPT


class _Internal(_Failure):
    exit_code = EXIT_INTERNAL


class _Interrupted(_Failure):
    exit_code = EXIT_INTERRUPTED


class _System(_Failure):
    exit_code = EXIT_SYSTEM


_FAILURES: Final[dict[int, type[_Failure]]] = {
    EXIT_CHECK_FAILED: CheckFailed,
    EXIT_USAGE: _Failure,
    EXIT_CORRUPT: _Corrupt,
    EXIT_INTERNAL: _Internal,
    EXIT_SYSTEM: _System,
}

# What the system says when it cannot store or read what holon asked it to, whatever the
# input: the cause is the machine's, and the advice is to fix that (exit EXIT_SYSTEM).
_SYSTEM_ADVICE: Final[dict[int, str]] = {
    errno.ENOSPC: "no space left on the device: free some space, then run the command again",
    errno.EDQUOT: "disk quota exceeded: free some space within your quota (or have it raised), then run "
    "the command again",
    errno.EROFS: "read-only file system: a command that writes needs the ledger (and its output) on a "
    "writable one; remount it read-write or copy the ledger elsewhere (read commands work on it as it is)",
    errno.EIO: "input/output error: the device failed to read or write; check it (dmesg) before trusting "
    "what it holds, and run `holon verify` on the ledger",
}
# Permissions: the user pointed at something they may not write (or read): exit EXIT_USAGE.
_PERMISSION_ADVICE: Final = (
    "permission denied: check the owner and permissions of the file and its directory (ls -l); "
    "a ledger is written by the user who owns it"
)


def _os_error_message(exc: OSError) -> str:
    """One line for an OSError: its cause and what to do, for the errors the system causes.

    The file named is the one meant: an atomic write names its temporary ``<file>.tmp``,
    which the failed write removed.
    """
    file = exc.filename
    if isinstance(file, str) and file.endswith(TMP_SUFFIX) and not os.path.lexists(file):
        file = file.removesuffix(TMP_SUFFIX)
    advice = _SYSTEM_ADVICE.get(exc.errno or 0)
    if advice is None and exc.errno in (errno.EACCES, errno.EPERM):
        advice = _PERMISSION_ADVICE
    if advice is None:
        where = f"{file}: " if file else ""
        return f"{where}{exc.strerror or exc}"
    return f"{advice} ({file})" if file else advice


def exit_code_for(exc: BaseException) -> int:
    """The exit code of an error: 3 for a corrupt or locked ledger, 74 for a full disk or a
    read-only file system, 2 for other holon errors and other OSErrors, 70 for a bug."""
    if isinstance(exc, LedgerCorrupt | LedgerLocked):
        return EXIT_CORRUPT
    if isinstance(exc, OSError) and exc.errno in _SYSTEM_ADVICE:
        return EXIT_SYSTEM
    if isinstance(exc, HolonError | OSError):
        return EXIT_USAGE
    return EXIT_INTERNAL


_VERIFY_ADVICE: Final = "; run `holon verify` for a full report"


def _failure_for(exc: Exception, command: str) -> _Failure:
    """The failure an error escaping the body of the command named ``command`` is shown as.

    Its exit code is :func:`exit_code_for`'s; its one line says what happened and what to do,
    in the words of the command that was run.
    """
    code = exit_code_for(exc)
    if isinstance(exc, OSError):
        message = _os_error_message(exc)
    elif code == EXIT_INTERNAL:
        message = (
            f"internal error {type(exc).__name__}: {exc} — this is a bug in holon; "
            "rerun with --debug and report the traceback"
        )
    else:
        message = str(exc)
        if isinstance(exc, LedgerCorrupt) and command == "verify":
            # verify stopped here: pointing at verify again says nothing.
            message = message.removesuffix(_VERIFY_ADVICE)
        elif isinstance(exc, LedgerLocked) and exc.advice == LedgerLocked.ADVICE:
            # Only writing commands take the lock; "open it read-only" is the library's
            # advice, not something `holon append` can do. Other advice is the
            # library's own for the case (`holon repair` beside a writer rolling over).
            message = str(
                exc.with_advice(
                    f"holon {command} writes to it: wait for that process "
                    "to finish or stop it first (read commands such as holon memory, holon "
                    "render and holon verify work beside it)"
                )
            )
    return _FAILURES[code](message, error_type=type(exc).__name__)
