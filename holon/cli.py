"""The ``holon`` command line: create, fill, replay, render and inspect ledgers.

Every command is a thin layer over the public library — :mod:`holon.ledger`,
:mod:`holon.importers`, :mod:`holon.projections`, :mod:`holon.context`, and the edge
modules :mod:`holon.replay` and :mod:`holon.search` — that parses options and prints.

Conventions (docs/cli.md is generated from the ``--help`` texts below):

- every command takes ``--json`` (output for scripts) and prints readable text otherwise;
- read commands open the ledger read-only (no lock, no repair, no write);
- long passes (replay, import, verify, export) show a progress bar on a terminal only (not TERM=dumb);
- errors are one line on stderr (``--debug`` adds the traceback; under ``--json`` the
  line is a JSON object); exit codes:
  0 ok, 1 a check failed, 2 usage or bad input, 3 the ledger is corrupt or locked,
  70 an internal error (a bug), 74 the system refused a read or write (a full disk, a
  read-only file system), 130 interrupted (Ctrl-C).

Central error handling lives in :class:`HolonGroup`, so commands registered from other
modules (``holon audit``) get the same exit codes and one-line messages.
"""

from __future__ import annotations

import base64
import difflib
import errno
import importlib
import io
import logging
import os
import re
import shlex
import sys
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click
import msgspec
from click.core import ParameterSource

# Only what the option declarations and the error handling need is imported here, from
# modules that are light (the layer packages load their modules on first use): each
# command imports the library it runs, so `holon --help` and `holon --version` load no
# ledger store, renderer, importer or DuckDB (tests/test_cli_start.py, `python -m
# benchmarks cli_start`).
from holon._version import __version__
from holon.context import DEFAULT_BUDGET, DEFAULT_ESTIMATOR, available_estimators
from holon.errors import BudgetExceeded, HolonError, InvalidRecord, LedgerCorrupt, LedgerLocked, UsageError
from holon.importers import FORMATS, IMPORTERS
from holon.ledger import DEFAULT_BLOB_THRESHOLD, SETTING_RANGES, TMP_SUFFIX
from holon.progress import progress_callback, progress_items, progress_total, stderr_is_terminal

if TYPE_CHECKING:
    import holon.records as r
    from holon.ledger import DamagedTail, Ledger, VerifyReport
    from holon.projections import ProjectionConfig, ProjectionState, VerificationReport
    from holon.replay import Checkpoints, PromptAt, PromptCheck, PromptsSummary, Reader, Replay, TurnReplay

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_CORRUPT",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_SYSTEM",
    "EXIT_USAGE",
    "CheckFailed",
    "HolonGroup",
    "main",
]

EXIT_OK: Final = 0
EXIT_CHECK_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_CORRUPT: Final = 3
EXIT_INTERNAL: Final = 70
# sysexits' EX_IOERR: the system refused a read or write (a full disk, a read-only file system).
EXIT_SYSTEM: Final = 74
# 128 + SIGINT, as a shell reports a command that Ctrl-C stopped.
EXIT_INTERRUPTED: Final = 130

# A ceiling for token options: far above any real window, and well inside the 64-bit
# integers a recorded render config is encoded with.
_MAX_TOKENS: Final = 1_000_000_000
_DEBUG_KEY: Final = "holon.debug"
_COMMAND_KEY: Final = "holon.command"
_JSON_KEY: Final = "holon.json"
_ARGS_KEY: Final = "holon.args"
_VERIFY_ADVICE: Final = "; run `holon verify` for a full report"


# --------------------------------------------------------------------------- errors


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


def _printable(text: str) -> str:
    """``text`` with the undecodable bytes of a file name as ``\\xNN`` escapes.

    A path that is not UTF-8 reaches Python as a str holding lone surrogates
    (``bad\\udcffname``), which no JSON encoder and no strict UTF-8 stream accepts.
    """
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that no undecodable byte stands for
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _printable_tree(value: Any) -> Any:
    """A builtin JSON value with :func:`_printable` applied to every string in it."""
    if isinstance(value, str):
        return _printable(value)
    if isinstance(value, dict):
        return {_printable_tree(k): _printable_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_printable_tree(v) for v in value]
    return value


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


_LINE_BREAKS: Final = re.compile(r"[ \t]*[\r\n]+\s*")


def _usage(exc: click.UsageError, ctx: click.Context) -> _Usage:
    """One line for a click usage error: the message, and which ``--help`` to read.

    ``exc.ctx`` is the context of the command whose arguments were wrong; an error raised
    in a command's body may carry none, and then the command being run is named.
    """
    if exc.ctx is not None:
        names = []
        at: click.Context | None = exc.ctx
        while at is not None:
            names.append(at.command.name or "holon")
            at = at.parent
        where = " ".join(reversed(names))
    else:
        command = ctx.meta.get(_COMMAND_KEY)
        where = f"{ctx.command.name} {command}" if command else str(ctx.command.name)
    # click lists a missing Choice option's values a line each ("Choose from:\n\tjsonl,\n\t...");
    # the error is one line, in text and in a JSON error's message.
    message = _LINE_BREAKS.sub(" ", exc.format_message().strip())
    message = message.removesuffix(".") if not message.endswith("..") else message
    return _Usage(f"{message} (see {where} --help)", error_type="UsageError")


class HolonGroup(click.Group):
    """A click group that turns every error into one stderr line and an exit code.

    Every subcommand — including ones registered from other modules with
    ``add_command`` or :meth:`add_lazy_command` — runs inside :meth:`invoke`, so none
    needs its own handling: holon errors become ``holon: error: ...`` and click's usage
    errors (three lines by default) become ``holon: usage error: ... (see holon CMD
    --help)``, exit code 2. Every registered command also gets ``--debug`` after its
    name, as the group has it before.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # name -> ("module:attribute", the command's summary), until it is first used
        self._lazy: dict[str, tuple[str, str]] = {}

    def add_lazy_command(self, name: str, target: str, *, summary: str) -> None:
        """Register ``name`` as the click command at ``"module:attribute"``, imported on first use.

        Keeps heavy dependencies (DuckDB for ``holon audit``) off every other command's
        start-up. ``summary`` is the first sentence of the command's help, which the group's
        ``--help`` lists without importing it; a test holds it equal to the command's own.
        """
        self._lazy[name] = (target, summary)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not any(isinstance(p, click.Option) and "--debug" in p.opts for p in cmd.params):
            cmd.params.append(_debug_param())
        for param in cmd.params:
            if isinstance(param, click.Option) and "--json" in param.opts:
                # So that an error is reported as JSON too (see _Failure); eager, so that
                # it is noted before any other option's value is checked.
                param.callback = _noting_json(param.callback)
                param.is_eager = True
        super().add_command(cmd, name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self._lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in self._lazy:
            return command
        target, _summary = self._lazy[cmd_name]
        module_name, _, attribute = target.partition(":")
        loaded = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(loaded, click.Command):
            raise TypeError(f"{target} is not a click command")
        self.add_command(loaded, cmd_name)
        return loaded

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's listing, with each lazy command not loaded yet standing in as its summary:
        # `holon --help` shows a line for `holon audit` without importing DuckDB.
        stand_ins = {
            name: click.Command(name, help=summary)
            for name, (_target, summary) in self._lazy.items()
            if name not in self.commands
        }
        click.Group(self.name, commands={**self.commands, **stand_ins}).format_commands(ctx, formatter)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            ctx.meta[_COMMAND_KEY] = command.name
        return name, command, rest

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS_KEY] = tuple(args)
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.NoArgsIsHelpError:
            raise  # `holon` alone prints its help
        except click.UsageError as exc:
            failure = _usage(exc, ctx)
            failure.as_json = _asks_json(args)
            raise failure from None
        except BrokenPipeError:
            # `holon --help | head -1`: --help and --version print while the group's options
            # are parsed, outside invoke; click would end with 1, which means "a check failed".
            _silence(sys.stdout)
            raise click.exceptions.Exit(0) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with _library_warnings():
                return self._invoke(ctx)
        except _Failure as failure:
            failure.as_json = bool(ctx.meta.get(_JSON_KEY)) or (
                # click stops parsing at an unknown option or one missing its value, before
                # --json is read: the script that passed it still gets a JSON error.
                isinstance(failure, _Usage) and _asks_json(ctx.meta.get(_ARGS_KEY, ()))
            )
            raise

    def _invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise _usage(exc, ctx) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            # Not click.Abort: its exit code 1 means "a check failed" here.
            raise _Interrupted("interrupted", error_type="KeyboardInterrupt") from None
        except BrokenPipeError:
            # The reader went away (`holon replay L | head`): not an error.
            _silence(sys.stdout)
            raise click.exceptions.Exit(0) from None
        except Exception as exc:
            if ctx.meta.get(_DEBUG_KEY):
                traceback.print_exc(file=sys.stderr)
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
                if isinstance(exc, LedgerCorrupt) and ctx.meta.get(_COMMAND_KEY) == "verify":
                    # verify stopped here: pointing at verify again says nothing.
                    message = message.removesuffix(_VERIFY_ADVICE)
                elif isinstance(exc, LedgerLocked) and exc.advice == LedgerLocked.ADVICE:
                    # Only writing commands take the lock; "open it read-only" is the library's
                    # advice, not something `holon append` can do. Other advice is the
                    # library's own for the case (`holon repair` beside a writer rolling over).
                    message = str(
                        exc.with_advice(
                            f"holon {ctx.meta.get(_COMMAND_KEY, '')} writes to it: wait for that process "
                            "to finish or stop it first (read commands such as holon memory, holon "
                            "render and holon verify work beside it)"
                        )
                    )
            raise _FAILURES[code](message, error_type=type(exc).__name__) from None


class _WarningLines(logging.Handler):
    """The library's warnings as the CLI's own ``holon: warning: <what>`` lines on stderr.

    Opening a ledger for writing cuts a torn tail and says so through :mod:`logging`
    (``holon.ledger``), as do a replaced damaged blob and a continued import. With no
    handler configured, Python printed the bare message ("ledger recovery: ..."): not the
    documented warning line, and the file name in it unescaped.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _echo(f"holon: warning: {_printable(record.getMessage())}", err=True)
        except BrokenPipeError:
            _silence(sys.stderr)
        except Exception:
            self.handleError(record)


#: The one handler of every command running in this process, and how many are running: a
#: handler each made a warning of one command a line per command running in other threads.
_WARNING_LINES: Final = _WarningLines(logging.WARNING)
_warning_users = 0
_warning_lock = threading.Lock()


@contextmanager
def _library_warnings() -> Iterator[None]:
    """Show the ``holon`` loggers' warnings as warning lines while a command runs (not after:
    a program that runs the CLI in-process keeps its own logging)."""
    global _warning_users  # noqa: PLW0603 -- one count for the process, as the logger is one
    logger = logging.getLogger("holon")
    with _warning_lock:
        if _warning_users == 0:
            logger.addHandler(_WARNING_LINES)
        _warning_users += 1
    try:
        yield
    finally:
        with _warning_lock:
            _warning_users -= 1
            if _warning_users == 0:
                logger.removeHandler(_WARNING_LINES)


def _asks_json(args: Sequence[str]) -> bool:
    """Whether the command line holds ``--json`` as an option (not after ``--``)."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def _silence(stream: Any) -> None:
    """Point ``stream`` (stdout or stderr) at /dev/null once its reader has gone, so later
    writes and the interpreter's final flush do not fail again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    finally:
        os.close(devnull)


@contextmanager
def _report() -> Iterator[None]:
    """Print a report whose verdict, the exit code, is decided after it is printed.

    A reader that stops early (`holon verify L | head -1`) ends the report, not the
    command: the failure found still exits 1 or 3 and says so on stderr, where a
    broken pipe in :class:`HolonGroup` would have ended with exit code 0.
    """
    try:
        yield
    except BrokenPipeError:
        _silence(sys.stdout)


def _noting_json(callback: Callable[..., Any] | None) -> Callable[..., Any]:
    """A ``--json`` option callback that also notes, for the error handler, that JSON was asked for."""

    def note(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value:
            ctx.meta[_JSON_KEY] = True
        return value if callback is None else callback(ctx, param, value)

    return note


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[_DEBUG_KEY] = True


_DEBUG_HELP: Final = "On error, print the full traceback too."


def _debug_param() -> click.Option:
    """``--debug`` after a command's name (the group adds it to commands that lack it)."""
    return click.Option(
        ["--debug"], is_flag=True, expose_value=False, is_eager=True, callback=_set_debug, help=_DEBUG_HELP
    )


_debug_option = click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_debug,
    help=_DEBUG_HELP,
)
_json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of text."
)
_path_argument = click.argument("path", type=click.Path(path_type=Path))

F = TypeVar("F", bound=Callable[..., Any])


def _common(func: F) -> F:
    """The options every command has: PATH first, then --json and --debug."""
    return _path_argument(_json_option(_debug_option(func)))


# --------------------------------------------------------------------------- output

# C0 and C1 control characters but tab and newline, and DEL: what a terminal would act on.
_CONTROL: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(text: str) -> str:
    """``text`` with every control character but tab and newline as a ``\\xNN`` escape.

    Records hold what tools printed and what users typed, escape sequences included: shown
    raw on a terminal, an OSC sequence retitles the window or writes the clipboard and a
    carriage return overwrites the line before it. `holon get` and `render --format text`
    still write the exact bytes; every other text output goes through here.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _echo(message: str = "", *, err: bool = False) -> None:
    """One line of readable text output, control characters made visible (see :func:`_visible`)."""
    click.echo(_visible(message), err=err)


def _write_bytes(data: bytes, *, newline: bool) -> None:
    """Write ``data`` exactly to a pipe or a file; to a terminal, made readable and harmless.

    What `holon get` restores and `render --format text` reproduces is the bytes: a pipe
    (`| b3sum`) or a file gets them unchanged. A terminal is a reader: there the bytes
    a tool printed or a web page held would act (an OSC sequence retitles the window or
    writes the clipboard, a carriage return hides what came before it), so control
    characters and bytes that are not UTF-8 are shown as escapes, as in every other
    command's text, and ``newline`` (a final newline) is added.
    """
    if not sys.stdout.isatty():
        click.echo(data, nl=False)
        return
    click.echo(_visible(data.decode("utf-8", "backslashreplace")), nl=newline)


def _json_text(value: Any) -> str:
    try:
        data = msgspec.json.encode(value)
    except UnicodeEncodeError:
        # A path that is not UTF-8 (see _printable): escape it rather than fail after the work is done.
        data = msgspec.json.encode(_printable_tree(msgspec.to_builtins(value)))
    return msgspec.json.format(data, indent=2).decode()


def _echo_json(value: Any) -> None:
    click.echo(_json_text(value))


def _echo_json_list(
    head: dict[str, Any], key: str, items: Iterable[Any], tail: Callable[[], dict[str, Any]]
) -> None:
    """``_echo_json({**head, key: list(items), **tail()})``, printed as ``items`` come, never held.

    ``tail`` is called once the items are printed (it may depend on them). The same bytes:
    each item is formatted alone and indented to its depth (a JSON string holds no newline).
    """
    # ``key`` is the last key printed first and the first printed last: its value ends the one
    # document and starts the other.
    opening = _json_text({**head, key: None}).removesuffix("null\n}")
    click.echo(f"{opening}[", nl=False)
    separator = "\n"
    for item in items:
        click.echo(separator + "\n".join(f"    {line}" for line in _json_text(item).split("\n")), nl=False)
        separator = ",\n"
    click.echo("]" if separator == "\n" else "\n  ]", nl=False)
    placeholder = len(_json_text({key: None}).removesuffix("\n}"))
    click.echo(_json_text({key: None, **tail()})[placeholder:])


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], right: Iterable[int] = ()) -> list[str]:
    """Rows as aligned text columns; columns in ``right`` are right-aligned (numbers)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = set(right)
    out = []
    for row in cells:
        parts = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.append("  ".join(parts).rstrip())
    return out


def _n(value: int) -> str:
    return f"{value:,}"


def _count(value: int, noun: str) -> str:
    """``1 turn``, ``2 turns``, ``1,200 records`` (``noun`` in the singular, plural by -s)."""
    return f"{value:,} {noun}{'' if value == 1 else 's'}"


def _clip(text: str | None, width: int = 70) -> str:
    if text is None:
        return "-"
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1] + "…"


# --------------------------------------------------------------------------- ledgers


@contextmanager
def _reading(path: Path) -> Iterator[Ledger]:
    """Open a ledger read-only: no lock, no recovery, nothing written."""
    from holon.ledger import Ledger

    ledger = Ledger.open(path, readonly=True)
    try:
        yield ledger
    finally:
        ledger.close()


@contextmanager
def _writing(path: Path) -> Iterator[Ledger]:
    from holon.ledger import Ledger

    ledger = Ledger.open(path)
    try:
        yield ledger
    finally:
        ledger.close()


def _each_record(ledger: Ledger, label: str = "reading") -> Iterator[r.Record]:
    """The ledger's records one by one, for a pass that keeps only what it needs of each."""
    return progress_items(ledger.read(), length=lambda: ledger.head()[0] + 1, label=label)


def _passes(ledger: Ledger) -> tuple[Reader, Checkpoints]:
    """Read the ledger in passes (the first "reading", then "folding") and resume from a checkpoint.

    Every pass, and the checkpoint's verification, stop at the head the first one saw: a
    writer appending meanwhile changes none of them. The whole-ledger reads (`memory`,
    `render` and `explain` without --at-turn) may need no pass at all: a checkpoint that
    verifies gives what the first would learn (holon.replay.Checkpoints).
    """
    from holon.runtime import checkpoint_resume

    head = ledger.head()
    labels = iter(("reading",))

    def read() -> Iterator[r.Record]:
        label = next(labels, "folding")
        return progress_items(ledger.read(0, head[0] + 1), length=head[0] + 1, label=label)

    return read, checkpoint_resume(ledger, head)


def _records_upto(ledger: Ledger) -> Callable[[int, int], Iterator[r.Record]]:
    """The ledger's records by seq range, up to the head a read command started at."""
    head = ledger.head()[0]

    def records(from_seq: int, to_seq: int) -> Iterator[r.Record]:
        return ledger.read(from_seq, min(to_seq, head + 1))

    return records


def _state_to_append_to(
    ledger: Ledger, incoming: Sequence[r.Record], *, where: Callable[[int], str]
) -> tuple[ProjectionState, int | None]:
    """The state ``incoming`` evidence is appended onto, and the turn it continues from (`holon import`).

    The state is :func:`state_to_append_to`'s, as for `holon append`: from the newest verified
    checkpoint with no first pass when it states the ledger's projection config. The turn
    a transcript's turns are numbered after is the ledger's last (the state's), the one
    the runtime numbers its next turn after (`Agent.next_turn_index`) and above which
    `append_evidence` takes a turn_started: finding the highest turn any record names took
    a pass over every record, the whole of a 1M-record import's wait. Only when the last
    turn has no number, or there is none, is that pass made, and the highest turn a record
    names taken, so that an imported turn repeats no number there.
    """
    from holon.replay import state_to_append_to

    read, resume = _passes(ledger)
    state = state_to_append_to(read, incoming, resume, where=where)
    turn = state.runtime.turn
    if turn is not None and turn.index is not None:
        return state, turn.index
    if state.seq < 0:
        return state, None
    return state, _highest_turn(read())


def _highest_turn(records: Iterable[r.Record]) -> int | None:
    highest: int | None = None
    for record in records:
        if record.turn is not None and (highest is None or record.turn > highest):
            highest = record.turn
    return highest


def _last_turn_before(ledger: Ledger, seq: int) -> int | None:
    """The turn an import that started at ``seq`` numbered its turns after (a continued import).

    :func:`_state_to_append_to`'s last turn for the ledger's first ``seq`` records: the state's
    turn is the last turn_started's, unless a turn_ended closed no open turn after it, which
    sets its own (``holon.projections.state``: ``_on_turn_started``, ``_on_turn_ended``). So the
    last two turn boundaries before ``seq`` say it, read backwards; with no number there, the
    highest turn a record names.
    """
    import holon.records as r

    boundaries: list[r.Record] = []
    at = seq - 1
    while at >= 0 and len(boundaries) < 2:
        record = ledger.get(at)
        at -= 1
        if isinstance(record.body, r.TurnStarted | r.TurnEnded):
            boundaries.append(record)
            if isinstance(record.body, r.TurnStarted):
                break  # it sets the turn whatever came before
    index: int | None = None
    if boundaries:
        last = boundaries[0]
        opened = next((b for b in boundaries if isinstance(b.body, r.TurnStarted)), None)
        # A turn_ended keeps the number of the turn it closes; one with no turn open, its own.
        index = opened.turn if opened is not None else last.turn
    if index is not None or seq == 0:
        return index
    return _highest_turn(ledger.read(0, seq))


def _given(name: str) -> bool:
    """Whether the option ``name`` of the running command was given, not left at its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source is not ParameterSource.DEFAULT


def _render_options(func: F) -> F:
    """Options choosing which prompt to render and with which budget/config."""
    options = [
        click.option(
            "--at-turn",
            type=int,
            metavar="N",
            help="The prompt of turn N (default: the prompt for the next model call).",
        ),
        click.option(
            "--call",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            metavar="K",
            help="With --at-turn: which model call of the turn, when it recorded several prompts.",
        ),
        click.option(
            "--budget",
            "window",
            type=click.IntRange(min=1, max=_MAX_TOKENS),
            metavar="TOKENS",
            help="Context window to render into (default: the newest recorded one, else "
            f"{DEFAULT_BUDGET.context_window:,}). Overrides skip the hash check.",
        ),
        click.option(
            "--output-reserve",
            "reserve",
            type=click.IntRange(min=0, max=_MAX_TOKENS),
            metavar="TOKENS",
            help="Tokens kept free for the answer (default: the newest recorded one, else "
            f"{DEFAULT_BUDGET.output_reserve:,}).",
        ),
        click.option(
            "--cache-key", metavar="KEY", help="Prompt cache key to render with (default: the recorded one)."
        ),
        click.option(
            "--estimator",
            type=click.Choice(available_estimators()),
            help="Token estimator to render with (default: the recorded one).",
        ),
        click.option(
            "--no-check",
            is_flag=True,
            help="Render even when a recorded prompt cannot be reproduced; skip the hash check.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _resolve_prompt(
    *,
    path: Path,
    at_turn: int | None,
    call: int,
    window: int | None,
    reserve: int | None,
    cache_key: str | None,
    estimator: str | None,
    no_check: bool,
    input_text: str | None = None,
) -> PromptAt:
    """Render the requested prompt and enforce the recorded-hash check."""
    from holon.replay import RenderOverrides, next_prompt_of, prompt_of

    if at_turn is None and _given("call"):
        raise click.UsageError("--call applies to --at-turn only: the next model call is a single prompt")
    overrides = RenderOverrides(
        context_window=window, output_reserve=reserve, prompt_cache_key=cache_key, estimator=estimator
    )
    try:
        with _reading(path) as ledger:
            read, resume = _passes(ledger)
            agent = ledger.agent_id
            if at_turn is None:
                return next_prompt_of(
                    read,
                    agent_id=agent,
                    overrides=overrides,
                    resume=resume,
                    blobs=ledger.get_blob,
                    older=_records_upto(ledger),
                    input=input_text,
                )
            found = prompt_of(
                read,
                at_turn,
                agent_id=agent,
                call=call,
                overrides=overrides,
                blobs=ledger.get_blob,
                older=_records_upto(ledger),
            )
    except BudgetExceeded as exc:
        # The library says "context window" and "output reserve"; name this command's options.
        raise _Failure(
            f"{exc} (--budget sets the context window, --output-reserve the reserve)",
            error_type=type(exc).__name__,
        ) from None
    if found.recorded is None or no_check:
        return found
    if not found.reproducible and overrides.empty:
        raise CheckFailed(
            f"the prompt recorded at seq {found.recorded_seq} (turn {at_turn}) cannot be reproduced: it has "
            f"no render_config, so it was not rendered by holon.context (estimator "
            f"{found.recorded.estimator!r}); pass --no-check or --budget to render the ledger at that point"
        )
    if found.checked and not found.matches:
        reasons = found.mismatch_reasons()
        why = f" ({'; '.join(reasons)})" if reasons else ""
        raise CheckFailed(
            f"turn {at_turn} call {call}: re-rendering the ledger up to seq {found.recorded_seq} gives "
            f"prompt_hash {found.prompt.prompt_hash[:16]}…, but the record says "
            f"{found.recorded.prompt_hash[:16]}…{why}; pass --no-check to see the re-rendered prompt"
        )
    return found


def _prompt_header(found: PromptAt) -> str:
    where = "the next model call" if found.turn is None and found.recorded is None else f"turn {found.turn}"
    if found.recorded is None:
        rendered = f"seq 0..{found.before_seq - 1}" if found.before_seq > 0 else "an empty ledger"
        return f"prompt for {where}, rendered from {rendered}"
    status = (
        "reproduced byte for byte (prompt_hash matches)"
        if found.matches
        else "not checked against the record"
    )
    return f"prompt of {where}, recorded at seq {found.recorded_seq}: {status}"


# --------------------------------------------------------------------------- the group


@click.group(
    name="holon",
    cls=HolonGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option("--debug", is_flag=True, help=_DEBUG_HELP)
@click.version_option(__version__, prog_name="holon")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Replay and inspect holon ledgers: what the agent remembered, what the model saw, and why.

    A ledger is the directory an agent appends its records to. Read commands open it
    read-only and never change it. Every command takes --json for scripts.

    Exit codes: 0 ok, 1 a check failed, 2 usage error or bad input, 3 the ledger is
    corrupt or locked, 70 internal error, 74 the system refused a read or write (disk
    full, read-only file system), 130 interrupted.
    """
    if debug:
        ctx.meta[_DEBUG_KEY] = True
    _tolerant_output()


def _tolerant_output() -> None:
    """Write what the terminal's encoding cannot hold as ``\\u2192`` escapes, not crash.

    Records hold any text (arrows, accents, CJK); under a non-UTF-8 locale
    (``LANG=en_US.ISO-8859-1``) printing one ended the command with an internal error.
    """
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")


# --------------------------------------------------------------------------- writing


@main.command()
@_common
@click.option(
    "--agent-id",
    required=True,
    metavar="ID",
    help="The agent this ledger belongs to (1-256 printable characters).",
)
@click.option(
    "--blob-threshold",
    type=click.IntRange(*SETTING_RANGES["blob_threshold"]),
    default=DEFAULT_BLOB_THRESHOLD,
    show_default=True,
    metavar="BYTES",
    help="Tool and task outputs longer than this go to the blob store.",
)
def init(path: Path, as_json: bool, agent_id: str, blob_threshold: int) -> None:
    """Create an empty ledger directory at PATH for one agent.

    PATH must not exist or be an empty directory (or hold what an init killed before it
    wrote the header left there: init finishes it).

    Example: holon init runs/agent-7 --agent-id agent-7
    """
    from holon.ledger import Ledger

    with Ledger.create(path, agent_id=agent_id, blob_threshold=blob_threshold) as ledger:
        head = ledger.head()
    if as_json:
        _echo_json({"path": str(path), "agent_id": agent_id, "head_seq": head[0], "head_hash": head[1]})
    else:
        _echo(f"created ledger {path} for agent {agent_id} (empty; genesis {head[1][:16]}…)")


def _appended(
    as_json: bool, seqs: Sequence[int], records: int, extra: dict[str, Any], ledger: Ledger
) -> None:
    head = ledger.head()
    derived = len(seqs) - records
    if as_json:
        _echo_json(
            {
                **extra,
                "appended": len(seqs),
                "derived": derived,
                "first_seq": seqs[0] if seqs else None,
                "last_seq": seqs[-1] if seqs else None,
                "head_seq": head[0],
                "head_hash": head[1],
            }
        )
        return
    if not seqs:
        _echo("nothing to append: the input holds no records")
        return
    _echo(
        f"appended {_n(len(seqs))} records (seq {seqs[0]}..{seqs[-1]}), {derived} of them derived by the "
        f"post-turn refresh; head seq {head[0]} ({head[1][:16]}…)"
    )


@main.command()
@_common
@click.argument("records_file", metavar="RECORDS.jsonl", type=click.Path(path_type=Path))
def append(path: Path, as_json: bool, records_file: Path) -> None:
    """Append evidence records from a JSONL file, as the agent runtime would.

    Each line is one record in holon's canonical JSON envelope ({"seq", "ts", "turn",
    "kind", "v", "body"}); seqs are reassigned from the ledger's head. After every
    turn_ended the post-turn refresh appends its derived records (working-memory delta,
    episode), so the ledger still verifies. Derived records in the input are refused,
    and so are records the runtime never writes: timestamps going backwards, a
    turn_ended with no open turn, a turn_started inside one or with a turn number
    not above the last turn's, inside a turn a record naming another turn (or a
    turn_ended naming none), and a prompt_rendered showing a working-memory revision
    the ledger has not reached. Every line is checked first: on any error nothing is
    appended. RECORDS.jsonl `-` reads standard input.

    To copy a whole exported ledger (derived records and blobs included), use
    `holon import PATH FILE --from jsonl`.
    """
    from holon.replay import append_evidence, state_to_append_to

    records_file = _input_file(records_file, "append")
    data = _read_input(records_file, "append")
    report = IMPORTERS["jsonl"].parse_bytes(data, source=str(records_file))
    # Record n came from the n-th non-blank line: errors name that line, as decoding does.
    lines = [number for number, line in enumerate(data.split(b"\n"), 1) if line.strip()]

    def where(n: int) -> str:
        return f"line {lines[n - 1]} of {records_file}"

    with _writing(path) as ledger:
        read, resume = _passes(ledger)
        state = state_to_append_to(read, report.records, resume, where=where)
        seqs = append_evidence(ledger, report.records, state=state, where=where)
        _appended(as_json, seqs, len(report.records), {"source": str(records_file)}, ledger)


_STDIN: Final = Path("/dev/stdin")


def _input_file(path: Path, command: str) -> Path:
    """The file an input argument names: ``-`` is standard input, as for most commands.

    Read as ``/dev/stdin``, which every reader here opens like a file (``import --from
    jsonl`` then finds no ``.blobs/`` beside it). A terminal there is refused: the user
    forgot to pipe the file in, and the command would wait for typing. ``./-`` names a
    file called ``-``.
    """
    if str(path) != "-":
        return path
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError(
            f"- reads standard input, which is a terminal here: pipe or redirect the file in "
            f"(`holon {command} PATH - < FILE`), or pass its path"
        )
    return _STDIN


def _check_input(path: Path, command: str, *, directory: bool = False) -> None:
    """Refuse an input FILE that is a directory, saying so; a ledger there means swapped arguments.

    ``directory``: the format also comes as a directory (an OpenHands V1 conversation), which
    is let through unless it is a ledger.
    """
    from holon.ledger import HEADER_NAME

    if path.is_dir():
        swapped = (path / HEADER_NAME).is_file()
        if directory and not swapped:
            return
        hint = f"; it is a ledger, and the ledger comes first: holon {command} PATH FILE" if swapped else ""
        raise UsageError(f"{path} is a directory, not a file to read{hint}")


def _read_input(path: Path, command: str) -> bytes:
    _check_input(path, command)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None


@main.command(name="import")
@_common
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--from",
    "fmt",
    required=True,
    type=click.Choice(FORMATS),
    help="The transcript format of FILE: "
    + "; ".join(f"{i.name}: {i.description}" for i in IMPORTERS.values()),
)
@click.option(
    "--agent-id",
    metavar="ID",
    help="The agent of the ledger created when PATH does not exist yet (1-256 printable characters). "
    "Default: the transcript's session id (Claude Code's sessionId), else PATH's directory name. A holon "
    "export names no agent: give the exported ledger's, which its prompts were rendered for. For a "
    "ledger that exists, it must be that ledger's.",
)
def import_(path: Path, as_json: bool, file: Path, fmt: str, agent_id: str | None) -> None:
    """Import a transcript FILE of another agent tool (or a holon export) into the ledger at PATH.

    Other tools' transcripts are mapped to holon records (see docs/importers.md) and
    appended like `holon append`: the post-turn refresh adds the derived records after
    every turn. Run again after it was cut short (a full disk, Ctrl-C), the same command
    appends what the ledger does not hold yet, so the ledger ends as if imported in one
    go; run again after it completed, it says the transcript is imported already and
    appends nothing (exit 0; --json: "already_imported"). `--from jsonl` copies a `holon
    export` file exactly — derived records, timestamps and blobs (from FILE.blobs/) —
    into an empty ledger (to add evidence to a ledger that has records, use `holon
    append`); run again after such a copy was interrupted, it appends the records the
    ledger does not hold yet. The empty file an empty ledger exports imports as nothing
    (exit 0).

    A PATH that does not exist yet is created, a new ledger for --agent-id; should the
    import fail, it is removed again (unless records reached it before a full disk or
    Ctrl-C stopped the import: run the command again to finish it).

    The whole file is checked before anything is written: a malformed line or a file
    of another format is reported with its line, and nothing is appended. FILE `-`
    reads standard input (for `--from jsonl`, an export without blobs).

    Example: holon import runs/agent-7 session.jsonl --from claude-code
    """
    from holon.importers import SYNTHETIC_STEP_MS, read_transcript
    from holon.replay import append_evidence, imported_prefix

    file = _input_file(file, "import")
    # An OpenHands V1 conversation is a directory of event files (read_transcript joins them).
    _check_input(file, "import", directory=fmt == "openhands")
    if fmt == "jsonl":
        _import_export(path, file, as_json=as_json, agent_id=agent_id)
        return
    report = read_transcript(file, fmt)
    held = 0  # records of this import the ledger holds already (an interrupted or complete one)

    def where(n: int) -> str:
        # A refusal (a transcript older than the ledger's last record) names the file.
        return f"record {held + n} mapped from {file}"

    with _import_target(path, agent_id, report.session_id) as (ledger, created):
        state, last_turn = _state_to_append_to(ledger, report.records, where=where)
        head = ledger.head()[0]
        records = report.records

        def placed_at(seq: int) -> tuple[r.Record, ...]:
            # As a new import places them: after the record before (its ts, the turn it leaves).
            if seq == 0:
                return report.records
            return report.after(ledger.get(seq - 1).ts, last_turn=_last_turn_before(ledger, seq)).records

        continued = imported_prefix(ledger, records, placed_at)
        if continued is not None:
            # Run again after a full disk (or a kill) cut it short, or after it completed: the
            # ledger ends with its first records, placed where it started; the rest follow them.
            held, records = continued.held, continued.records[continued.held :]
        elif head >= 0:
            # An untimestamped transcript's synthetic clock starts at 0, and every transcript's
            # turns count from 0: both continue the ledger.
            records = report.after(ledger.get(head).ts, last_turn=last_turn).records
            _check_import_time(ledger, records[0], file, where(1))
        with progress_callback(len(records), "importing") as imported:
            appended = append_evidence(ledger, records, state=state, progress=imported, where=where)
        extra = {
            "source": str(file),
            "format": fmt,
            "records": len(report.records),
            "turns": report.turns,
            "tool_calls": report.tool_calls,
            "unmatched_intents": report.unmatched_intents,
            "skipped": report.skipped,
            "synthetic_clock": report.synthetic_clock,
            "declared_tools": list(report.declared_tools),
            "continued_after": held,
            "already_imported": continued is not None and not records,
            "agent_id": ledger.agent_id,
            "created": created is not None,
        }
        if continued is not None and not records:
            _already_imported(as_json, appended, extra, ledger, first_seq=continued.first_seq)
            return
        if not as_json:
            if created is not None:
                _echo(f"created ledger {path} for agent {_printable(ledger.agent_id)} ({created})")
            skipped = ", ".join(f"{k} {v}" for k, v in report.skipped.items()) or "nothing"
            _echo(
                f"read {file} ({fmt}): {_count(len(report.records), 'record')}, "
                f"{_count(report.turns, 'turn')}, {_count(report.tool_calls, 'tool call')} "
                f"({report.unmatched_intents} without a result); "
                f"skipped: {skipped}"
            )
            if report.declared_tools:
                _echo(
                    f"declared {_count(len(report.declared_tools), 'tool')} the transcript called without "
                    f"defining (by name only): {', '.join(report.declared_tools)}"
                )
            if report.synthetic_clock:
                # Otherwise nothing says so: holon stats' hours and the audit's tool and turn
                # durations read the invented clock as if it were the agent's.
                _echo(
                    f"the transcript has no timestamps: its records are {SYNTHETIC_STEP_MS:,} ms apart on a "
                    "synthetic clock, so durations (holon stats, holon audit) are not real"
                )
            if continued is not None:
                _echo(
                    f"continued an interrupted import: the ledger held the first {_n(held)} of the "
                    f"{_n(len(report.records))} records {file} maps to (from seq {continued.first_seq})"
                )
        _appended(as_json, appended, len(records), extra, ledger)


def _import_export(path: Path, file: Path, *, as_json: bool, agent_id: str | None) -> None:
    """`holon import --from jsonl`: copy a `holon export` file into the ledger at ``path``."""
    from holon.ledger import import_jsonl

    empty = UsageError(f"{file} is empty: there is no holon export in it to import")
    if not file.exists():
        raise UsageError(f"cannot read {file}: no such file")
    if file.is_file() and file.stat().st_size == 0:
        _import_empty_export(path, file, as_json=as_json, agent_id=agent_id)
        return
    with _import_target(path, agent_id, None) as (ledger, created):
        held = ledger.head()[0] + 1
        with progress_total("importing") as advance:
            try:
                seqs = import_jsonl(file, ledger, require_empty=True, progress=advance)
            except InvalidRecord as exc:
                raise _not_an_export(exc, file) from None
        if not seqs:  # a pipe (`... | holon import L /dev/stdin`) that held nothing
            raise empty
        if created is not None and not as_json:
            _echo(f"created ledger {path} for agent {_printable(ledger.agent_id)} ({created})")
        if held and not as_json:
            _echo(f"continued an interrupted import: the ledger held the first {_n(held)} records of {file}")
        extra = {
            "source": str(file),
            "format": "jsonl",
            "continued_after": held,
            "agent_id": ledger.agent_id,
            "created": created is not None,
        }
        _appended(as_json, seqs, len(seqs), extra, ledger)


def _valid_agent_id(agent_id: str) -> bool:
    return 0 < len(agent_id) <= 256 and agent_id.isprintable()


@contextmanager
def _import_target(
    path: Path, agent_id: str | None, session: str | None
) -> Iterator[tuple[Ledger, str | None]]:
    """The ledger at ``path`` open for writing, and where its agent id came from if it was created.

    A ``path`` that does not exist is created, for ``agent_id``, else the transcript's
    ``session`` id, else the directory's name. When the import fails and the new ledger
    holds no record, it is removed with the directories made for it: a failed import into a
    new ledger leaves nothing. One that records reached (a full disk stopped the import
    part way) is kept, for the command run again to continue.
    """
    import shutil

    if path.exists() or path.is_symlink():
        with _writing(path) as ledger:
            if agent_id is not None and agent_id != ledger.agent_id:
                held, given = _printable(ledger.agent_id), _printable(agent_id)
                raise UsageError(
                    f"ledger {path} belongs to agent {held}, not {given}: --agent-id names the agent of a "
                    "ledger the import creates; leave it out to import into this one, or give a PATH that "
                    "does not exist yet"
                )
            yield ledger, None
        return
    if agent_id is not None:
        chosen, source = agent_id, "--agent-id"
    elif session is not None:
        chosen, source = session, "the transcript's session id"
    else:
        chosen, source = path.absolute().name, "the directory's name"
    if agent_id is None and not _valid_agent_id(chosen):
        raise UsageError(
            f"cannot take the agent id of the new ledger {path} from {source} ({chosen!r}): an agent id "
            "is 1-256 printable characters; give one with --agent-id ID"
        )
    from holon.ledger import Ledger

    made = path.absolute()
    while not made.parent.exists():
        made = made.parent
    ledger = Ledger.create(path, agent_id=chosen)
    try:
        yield ledger, f"its agent id from {source}"
    except BaseException:
        try:
            unwritten = ledger.head()[0] < 0
        finally:
            ledger.close()
        if unwritten:
            shutil.rmtree(made, ignore_errors=True)
        raise
    ledger.close()


def _check_import_time(ledger: Ledger, first: r.Record, file: Path, where: str) -> None:
    """Refuse a transcript that starts before the ledger's last record, saying why and what to do."""
    head = ledger.head()[0]
    last_ts = ledger.get(head).ts
    if first.ts < last_ts:
        raise InvalidRecord(
            f"{file} starts at ts {first.ts}, before the ledger's last record (seq {head}, ts {last_ts}): "
            "a ledger's timestamps never go backwards, so a transcript imports only after what the ledger "
            "holds, and the ledger does not end with an earlier import of this transcript that could be "
            "continued; import transcripts in time order, or into a new ledger",
            where=where,
            field="ts",
        )


def _already_imported(
    as_json: bool, appended: Sequence[int], extra: dict[str, Any], ledger: Ledger, *, first_seq: int
) -> None:
    """Say that a transcript is imported already (exit 0); ``appended``: the refresh it still owed."""
    if as_json:
        _appended(as_json, appended, 0, extra, ledger)
        return
    records = _n(extra["records"])
    imported = f"{extra['source']} is imported already: the ledger holds all {records} records it maps to"
    if not appended:
        _echo(f"{imported} (from seq {first_seq}); nothing appended")
        return
    _echo(
        f"{imported} (from seq {first_seq}); appended the {_count(len(appended), 'derived record')} of the "
        f"post-turn refresh its last turn still owed (seq {appended[0]}..{appended[-1]})"
    )


#: The largest file ``_not_an_export`` tries each importer on: a wrong --from on a file of
#: gigabytes should fail at once, not after parsing it with every importer.
_TRY_IMPORTERS_MAX: Final = 256 << 20


def _not_an_export(exc: InvalidRecord, file: Path) -> InvalidRecord:
    """``exc``, naming the transcript format ``file`` reads as when its first line is no holon record.

    A first line that is not a record is most often another tool's transcript given to
    ``--from jsonl`` (a `.traj`, a Claude Code session): "the record was cut off (a partly
    copied file?)" sent the user looking for damage. Each importer is tried (only on this
    error path); the message names the one that reads the file, or lists them all.
    """
    from holon.importers import read_transcript

    if exc.where is None or not exc.where.startswith("line 1 of") or not file.is_file():
        return exc  # a pipe was read once: it cannot be tried again
    readable = []
    tried = () if file.stat().st_size > _TRY_IMPORTERS_MAX else FORMATS
    for fmt in tried:
        if fmt == "jsonl":
            continue
        try:
            report = read_transcript(file, fmt)
        except (HolonError, OSError):
            continue
        if report.records:
            readable.append(fmt)
    detail = exc.detail
    if len(readable) == 1:
        return InvalidRecord(
            f"{file} is not a holon export, but it reads with --from {readable[0]}: import it with "
            f"--from {readable[0]} (read as a holon record: {detail})",
            where=exc.where,
        )
    others = ", ".join(f for f in FORMATS if f != "jsonl")
    return InvalidRecord(
        f"{detail}; {file} is not a holon export: if it is another tool's transcript, import it with "
        f"--from {others} (docs/importers.md)",
        where=exc.where,
    )


def _import_empty_export(path: Path, file: Path, *, as_json: bool, agent_id: str | None) -> None:
    """Import an empty JSONL file: the export of an empty ledger, so into an empty ledger a no-op.

    The ledger is only read (nothing to write, no lock to take). Into a ledger that holds
    records it is refused, as any copy of an export is; a pipe that brought nothing is
    refused by the caller (a command before it that failed, not an export). A ``path`` that
    does not exist becomes the empty ledger (for ``agent_id``, else the directory's name).
    """
    if not (path.exists() or path.is_symlink()):
        with _import_target(path, agent_id, None) as (ledger, created):
            extra = {"source": str(file), "format": "jsonl", "continued_after": 0}
            extra |= {"agent_id": ledger.agent_id, "created": True}
            if as_json:
                _appended(as_json, [], 0, extra, ledger)
            else:
                _echo(
                    f"imported 0 records: {file} is empty, the export of an empty ledger; created {path}, an "
                    f"empty ledger for agent {_printable(ledger.agent_id)} ({created})"
                )
        return
    with _reading(path) as ledger:
        head = ledger.head()[0]
        if head >= 0:
            raise UsageError(
                f"{file} is empty: there is no holon export in it to import (an empty file is the export of "
                f"an empty ledger, and {path} holds records up to seq {head})"
            )
        if as_json:
            _appended(as_json, [], 0, {"source": str(file), "format": "jsonl", "continued_after": 0}, ledger)
        else:
            _echo(f"imported 0 records: {file} is empty, the export of an empty ledger; {path} stays empty")


def _memory_limit(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Refuse a --memory-limit that is not a positive size before anything is loaded."""
    if value is None:
        return None
    # Imported when the option is given: DuckDB stays off the start-up path of a JSONL export.
    from holon.audit import memory_limit_problem

    problem = memory_limit_problem(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


class _ProgressLedger:
    """A read-only ledger whose ``read`` reports progress; ``export_jsonl`` reads through it."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    @property
    def path(self) -> Path:
        return self._ledger.path

    def read(self, from_seq: int = 0, to_seq: int | None = None) -> Iterator[r.Record]:
        return progress_items(
            self._ledger.read(from_seq, to_seq), length=lambda: self._ledger.head()[0] + 1, label="exporting"
        )

    def get_blob(self, blob_hash: str) -> bytes:
        return self._ledger.get_blob(blob_hash)


@main.command()
@_common
@click.argument("out", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "parquet"]),
    default="jsonl",
    show_default=True,
    help="jsonl: one canonical record per line, blobs in OUT.blobs/ (lossless; `holon import --from jsonl` "
    "reads it back). parquet: audit tables in the directory OUT (see docs/audit.md).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Parquet only: replace this agent's tables already in OUT (other agents' tables stay). "
    "A JSONL export always replaces OUT.",
)
@click.option(
    "--incremental",
    is_flag=True,
    help="Parquet only: add what the ledger appended since its export in OUT, rewriting only the "
    "partitions that changed (refused if the ledger no longer extends that export; see docs/audit.md).",
)
@click.option(
    "--memory-limit",
    "memory_limit",
    metavar="SIZE",
    callback=_memory_limit,
    help="Parquet only: most memory DuckDB holds while loading, e.g. 2GB; past it, it spills to "
    "a temporary directory (see `holon audit --memory-limit`).",
)
def export(
    *,
    path: Path,
    as_json: bool,
    out: Path,
    fmt: str,
    overwrite: bool,
    incremental: bool,
    memory_limit: str | None,
) -> None:
    """Export the ledger at PATH to OUT as canonical JSONL or as Parquet audit tables.

    Several agents can be exported into one Parquet directory, one at a time; exporting
    an agent already there again needs --overwrite, or --incremental to add only what its
    ledger appended since. OUT is a path: a JSONL export's blobs go beside it, so it
    cannot be standard output.

    Example: holon export runs/agent-7 agent-7.jsonl
    """
    from holon.ledger import export_jsonl

    if str(out) == "-":
        # Not a file named "-" in the working directory, which the user did not ask for.
        raise UsageError(
            "holon export writes OUT as a file (a JSONL export with its blobs in OUT.blobs/ beside it) "
            "or a Parquet directory, not to standard output: pass a path, e.g. `holon export PATH run.jsonl`"
        )
    if memory_limit is not None and fmt != "parquet":
        raise click.UsageError("--memory-limit is for --format parquet (a JSONL export holds no tables)")
    if incremental and fmt != "parquet":
        raise click.UsageError("--incremental is for --format parquet (a JSONL export always replaces OUT)")
    if incremental and overwrite:
        raise click.UsageError("--incremental and --overwrite exclude each other: choose one")
    if fmt == "parquet":
        files = _export_parquet(
            path, out, overwrite=overwrite, incremental=incremental, memory_limit=memory_limit
        )
        if as_json:
            _echo_json({"format": fmt, "files": [str(f) for f in files]})
        else:
            _echo(f"wrote {len(files)} Parquet file(s) to {out}")
            for f in files:
                _echo(f"  {f}")
        return
    with _reading(path) as ledger:
        # export_jsonl only reads records and blobs; the proxy adds the progress bar.
        count = export_jsonl(_ProgressLedger(ledger), out)  # type: ignore[arg-type]
    if as_json:
        _echo_json({"format": fmt, "records": count, "path": str(out)})
    else:
        _echo(f"wrote {_n(count)} records to {out}")


def _export_parquet(
    path: Path, out: Path, *, overwrite: bool, incremental: bool, memory_limit: str | None
) -> list[Path]:
    # Imported on use: DuckDB stays off the start-up path of every other command.
    from holon.audit import export_parquet
    from holon.ledger import Ledger

    Ledger.open(path, readonly=True).close()  # a clear NotALedger before any file is written
    with progress_total("exporting") as advance:
        files: list[Path] = export_parquet(
            [path],
            out,
            overwrite=overwrite,
            incremental=incremental,
            progress=advance,
            memory_limit=memory_limit,
        )
    return files


# --------------------------------------------------------------------------- replay


def _turn_lines(turn: TurnReplay) -> list[str]:
    seqs = f"seq {turn.started_seq}..{turn.ended_seq if turn.ended_seq is not None else '…'}"
    said = _clip(turn.input, 60) if turn.input else "(no input)"
    head = f"turn {turn.turn} · {seqs} · {turn.trigger}: {said}"
    head += f" · {turn.outcome or 'still open'}"
    lines = [head]
    for p in turn.prompts:
        change = (
            "first"
            if p.previous_cache_key is None
            else ("changed" if p.cache_key != p.previous_cache_key else "unchanged")
        )
        lines.append(
            f"  prompt   seq {p.seq}: {_n(p.total_tokens)} of {_n(p.budget)} tokens · revision "
            f"{p.working_memory_revision}, epoch {p.compression_epoch} · cache key {change}: {p.cache_key}"
        )
        if p.sections:
            parts = [
                f"{s.section} {_n(s.tokens)}" + ("" if s.form == "full" else f" ({s.form})")
                for s in p.sections
            ]
            lines.append("           " + " · ".join(parts))
        if p.omitted:
            lines.append(f"           {p.omitted} item(s) left out or shortened (see `holon explain`)")
    if turn.delta is not None:
        d = turn.delta
        lines.append(
            f"  memory   revision {d.from_revision} → {d.to_revision} ({d.reason.replace('_', ' ')}; "
            f"changed {', '.join(d.changed_fields)}; "
            f"evidence ledger:{d.evidence_from_seq}..{d.evidence_to_seq})"
        )
        lines.extend(f"           {line}" for line in d.lines)
    else:
        lines.append(f"  memory   revision {turn.revision} (unchanged)")
    for e in turn.episodes:
        lines.append(
            f"  episode  {e.episode_id} finalized ({e.boundary_reason.replace('_', ' ')}): turns "
            f"{e.first_turn}-{e.last_turn}, {e.work_item_id or 'no work item'}, "
            f"ledger:{e.from_seq}..{e.to_seq}"
            f" — {_clip(e.objective, 50)}"
        )
        lines.append(f"           compression epoch → {turn.compression_epoch}")
    return lines


def _diff_lines(divergence: Any) -> list[str]:
    lines: list[str] = []
    for d in divergence.diffs:
        want = msgspec.json.format(msgspec.json.encode(d.expected), indent=2).decode().splitlines()
        got = msgspec.json.format(msgspec.json.encode(d.found), indent=2).decode().splitlines()
        lines.append(f"  {d.field}:")
        lines.extend(
            "    " + line.rstrip("\n")
            for line in difflib.unified_diff(
                want,
                got,
                fromfile="re-derived by this holon",
                tofile=f"ledger seq {divergence.seq}",
                lineterm="",
            )
        )
    return lines


@main.command()
@_common
@click.option("--until-turn", type=int, metavar="N", help="Stop after turn N (and its post-turn refresh).")
@click.option(
    "--check", is_flag=True, help="Also re-derive every derived record and exit 1 at the first divergence."
)
def replay(path: Path, as_json: bool, until_turn: int | None, check: bool) -> None:
    """Fold the ledger turn by turn and show what happened to working memory.

    For each turn: its input and outcome; each recorded prompt with its tokens by
    section and whether the cache key changed; the working-memory revision and the
    delta's reason and lines; episodes finalized and the compression epoch.

    With --check, replay verification runs too: every derived record (delta, episode)
    must equal what this holon derives from the evidence before it; otherwise the
    command prints the first divergent seq with a diff and exits 1.

    Example: holon replay runs/agent-7 --until-turn 40 --check
    """
    from holon.projections import verify_derivations
    from holon.replay import replay_of

    with _reading(path) as ledger:
        agent = ledger.agent_id
        upto = [ledger.head()[0] + 1]  # the records a pass reads: all, then those replayed
        # No bar while the turns print to the same terminal: it would be drawn between them.
        passes = ("reading", "verifying") if check else ("reading",)
        labels = iter(passes if sys.stdout.isatty() else (*passes, "replaying"))

        def read() -> Iterator[r.Record]:
            label, count = next(labels, None), upto[0]
            records = ledger.read(0, count)
            return records if label is None else progress_items(records, length=count, label=label)

        # The config the whole ledger records, also when only a prefix of it is replayed.
        replay = replay_of(read, until_turn=until_turn)
        upto[0] = replay.records
        projection = replay.projection
        # Checked before anything is printed, as the turns are printed while they are folded.
        report = verify_derivations(replay.read(), config=projection) if check else None
        with _report():
            if as_json:
                _echo_json_list(
                    {"agent_id": agent, "records": replay.records, "last_seq": replay.last_seq},
                    "turns",
                    replay.turns(),
                    lambda: _replayed_memory(replay) | {"check": report},
                )
            else:
                _echo(
                    f"agent {agent} · {_count(replay.records, 'record')} · "
                    f"{_count(replay.turn_count, 'turn')} · last seq {replay.last_seq}"
                )
                for turn in replay.turns():
                    _echo("")
                    for line in _turn_lines(turn):
                        _echo(line)
                _echo("")
                final = replay.state if replay.records else None
                if final is not None:
                    memory = final.memory
                    _echo(
                        f"after seq {final.seq}: working memory revision {memory.revision}, compression "
                        f"epoch {memory.compression_epoch}, {memory.archived_episodes} episode(s) archived, "
                        f"pending delta: {'yes' if memory.pending is not None else 'no'}"
                    )
                if report is not None:
                    if report.ok:
                        pending = (
                            " (the last turn's refresh is still to be appended)"
                            if report.pending_refresh
                            else ""
                        )
                        _echo(
                            f"replay check ok: {report.refreshes} post-turn refreshes re-run, "
                            f"{report.derived_checked} "
                            f"derived records equal what this holon derives (projection version "
                            f"{report.projection_version}){pending}"
                        )
                    else:
                        assert report.divergence is not None
                        _echo(
                            f"replay check FAILED at seq {report.divergence.seq}: "
                            f"{report.divergence.describe()}"
                        )
                        for line in _diff_lines(report.divergence):
                            _echo(line)
    if report is not None and not report.ok:
        raise _diverged(report, projection)


def _replayed_memory(replay: Replay) -> dict[str, int]:
    """The memory figures of ``replay --json`` once the turns are folded (0 when nothing was)."""
    memory = replay.state.memory if replay.state is not None and replay.records else None
    return {
        "revision": memory.revision if memory else 0,
        "compression_epoch": memory.compression_epoch if memory else 0,
        "episodes": memory.archived_episodes if memory else 0,
    }


def _diverged(report: VerificationReport, projection: ProjectionConfig) -> CheckFailed:
    """The failure of `replay --check` and `verify` when a derived record differs."""
    divergence = report.divergence
    assert divergence is not None
    return CheckFailed(
        f"derived records diverge at seq {divergence.seq} ({divergence.kind}); "
        f"{_divergence_cause(report, projection)}"
    )


def _divergence_cause(report: VerificationReport, projection: ProjectionConfig) -> str:
    """What a divergence means, and what to do: the cause named when the report shows it."""
    divergence = report.divergence
    assert divergence is not None
    for diff in divergence.diffs:
        if diff.field != "body.projection_version" or not isinstance(diff.found, int):
            continue
        # Derived by other rules: the ledger is not damaged, and "edited" sent the user
        # looking for a tampering that never happened.
        written = (
            f"the {divergence.found_kind} there was derived by projection version {diff.found}; this holon "
        )
        if diff.found < diff.expected:
            return (
                f"{written}derives version {diff.expected}: an older holon wrote the ledger, and the memory "
                "rules have changed since (docs/memory-model.md, Replay verification), which is not damage; "
                "check its derived records with the holon release that wrote them"
            )
        return (
            f"{written}derives version {diff.expected}: a newer holon wrote the ledger; "
            "check it with that release or a later one"
        )
    if divergence.kind == "missing" and divergence.after_seq is not None and report.derived_checked == 0:
        # Evidence written with Ledger.append alone: no refresh ever ran, so memory never changed.
        return (
            f"the ledger holds no derived record before seq {divergence.seq}: its writer appended "
            "evidence without the post-turn refresh; write evidence with holon.Agent, `holon append` or "
            "holon.replay.append_evidence, which append a turn's derived records after its turn_ended"
        )
    return f"the ledger was written by different projection code, or edited{_projection_hint(projection)}"


def _projection_hint(projection: ProjectionConfig) -> str:
    """What a divergence message adds about the projection config the ledger was folded under."""
    from holon.projections import DEFAULT_CONFIG
    from holon.replay import describe_projection

    if projection == DEFAULT_CONFIG:
        # Before holon recorded the config, a non-default one left no trace in the ledger.
        return (
            " (or derived under a non-default ProjectionConfig by a holon that did not record it: "
            "such a ledger cannot be told apart)"
        )
    return f" (folded under the recorded {describe_projection(projection)})"


# --------------------------------------------------------------------------- render / explain


_FORMATS: Final = ("text", "json", "anthropic", "openai", "openai-responses")
#: The model a provider request body names when --model is not given: current ones that
#: the providers' SDKs (anthropic 2.14, openai 3.57) do not list as deprecated.
_ANTHROPIC_MODEL: Final = "claude-sonnet-5-5"
_OPENAI_MODEL: Final = "gpt-5.5"


@main.command()
@_common
@_render_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(_FORMATS),
    default="text",
    show_default=True,
    help="text: the exact prompt bytes; json: sections, cache identity and plan (what --json prints "
    "unless a provider format is chosen); anthropic / openai / openai-responses: the provider request body.",
)
@click.option(
    "--model",
    metavar="NAME",
    help=f"Model name for provider formats (default {_ANTHROPIC_MODEL} / {_OPENAI_MODEL}).",
)
@click.option(
    "--input",
    "input_text",
    metavar="TEXT",
    help="Render the first prompt of a new turn whose input is TEXT (a user message), without "
    "appending anything: what the next turn's model call would see for it.",
)
def render(
    *,
    path: Path,
    as_json: bool,
    at_turn: int | None,
    call: int,
    window: int | None,
    reserve: int | None,
    cache_key: str | None,
    estimator: str | None,
    no_check: bool,
    fmt: str,
    model: str | None,
    input_text: str | None,
) -> None:
    """Print the prompt the model saw at a past turn, or the one for the next call.

    With --at-turn N, the ledger is folded up to turn N's recorded prompt (its
    prompt_rendered record) and rendered again with the recorded budget and render
    config; the result must hash to the recorded prompt_hash, or the command exits 1.
    A turn without a recorded prompt is rendered as its first model call would see it.
    Without --at-turn, the prompt for the next model call is rendered from the whole
    ledger (with the newest recorded config, or --budget etc.).

    With --input TEXT, the prompt of a new turn's first model call for that input, as
    holon.Agent.preview renders it: the turn is folded after the ledger, never written
    (the ledger is opened read-only), and its records take the last record's timestamp.

    --format text writes exactly the prompt's bytes to a pipe or file, so `holon render
    L --at-turn 4 | b3sum` gives the recorded hash; on a terminal, control characters
    are shown as escapes (\\x1b) and a newline is added.

    Example: holon render runs/agent-7 --at-turn 12 --format anthropic
    """
    from holon.context import to_anthropic_messages, to_openai_chat, to_openai_responses

    if model is not None and fmt in ("text", "json"):
        # Checked before the ledger is read: a text or json prompt names no model.
        raise click.UsageError(
            "--model applies to the provider formats only (--format anthropic, openai or openai-responses)"
        )
    if input_text is not None and at_turn is not None:
        raise click.UsageError(
            "--input renders a new turn after the ledger's last; it cannot be given with --at-turn"
        )
    found = _resolve_prompt(
        path=path,
        at_turn=at_turn,
        call=call,
        window=window,
        reserve=reserve,
        cache_key=cache_key,
        estimator=estimator,
        no_check=no_check,
        input_text=input_text,
    )
    prompt = found.prompt
    if as_json and fmt == "text":
        fmt = "json"  # the provider formats are JSON already: --json keeps them
    if fmt == "text":
        # As bytes: click strips ANSI escapes from text written to a pipe or file, and a
        # tool output's colours are part of the prompt (and of its prompt_hash).
        _write_bytes(prompt.text.encode(), newline=True)
        if stderr_is_terminal():
            _echo(f"holon: {_prompt_header(found)}", err=True)
        return
    reserve_used = int(prompt.render_config.get("budget", {}).get("output_reserve") or 0)
    max_tokens = reserve_used if reserve_used > 0 else 4096
    if fmt == "json":
        _echo_json(
            {
                "turn": found.turn,
                "rendered_before_seq": found.before_seq,
                "recorded_seq": found.recorded_seq,
                "checked": found.checked,
                "matches": found.matches,
                "prompt_hash": prompt.prompt_hash,
                "recorded_prompt_hash": found.recorded.prompt_hash if found.recorded else None,
                "cache_key": prompt.cache_key,
                "prompt": prompt,
            }
        )
    elif fmt == "anthropic":
        _echo_json(to_anthropic_messages(prompt, model=model or _ANTHROPIC_MODEL, max_tokens=max_tokens))
    elif fmt == "openai":
        _echo_json(to_openai_chat(prompt, model=model or _OPENAI_MODEL))
    else:
        _echo_json(to_openai_responses(prompt, model=model or _OPENAI_MODEL))


class _SectionRow(msgspec.Struct, frozen=True, kw_only=True):
    """One section of an assembly plan, as `holon explain` shows it."""

    section: str
    stability: str
    priority: int | None
    tokens: int
    form: str
    status: str
    cache_breakpoint: bool
    why: str


#: Distinct omission reasons `holon explain` shows in a section's "why" cell.
_WHY_REASONS: Final = 3
_STATUS: Final = {"full": "kept", "compact": "compacted", "truncated": "truncated", "omitted": "omitted"}


@main.command()
@_common
@_render_options
def explain(
    *,
    path: Path,
    as_json: bool,
    at_turn: int | None,
    call: int,
    window: int | None,
    reserve: int | None,
    cache_key: str | None,
    estimator: str | None,
    no_check: bool,
) -> None:
    """Show how a prompt was assembled: each section's tokens and form, and what was left out.

    The prompt is chosen and checked exactly as in `holon render`. For each section:
    stability class, priority, tokens and whether it was kept, compacted, truncated or
    omitted, and why; then every omitted or shortened item with the ref that restores
    it (`holon get PATH REF`).

    Example: holon explain runs/agent-7 --at-turn 12
    """
    from holon.context import SECTION_PRIORITY

    found = _resolve_prompt(
        path=path,
        at_turn=at_turn,
        call=call,
        window=window,
        reserve=reserve,
        cache_key=cache_key,
        estimator=estimator,
        no_check=no_check,
    )
    prompt = found.prompt
    plan = prompt.plan
    reasons: dict[str, list[str]] = {}
    for o in plan.omitted:
        bucket = reasons.setdefault(o.section, [])
        if o.reason not in bucket:
            bucket.append(o.reason)
    rendered = {s.name: s for s in prompt.sections}
    rows: list[_SectionRow] = []
    for s in plan.sections:
        section = rendered.get(s.section)
        named = reasons.get(s.section, [])
        # Some reasons name their item (an episode, a decision, a call's arguments): a section
        # that left out dozens made one table cell of them all; the list below has each one.
        why = "; ".join(named[:_WHY_REASONS])
        if len(named) > _WHY_REASONS:
            why += f"; +{len(named) - _WHY_REASONS} more (listed below)"
        if not why and s.form != "full":
            why = "did not fit the budget in full"
        if s.section == "pending_delta" and found.delta_confirmed and s.form != "omitted":
            confirmed = (
                f"already confirmed: revision {prompt.identity.working_memory_revision}'s delta shown "
                "again in the same bytes, unpinned, so the cached prefix holds"
            )
            why = f"{confirmed}; {why}" if why else confirmed
        rows.append(
            _SectionRow(
                section=s.section,
                stability=section.stability if section else "-",
                priority=SECTION_PRIORITY.get(s.section),
                tokens=s.tokens,
                form=s.form,
                status=_STATUS[s.form],
                cache_breakpoint=bool(section and section.breakpoint),
                why=why,
            )
        )
    if as_json:
        _echo_json(
            {
                "turn": found.turn,
                "recorded_seq": found.recorded_seq,
                "checked": found.checked,
                "matches": found.matches,
                "cache_key": prompt.cache_key,
                "working_memory_revision": prompt.identity.working_memory_revision,
                "compression_epoch": prompt.identity.compression_epoch,
                "budget": plan.budget,
                "available": plan.available,
                "total_tokens": plan.total_tokens,
                "degraded": plan.degraded,
                "episodes": plan.episodes,
                "recalled": plan.recalled,
                "sections": rows,
                "omitted": plan.omitted,
                "evicted_refs": plan.evicted_refs,
            }
        )
        return
    _echo(_prompt_header(found))
    _echo(
        f"budget {_n(plan.budget)} - output reserve {_n(plan.budget - plan.available)} "
        f"= {_n(plan.available)} "
        f"available · used {_n(plan.total_tokens)} · estimator {prompt.estimator}"
        + (" · DEGRADED (prefix planned jointly with the turn)" if plan.degraded else "")
    )
    _echo(
        f"cache key {prompt.cache_key} (revision {prompt.identity.working_memory_revision}, "
        f"epoch {prompt.identity.compression_epoch})"
    )
    _echo(f"episodes selected: {', '.join(f'episode:{e}' for e in plan.episodes) or 'none'}")
    # The records the recalled section brought back for this input (holon.context.recall).
    _echo(f"recalled: {', '.join(plan.recalled) or 'none'}")
    _echo("")
    for line in _table(
        ["section", "stability", "priority", "tokens", "status", "why"],
        [
            [
                row.section + (" ◆" if row.cache_breakpoint else ""),
                row.stability,
                row.priority if row.priority is not None else "-",
                _n(row.tokens),
                row.status,
                row.why or "-",
            ]
            for row in rows
        ],
        right=(2, 3),
    ):
        _echo(line)
    _echo("(◆ = cache breakpoint: the prefix up to here is what a provider caches)")
    _echo("")
    if not plan.omitted:
        _echo("nothing was omitted or shortened")
        return
    _echo(f"omitted or shortened ({len(plan.omitted)}); restore any with `holon get PATH REF`:")
    # Identical rows are one row with a count: results with the same output share one blob
    # (`ls` run twice), and two rows alike read as a mistake. --json keeps every omission.
    same = Counter((o.section, o.ref, o.tokens, o.reason) for o in plan.omitted)
    for line in _table(
        ["section", "ref", "tokens", "reason"],
        [
            [section, ref, _n(tokens), reason if n == 1 else f"{reason} ({n} items share this ref)"]
            for (section, ref, tokens, reason), n in same.items()
        ],
        right=(2,),
    ):
        _echo("  " + line)


# --------------------------------------------------------------------------- prompts

#: How many prompts that differ `holon prompts` names without --each.
_PROMPTS_NAMED: Final = 20

_STATUS_TEXT: Final = {
    "reproduced": "reproduced",
    "differs": "DIFFERS",
    "not_comparable": "not comparable",
    "unconfigured": "no render config",
}


@main.command()
@_common
@click.option("--from-turn", type=int, metavar="N", help="Check the prompts of turn N and later only.")
@click.option("--until-turn", type=int, metavar="N", help="Check the prompts up to turn N only.")
@click.option("--each", is_flag=True, help="List every prompt, not only those that do not reproduce.")
@click.option("--check", is_flag=True, help="Exit 1 when a prompt does not reproduce.")
def prompts(
    *, path: Path, as_json: bool, from_turn: int | None, until_turn: int | None, each: bool, check: bool
) -> None:
    """Render every recorded prompt again: does it reproduce, and where did its cached prefix break?

    Each prompt_rendered record is rendered from the records before it with the budget and
    config it records, as `holon render --at-turn` renders one, and its hash compared. A
    prompt recorded by another renderer or estimator version is "not comparable", not a
    failure; one recorded without a render config cannot be rendered again.

    Each prompt is also compared with the previous one: the whole lines they share (at most
    what a provider's cache can serve) and the section where they first differ. The table
    sums the tokens not shared by that section, at a turn's first prompt and later in it;
    "(appended)" is a prompt that only added to the previous one.

    --from-turn and --until-turn must select some of the ledger's turns: a range past its
    last turn or before its first is a usage error naming the turns it holds.

    Example: holon prompts runs/agent-7 --from-turn 100 --check
    """
    from holon.replay import PromptsSummary, check_prompts_of

    summary = PromptsSummary()
    named: list[PromptCheck] = []
    with _reading(path) as ledger:
        agent = ledger.agent_id
        count = ledger.head()[0] + 1
        # No bar while the prompts print to the same terminal: it would be drawn between them.
        passes = ("reading",) if each and not as_json and sys.stdout.isatty() else ("reading", "rendering")
        labels = iter(passes)

        def read() -> Iterator[r.Record]:
            label = next(labels, None)
            records = ledger.read(0, count)
            return records if label is None else progress_items(records, length=count, label=label)

        checks = check_prompts_of(
            read,
            agent_id=agent,
            from_turn=from_turn,
            until_turn=until_turn,
            blobs=ledger.get_blob,
            older=_records_upto(ledger),
        )

        def counted() -> Iterator[PromptCheck]:
            for item in checks:
                summary.add(item)
                if item.status == "differs" and len(named) < _PROMPTS_NAMED:
                    named.append(item)
                yield item

        with _report():
            if as_json:
                _echo_json_list({"agent_id": agent}, "prompts", counted(), lambda: {"summary": summary})
            else:
                for item in counted():
                    if each:
                        _echo(_prompt_line(item))
    if not as_json:
        ranged = from_turn is not None or until_turn is not None
        for line in _prompts_text(agent, summary, [] if each else named, listed=each, ranged=ranged):
            _echo(line)
    if check and summary.first_difference is not None:
        first = named[0]  # the differing prompts, first one first
        # A prompt_rendered outside any turn (`holon append` takes one) has no --at-turn to
        # name: the hint was `--at-turn None`, which click refuses.
        where, hint = (
            (
                f"turn {first.turn}, call {first.call}",
                f"`holon explain {shlex.quote(str(path))} --at-turn "
                f"{first.turn} --call {first.call}` shows how it is rendered now",
            )
            if first.turn is not None
            else (
                "outside any turn",
                "it names no turn, so `holon render` and `holon explain` cannot select it",
            )
        )
        raise CheckFailed(
            f"the prompt at seq {first.seq} ({where}) does not reproduce: "
            f"this holon renders {first.rendered_hash}, the ledger records {first.recorded_hash}, with the "
            f"same renderer and estimator versions; {hint}"
        )


@main.command()
@_common
@click.option(
    "-o",
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    metavar="OUT",
    help="The new ledger to write (must not exist); its simulation.json holds the comparison.",
)
@click.option(
    "--budget",
    "window",
    type=click.IntRange(min=1, max=_MAX_TOKENS),
    default=DEFAULT_BUDGET.context_window,
    show_default=True,
    metavar="TOKENS",
    help="Context window of every simulated call.",
)
@click.option(
    "--output-reserve",
    "reserve",
    type=click.IntRange(min=0, max=_MAX_TOKENS),
    metavar="TOKENS",
    help="Tokens kept free for the answer (default: an eighth of --budget, as the evaluation keeps).",
)
@click.option(
    "--estimator",
    type=click.Choice(available_estimators()),
    default=DEFAULT_ESTIMATOR,
    show_default=True,
    help="Token estimator (the tokenizer) to render and count with.",
)
@click.option(
    "--cache-key",
    default="default",
    show_default=True,
    metavar="KEY",
    help="Prompt cache key of the rendered prompts.",
)
@click.option(
    "--agent-id",
    metavar="ID",
    help="Agent id of OUT (default: PATH's); another one lets `holon audit PATH OUT` load both.",
)
@click.option(
    "--layout",
    # The renderer's layouts (holon.context.sections.LAYOUTS; tests/test_simulate.py checks).
    type=click.Choice(["recitation", "rfc"]),
    default="recitation",
    show_default=True,
    help="Order of the prompt's sections (docs/context-rendering.md, Layouts).",
)
def simulate(
    *,
    path: Path,
    as_json: bool,
    out: Path,
    window: int,
    reserve: int | None,
    estimator: str,
    cache_key: str,
    agent_id: str | None,
    layout: str,
) -> None:
    """Replay the model calls of PATH under holon into a new ledger OUT, beside what its tool sent.

    The model calls are found in PATH's evidence (an imported transcript's too: a call
    precedes each run of the model's output), and each gets the prompt holon's runtime
    would have sent with the budget given: OUT holds the evidence, the derived records
    and one prompt_rendered record per rendered prompt, written as the runtime writes
    them, so `holon prompts OUT --check`, `holon stats OUT` and `holon audit OUT --report
    tokens` read them. Beside them, OUT/simulation.json compares every call with what
    the transcript's own tool sent — its whole history, truncated oldest-first at the
    window (the evaluation's full-history policy) — under the same two cache models:
    tokens, cached and written tokens per call, and the input cost (docs/simulate.md).
    PATH is only read.

    Example: holon simulate runs/imported -o runs/imported-sim --budget 128000
    """
    from holon.context import RenderConfig
    from holon.simulate import SIMULATION_FILE, simulate_ledger, simulation_budget

    budget = simulation_budget(window, reserve)
    config = RenderConfig(estimator=estimator, prompt_cache_key=cache_key, layout=layout)  # type: ignore[arg-type]
    with _reading(path) as ledger, progress_total("simulating") as progress:
        result = simulate_ledger(
            ledger, out, budget, config, agent_id=agent_id, source_name=str(path), progress=progress
        )
    if as_json:
        _echo_json(
            {
                "out": str(out),
                "calls": len(result.calls),
                "prompts_rendered": result.prompts_rendered,
                "context_window": result.context_window,
                "output_reserve": result.output_reserve,
                "holon": msgspec.to_builtins(result.holon),
                "tool": msgspec.to_builtins(result.tool),
            }
        )
        return
    ours, theirs = result.holon, result.tool
    _echo(
        f"simulated {_count(len(result.calls), 'model call')} of {path} into {out} "
        f"({_count(result.prompts_rendered, 'prompt')} rendered; window {result.context_window:,}, "
        f"{result.output_reserve:,} kept for the answer)"
    )
    rows = []
    for name, series in (("holon", ours), (f"tool ({result.tool_stand_in})", theirs)):
        rows.append(
            (
                name,
                _n(series.tokens),
                _n(series.max_tokens),
                _share(series.cached_prefix, series.tokens),
                _n(round(series.cost_prefix)),
                _share(series.cached_breakpoints, series.tokens),
                _n(round(series.cost_breakpoints)),
            )
        )
    headers = ("series", "tokens", "max", "cached (prefix)", "cost (prefix)", "cached (bp)", "cost (bp)")
    for line in _table(headers, rows, right=range(1, 7)):
        _echo(line)
    if theirs.cost_prefix and theirs.cost_breakpoints:
        _echo(
            f"input cost, holon / tool: {ours.cost_prefix / theirs.cost_prefix:.2f}x (prefix cache), "
            f"{ours.cost_breakpoints / theirs.cost_breakpoints:.2f}x (breakpoints)"
        )
    _echo(f"every call: {out / SIMULATION_FILE}")
    _echo(f"check the prompts: holon prompts {shlex.quote(str(out))} --check")


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "—"


def _prompt_line(item: PromptCheck) -> str:
    """One prompt of `holon prompts`: where it is, whether it reproduced, what it shared."""
    from holon.replay import APPENDED

    turn = f"turn {item.turn}" if item.turn is not None else "no turn"
    parts = [f"{turn} call {item.call}", f"seq {item.seq}", _STATUS_TEXT[item.status]]
    if item.tokens is not None:
        parts.insert(2, f"{item.tokens:,} tokens")
    if item.shared is not None and item.breaks_at is not None:
        changed = f" ({', '.join(item.changed)})" if item.changed else ""
        where = "only added to the previous" if item.breaks_at == APPENDED else f"breaks at {item.breaks_at}"
        parts.append(f"shares {item.shared:,} · {where}{changed}")
    line = " · ".join(parts)
    return f"{line}: {'; '.join(item.reasons)}" if item.reasons and item.status != "differs" else line


def _prompts_text(
    agent: str, summary: PromptsSummary, named: Sequence[PromptCheck], *, listed: bool, ranged: bool
) -> list[str]:
    """The summary of `holon prompts`: statuses, the shared share and the table of breaks."""
    statuses = " · ".join(
        f"{_STATUS_TEXT[status]} {summary.by_status.get(status, 0):,}" for status in _STATUS_TEXT
    )
    # After a list of every prompt, a blank line first.
    lines = [""] if listed else []
    lines.append(f"agent {agent} · {_count(summary.prompts, 'recorded prompt')} rendered again")
    if not summary.prompts:
        where = "the turns asked for" if ranged else "this ledger"
        return [*lines, f"nothing to check: no prompt_rendered record in {where}"]
    lines.append(statuses)
    lines += [
        f"  {_count(n, 'prompt')}: {reason}"
        for reason, n in sorted(summary.reasons.items(), key=lambda x: (-x[1], x[0]))
    ]
    share = summary.shared_share
    if share is None:
        return lines
    lines.append(
        f"shared with the previous prompt: {share:.1%} of {summary.compared_tokens:,} tokens "
        f"({_count(summary.compared, 'prompt')} compared)"
    )
    total = summary.compared_tokens

    def cell(tokens: int) -> str:
        return f"{tokens / total:.1%}" if tokens else "-"

    rows = sorted(summary.unshared.items(), key=lambda item: (-sum(item[1]), item[0]))
    lines += ["", "tokens not shared, by the section where a prompt first differs from the previous one:"]
    lines += [
        "  " + line
        for line in _table(
            ["section", "turn start", "later in turn", "all"],
            [[name, cell(first), cell(later), cell(first + later)] for name, (first, later) in rows],
            right=(1, 2, 3),
        )
    ]
    if named:
        lines += [
            "",
            "prompts that differ from what the ledger records (same renderer and estimator versions):",
        ]
        lines += [f"  {_prompt_line(item)}" for item in named]
        more = summary.by_status.get("differs", 0) - len(named)
        if more > 0:
            lines.append(f"  … and {more:,} more (--each lists every prompt)")
    return lines


# --------------------------------------------------------------------------- memory / episodes


def _delta_summary(delta: r.WorkingMemoryDelta) -> str:
    return (
        f"revision {delta.from_revision} → {delta.to_revision} ({delta.reason.replace('_', ' ')}, "
        f"evidence ledger:{delta.evidence_from_seq}..{delta.evidence_to_seq})"
    )


@main.command()
@_common
@click.option(
    "--at-turn", type=int, metavar="N", help="Working memory after turn N's post-turn refresh (default: now)."
)
def memory(path: Path, as_json: bool, at_turn: int | None) -> None:
    """Show working memory: the snapshot, the pending delta and the episode being built.

    The snapshot lines cite the ledger seqs their facts came from ([ledger:<seq>]).

    Example: holon memory runs/agent-7 --at-turn 12
    """
    from holon.replay import memory_of

    with _reading(path) as ledger:
        read, resume = _passes(ledger)
        view = memory_of(read, at_turn, resume=resume)
    if as_json:
        _echo_json(view)
        return
    when = f"after turn {at_turn}" if at_turn is not None else "now"
    confirmed = view.confirmed_revision if view.confirmed_revision is not None else "none"
    _echo(
        f"working memory {when} (seq {view.after_seq}) · revision {view.revision} · compression epoch "
        f"{view.compression_epoch} · last revision shown to the model: {confirmed} · "
        f"{view.archived_episodes} episode(s) archived"
    )
    _echo("")
    _echo("snapshot:")
    for line in view.lines or ("(empty: no work item, plan or facts yet)",):
        _echo(f"  {line}")
    _echo("")
    delta = view.pending_delta
    if delta is not None:
        _echo(f"pending delta: {_delta_summary(delta)} — pinned in every prompt until one confirms it")
    elif view.latest_delta is not None:
        # The renderer keeps showing a confirmed delta while its revision holds (same
        # bytes, same cache prefix); say so, or `explain` seems to contradict this.
        delta = view.latest_delta
        _echo(
            f"pending delta: none — a prompt confirmed revision {view.revision}; its delta, "
            f"{_delta_summary(delta)}, may still be shown, unpinned, while the revision holds"
        )
    else:
        _echo("pending delta: none (the model has seen the current revision)")
    for line in delta.lines if delta is not None else ():
        _echo(f"  {line}")
    _echo("")
    b = view.builder
    if b.turns == 0 and b.from_seq is None:
        _echo("active episode: nothing accumulated since the last episode")
        return
    turns = f"turns {b.first_turn}-{b.last_turn}" if b.first_turn is not None else "no turns yet"
    _echo(
        f"active episode: {b.work_item_id or 'no work item'}, {turns} ({b.turns} turn(s)), from ledger:"
        f"{b.from_seq}, {b.tool_calls} tool call(s), {b.failed_calls} failed"
    )
    for label, items in (
        ("files", b.files),
        ("commands", b.commands),
        ("verification", b.verification),
        ("decisions", b.decisions),
        ("results", b.results),
    ):
        if items:
            _echo(f"  {label}: {'; '.join(items)}")


@main.command()
@_common
@click.option("--search", "query", metavar="QUERY", help="Rank episodes by BM25 relevance to QUERY.")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Most episodes shown with --search.",
)
def episodes(path: Path, as_json: bool, query: str | None, limit: int) -> None:
    """List the archived episodes (finished stretches of work), or search them.

    Each episode is an immutable record of turns, work item, files, commands and
    results; restore one in full with `holon get PATH episode:<id>`.

    Example: holon episodes runs/agent-7 --search "billing migration"
    """
    import holon.records as r
    from holon.context import EpisodeIndex

    if query is None and _given("limit"):
        raise click.UsageError("--limit applies to --search only; without it every episode is listed")
    if query is not None:
        _check_query(query)
    with _reading(path) as ledger:
        # Streamed: the episodes are a small part of a long ledger.
        archive = [rec.body for rec in _each_record(ledger) if isinstance(rec.body, r.ContextEpisodeRecord)]
    if query is None:
        if as_json:
            _echo_json(archive)
            return
        if not archive:
            _echo("no episodes archived yet")
            return
        for line in _table(
            ["id", "turns", "work", "boundary", "evidence", "objective"],
            [
                [
                    e.episode_id,
                    f"{e.first_turn}-{e.last_turn}",
                    e.work_item_id or "-",
                    e.boundary_reason,
                    f"ledger:{e.from_seq}..{e.to_seq}",
                    _clip(e.objective, 50),
                ]
                for e in archive
            ],
            right=(0,),
        ):
            _echo(line)
        return
    hits = EpisodeIndex(archive).search(query, limit=limit)
    if as_json:
        _echo_json(
            [
                {
                    "ref": f"episode:{h.episode.episode_id}",
                    "score": round(h.score, 6),
                    "matched": h.matched,
                    "episode": h.episode,
                }
                for h in hits
            ]
        )
        return
    if not hits:
        _echo(f"no episode matches {query!r}")
        return
    for line in _table(
        ["ref", "score", "turns", "work", "matched", "objective"],
        [
            [
                f"episode:{h.episode.episode_id}",
                f"{h.score:.3f}",
                f"{h.episode.first_turn}-{h.episode.last_turn}",
                h.episode.work_item_id or "-",
                ", ".join(h.matched),
                _clip(h.episode.objective, 40),
            ]
            for h in hits
        ],
        right=(1,),
    ):
        _echo(line)


# --------------------------------------------------------------------------- get / search


def _check_query(query: str) -> None:
    """Refuse a query with no word to search for (as holon_search tells the model).

    Its answer was "nothing matches": read as "the ledger holds no such thing", when the
    query (punctuation, an emoji, only common words) could match nothing in any ledger.
    """
    from holon.search import search_terms

    if not search_terms(query):
        quoted = repr(query if len(query) <= 200 else query[:199] + "…")
        raise click.UsageError(
            f"the query {quoted} has no words to search for: search for words of two or more "
            "letters or digits (common words such as 'the' or 'with' are ignored)"
        )


@main.command()
@_common
@click.argument("ref")
def get(path: Path, as_json: bool, ref: str) -> None:
    """Restore REF to its original bytes: ledger:<seq>, blob:<hash> or episode:<id>.

    Prints exactly what a prompt placeholder promises: a tool result's full output
    (from its blob if it was moved), a message's text, a turn's input, an episode's
    JSON, a blob's bytes; any other record as its canonical JSON line. Those bytes go
    unchanged to a pipe or file; on a terminal, control characters and bytes that are
    not UTF-8 are shown as escapes (\\x1b, \\xff). With --json, the whole record or
    episode (and a blob as text or base64).

    Example: holon get runs/agent-7 ledger:1234 > output.txt
    """
    import holon.records as r
    from holon.context import restore, restore_bytes
    from holon.replay import LedgerRefSource

    with _reading(path) as ledger:
        source = LedgerRefSource(ledger)
        if not as_json:
            data = restore_bytes(ref, source)
            _write_bytes(data, newline=not data.endswith(b"\n"))
            return
        found = restore(ref, source)
    if isinstance(found, bytes):
        try:
            text: str | None = found.decode()
        except UnicodeDecodeError:
            text = None
        _echo_json(
            {
                "ref": ref,
                "blob": {
                    "size": len(found),
                    "text": text,
                    "base64": None if text is not None else base64.b64encode(found).decode(),
                },
            }
        )
    elif isinstance(found, r.ContextEpisodeRecord):
        _echo_json({"ref": ref, "episode": found})
    else:
        _echo_json({"ref": ref, "record": msgspec.json.decode(r.encode_json_record(found))})


@main.command()
@_common
@click.argument("query")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Most hits shown.")
@click.option(
    "--only",
    type=click.Choice(["episodes", "evidence"]),
    help="Search only archived episodes, or only evidence records.",
)
def search(path: Path, as_json: bool, query: str, limit: int, only: str | None) -> None:
    """Search episodes and evidence (messages, tool calls and results, plans, ...) with BM25.

    Identifiers match as written and by their parts (#123, pull/123, src/shop/cart.py, a
    URL). An operator's request or a decision counts more than a plan's restatement, a
    tool's result more than the call's echo, and a newer record a little more than an
    older one. Near-duplicates (a plan step restated in every plan update) are one hit
    with their count and every ref. Each hit says why it matched (why: the terms, the
    field and its weight; --json: matched, field, why, count, refs).

    Ranking is deterministic (ties go to the more recent record). Each hit shows the
    ref that restores it and where it came from: the record, its turn and the work item
    it belonged to (the one it names, else the one active when it was recorded; --json:
    work_item), or the episode and its work item. A long tool output kept in the blob
    store is searched by its text (its first and last 500,000 characters), not only by
    its preview. The model's own recall calls (holon_get, holon_search) are left out,
    as the agent's search leaves them out.

    A query with no word to search for (punctuation, only common words such as "the")
    is a usage error, not "nothing matches".

    Example: holon search runs/agent-7 "flaky test_checkout"
    """
    from holon.runtime import blob_text_of, is_recall
    from holon.search import MemorySearch

    _check_query(query)
    with _reading(path) as ledger:
        # As Agent.search: the model's own recall calls are not evidence to find.
        # Streamed: the index keeps neither the records nor their searchable text.
        # A blob-stored output (over the blob threshold) is searched by its text, read from
        # the blob store, not only by its 200-character preview.
        # Built for this one query: the hits of a full index, without its every term's postings;
        # holding no text, a hit's record is read back by its seq.
        index = MemorySearch(
            (rec for rec in _each_record(ledger) if not is_recall(rec)),
            blob_text=blob_text_of(ledger),
            read_record=ledger.get,
            for_query=query,
        )
        hits = index.search(query, limit=limit, only=only)  # type: ignore[arg-type]
    if index.unread_blobs:
        _echo(
            f"holon: warning: {index.unread_blobs:,} blob-stored tool output(s) could not be read "
            f"(missing or damaged) and were searched by their preview only; `holon verify {path}` "
            "names them",
            err=True,
        )
    if as_json:
        _echo_json(hits)
        return
    if not hits:
        _echo(f"nothing matches {query!r}")
        return
    for i, hit in enumerate(hits, 1):
        _echo(f"{i:>2}. {hit.ref}  score {hit.score:.3f}  {hit.provenance}")
        _echo(f"    {hit.snippet}")
        _echo(f"    why: {hit.why}")
        if hit.count > 1:
            _echo(f"    {hit.count} near-identical hits: {', '.join(hit.refs)}")


@main.command(name="mcp")
@_common
def mcp_(path: Path, as_json: bool) -> None:
    """Serve holon_search and holon_get for the ledger at PATH to an MCP client, over stdio.

    Any client of the Model Context Protocol (Claude Code, Cursor, the OpenAI Agents SDK)
    starts this command and gets the two recall tools holon's own runtime offers its
    model: holon_search (BM25 over episodes and evidence) and holon_get (the original
    text behind a ref, a page at a time). The ledger is opened read-only: the server
    never writes to it, runs beside the agent appending to it, and sees each record as
    soon as it is appended. Stdout carries the protocol; warnings go to stderr. With
    --json, it does not serve: it prints the tools and instructions it would offer, and
    exits. Needs the `mcp` extra (pip install 'holon[mcp]').

    Example: claude mcp add holon -- holon mcp runs/agent-7
    """
    from holon.integrations import describe_mcp, serve_mcp

    if as_json:
        _echo_json(describe_mcp(path))
        return
    serve_mcp(path)


# --------------------------------------------------------------------------- verify / stats


@main.command()
@_common
def verify(path: Path, as_json: bool) -> None:
    """Check the whole ledger: frames, hash chain, blobs, and derived records.

    Every frame checksum and chain link, every referenced blob's hash, and replay
    verification of every derived record. Exit code 0 only if all hold: 3 when stored
    bytes are damaged (each problem is listed with its file and byte offset), 1 when
    the bytes are intact but a derived record differs from what this holon derives.
    A torn tail (bytes after the last valid frame, as a crash mid-append leaves them)
    is a warning, not a failure: the next open for writing cuts it.

    Example: holon verify runs/agent-7
    """
    import holon.records as r
    from holon.projections import DEFAULT_CONFIG, verify_derivations
    from holon.replay import projection_config_of

    with _reading(path) as ledger:
        with progress_total("verifying storage") as advance:
            report = ledger.verify(progress=advance)
        check = None
        projection = DEFAULT_CONFIG
        if report.ok:
            # A pass of its own: the config is needed before the first record is folded,
            # and the records are streamed rather than held. Both stop at the head whose
            # storage was verified: an agent appending meanwhile would have the derivations
            # checked on records the report's storage figures do not hold.
            end = report.head[0] + 1
            projection = projection_config_of(
                progress_items(ledger.read(0, end), length=end, label="reading prompts")
            )
            records = progress_items(ledger.read(0, end), length=end, label="verifying derivations")
            check = verify_derivations(records, config=projection)
    tail = report.torn_tail
    # Where the damage is a cut of the active tail, say so: that one has a repair.
    damaged = None if report.ok else _damaged_tail_of(path)
    with _report():
        if as_json:
            _echo_json(
                {
                    "ok": report.ok and check is not None and check.ok,
                    "findings": _verify_findings(report, check),
                    "storage": {
                        "ok": report.ok,
                        "records_checked": report.records_checked,
                        "blobs_checked": report.blobs_checked,
                        "head_seq": report.head[0],
                        "head_hash": report.head[1],
                        "problems": [
                            {
                                "file": p.file,
                                "offset": p.offset,
                                "decompressed": p.decompressed,
                                "message": p.message,
                            }
                            for p in report.problems
                        ],
                        "torn_tail": None
                        if tail is None
                        else {
                            "file": tail.file,
                            "offset": tail.offset,
                            "bytes": tail.length,
                            "reason": tail.reason,
                        },
                        "warnings": report.warnings,
                        "ts_out_of_range": None
                        if not report.ts_out_of_range_count
                        else {
                            "count": report.ts_out_of_range_count,
                            "examples": [{"seq": seq, "ts": ts} for seq, ts in report.ts_out_of_range],
                        },
                        "damaged_tail": damaged,
                    },
                    "derivations": check,
                }
            )
        else:
            if report.ok:
                seq, digest = report.head
                head = f"head seq {seq} ({digest[:16]}…)" if seq >= 0 else f"empty (genesis {digest[:16]}…)"
                _echo(f"frames and chain  ok · {_n(report.records_checked)} records · {head}")
                _echo(f"blobs             ok · {_n(report.blobs_checked)} checked")
            else:
                _echo(f"storage           {len(report.problems)} problem(s):")
                for p in report.problems:
                    _echo(f"  {p}")
                seq, digest = report.head
                _echo(
                    f"verified          {_seq_span(0, seq)} (head {digest[:16]}…): a chain from seq 0, "
                    "every frame and link checked"
                    if seq >= 0
                    else "verified          no record: the first problem comes before seq 0 checks out"
                )
                if damaged is not None and damaged.header:
                    _echo(
                        f"repair            the active segment {damaged.file} is shorter than its header: "
                        f"`holon repair {_shell_path(path)}` shows how to give it a new one"
                    )
                elif damaged is not None:
                    _echo(
                        f"repair            the damage at byte {damaged.offset} of {damaged.file} is in the "
                        f"active segment's tail: `holon repair {_shell_path(path)}` shows what cutting it "
                        "there loses"
                    )
            if tail is not None:
                size = "1 byte" if tail.length == 1 else f"{_n(tail.length)} bytes"
                _echo(
                    f"torn tail         {size} after the last valid frame (byte {tail.offset} of "
                    f"{tail.file}): what a crash mid-append leaves; opening for writing cuts them"
                )
            if report.ts_out_of_range_count:
                first_seq = report.ts_out_of_range[0][0]
                _echo(
                    f"record times      {_n(report.ts_out_of_range_count)} record(s) hold a ts outside "
                    f"{r.MIN_TS}..{r.MAX_TS}, the first at seq {first_seq}: written before appends "
                    "checked it (see the warning)"
                )
            if check is not None:
                if check.ok:
                    # The writer stopped between a turn_ended and its derived records: no divergence,
                    # the runtime appends them on resume (as replay --check says).
                    pending = ""
                    if check.pending_refresh:
                        pending = " · the last turn's refresh is still to be appended"
                    _echo(
                        f"derivations       ok · {check.refreshes} post-turn refreshes re-run · "
                        f"{check.derived_checked} derived records equal{pending}"
                    )
                else:
                    assert check.divergence is not None
                    divergence = check.divergence
                    _echo(f"derivations       FAILED at seq {divergence.seq}: {divergence.describe()}")
                    for line in _diff_lines(check.divergence):
                        _echo(line)
            else:
                _echo("derivations       not checked (the stored bytes must verify first)")
    for warning in report.warnings:
        _echo(f"holon: warning: {warning}", err=True)
    if not report.ok:
        first = report.problems[0]
        raise _Corrupt(
            f"ledger {path} is corrupt: {len(report.problems)} problem(s); first: {first}",
            error_type=LedgerCorrupt.__name__,
        )
    if check is not None and not check.ok:
        raise _diverged(check, projection)


def _verify_findings(report: VerifyReport, check: VerificationReport | None) -> list[dict[str, Any]]:
    """Every finding of `holon verify`, one shape for all: what a script acts on.

    ``severity`` is ``error`` for what fails the command (exit 3 for storage, 1 for a
    derivation) and ``warning`` for what does not (exit 0); ``kind`` says which check
    found it; ``file``, ``offset`` (``decompressed``: into a sealed segment's
    decompressed bytes) and ``seq`` locate it where known, else null; ``message`` is the
    text the report prints.
    """

    def finding(
        severity: str,
        kind: str,
        message: str,
        *,
        file: str | None = None,
        offset: int | None = None,
        decompressed: bool = False,
        seq: int | None = None,
    ) -> dict[str, Any]:
        return {
            "severity": severity,
            "kind": kind,
            "file": file,
            "offset": offset,
            "decompressed": decompressed,
            "seq": seq,
            "message": message,
        }

    out = [
        finding("error", "storage", p.message, file=p.file, offset=p.offset, decompressed=p.decompressed)
        for p in report.problems
    ]
    tail, torn = report.torn_tail, report.torn_tail_warning
    if tail is not None and torn is not None:
        out.append(finding("warning", "torn_tail", torn, file=tail.file, offset=tail.offset))
    odd_ts = report.ts_warning
    if odd_ts is not None:
        out.append(finding("warning", "ts_out_of_range", odd_ts, seq=report.ts_out_of_range[0][0]))
    out += [
        finding(
            "warning",
            "ignored_file",
            "not a blob: its name starts with a dot, as a file manager's files do (.DS_Store); holon "
            "never writes such a name, and verify skipped it",
            file=ignored,
        )
        for ignored in report.ignored
    ]
    if check is not None and check.divergence is not None:
        divergence = check.divergence
        out.append(finding("error", "derivation", divergence.describe(), seq=divergence.seq))
    return out


def _shell_path(path: Path) -> str:
    return shlex.quote(str(path))


def _damaged_tail_of(path: Path) -> DamagedTail | None:
    """The damaged active tail `holon repair` would cut, if that is where damage is."""
    from holon.ledger import inspect_tail

    try:
        return inspect_tail(path)
    except HolonError:  # damage a cut cannot repair: verify has listed it already
        return None


def _seq_span(first: int, last: int) -> str:
    return f"seq {first}" if first == last else f"seqs {first}-{last}"


def _header_repair_lines(path: Path, found: DamagedTail) -> list[str]:
    """What `holon repair` shows for an active segment shorter than its header."""
    return [
        f"damaged segment   {found.file}: {_n(found.length)} bytes, shorter than its segment header",
        "holds             no record (a segment's records follow its header); holon writes a header "
        "whole, so a copy tool or a full disk cut this file",
        f"lost              records from seq {found.first_seq} on, if the segment held any, went with its "
        "bytes: if the ledger is a copy, copy it again from its source (or a backup) instead",
        f"to repair         holon repair {_shell_path(path)} --cut-at 0  (writes a new header, committing "
        f"to {f'seq {found.first_seq - 1}' if found.first_seq else 'the genesis hash'}; the bytes are kept "
        "in the ledger's cut/ directory)",
    ]


@main.command()
@_common
@click.option(
    "--cut-at",
    "cut_at",
    type=click.IntRange(min=0),
    metavar="OFFSET",
    help="Cut the active segment at this byte, where the damage starts (as shown without it).",
)
def repair(path: Path, as_json: bool, cut_at: int | None) -> None:
    """Cut a damaged tail off the active segment (after a power loss under fsync batch/never).

    Opening refuses an active segment whose damaged frame has intact frames after it:
    a power loss can write the unsynced tail back out of order, but only you know
    whether those records were acknowledged. Without --cut-at, nothing is changed: it
    shows where the damage starts and which seqs a cut there loses, and exits 3 (the
    ledger is corrupt until cut; 0 when there is nothing to cut). With --cut-at OFFSET
    (that byte), it checks everything an open for writing checks, keeps the bytes it
    cuts in PATH/cut/, truncates, and exits 0. Damage anywhere else is not a cut
    (`holon verify` lists it).

    Example: holon repair runs/agent-7 --cut-at 964
    """
    from holon.ledger import cut_tail, inspect_tail

    found = inspect_tail(path)
    if cut_at is None:
        _show_damaged_tail(path, found, as_json)
        if found is not None:
            what = "an active segment shorter than its header" if found.header else "a damaged tail"
            raise _Corrupt(
                f"ledger {path} has {what} (nothing was changed); cut it with "
                f"`holon repair {_shell_path(path)} --cut-at {found.offset}`",
                error_type=LedgerCorrupt.__name__,
            )
        return
    action = cut_tail(path, cut_at)
    assert found is not None  # cut_tail refuses an offset where inspect_tail found nothing
    with _report():
        if as_json:
            # seqs: the first and last the cut lost; none for a header (the file held no record).
            _echo_json({"cut": action, "seqs": [] if found.header else [found.first_seq, found.last_seq]})
        elif found.header:
            _echo(f"new header        {action.file} ({_n(action.bytes_cut)} bytes it held cut)")
            _echo(f"kept in           {action.kept}")
            _echo(f"next seq          {found.first_seq}")
        else:
            _echo(
                f"cut               {_n(action.bytes_cut)} bytes at byte {action.offset} of {action.file} "
                f"({_seq_span(found.first_seq, found.last_seq)})"
            )
            _echo(f"kept in           {action.kept}")
            _echo(f"next seq          {found.first_seq}")


def _show_damaged_tail(path: Path, found: DamagedTail | None, as_json: bool) -> None:
    with _report():
        if as_json:
            _echo_json({"damaged_tail": found, "cut_at": None if found is None else found.offset})
            return
        if found is None:
            _echo(
                "nothing to cut: the active segment's frames are valid to its end or to a torn tail "
                "(which any open for writing cuts); `holon verify` checks the rest"
            )
            return
        if found.header:
            for line in _header_repair_lines(path, found):
                _echo(line)
            return
        after = found.later_seqs
        _echo(f"damaged frame     {found.file} at byte {found.offset}: {found.damage}")
        _echo(
            f"after it          {_n(found.length)} bytes to the end of the file; "
            + (
                f"{_count(len(after), 'intact frame')} ({_seq_span(after[0], after[-1])})"
                if after
                else "no intact frame found"
            )
        )
        _echo(
            f"a cut loses       {_seq_span(found.first_seq, found.last_seq)}. After a power loss under "
            f'fsync "batch" or "never", none was acknowledged if your last flush() returned before '
            f"seq {found.first_seq} was appended; otherwise acknowledged records were damaged"
        )
        _echo(
            f"to cut            holon repair {_shell_path(path)} --cut-at {found.offset}"
            "  (the bytes cut are kept in the ledger's cut/ directory)"
        )


@main.command()
@_common
def stats(path: Path, as_json: bool) -> None:
    """Summarize the ledger: records by kind, turns, prompt tokens per section, evictions, cache churn.

    Token figures come from the recorded prompts (prompt_rendered records): min, median
    and max per section over the prompts that rendered it. Cache-key changes count
    consecutive prompts whose cacheable prefix changed; unknown outcomes are tool calls
    whose effect the ledger cannot tell (a result recorded as unknown after a crash, or
    no result at all). Evictions (items prompts left out or shortened) are counted by
    cause: the reason with the item it names as <id> and its counts as N, as `holon audit
    --report evictions` counts them; --json has them by reason too.

    Example: holon stats runs/agent-7
    """
    from holon.replay import ledger_projection, ledger_stats

    with _reading(path) as ledger:
        read, resume = _passes(ledger)
        agent = ledger.agent_id
        # Passes that hold no records: the config (from the newest checkpoint when it states it,
        # as `holon memory` takes it; else a pass of its own), then the counts.
        projection = ledger_projection(read, resume)
        s = ledger_stats(read(), projection=projection, resume=resume)
    if as_json:
        _echo_json({"agent_id": agent, **msgspec.to_builtins(s)})
        return
    span = ""
    if s.first_ts is not None and s.last_ts is not None:
        span = f" · {(s.last_ts - s.first_ts) / 3_600_000:.1f} h of ledger time"
    _echo(f"agent {agent} · {_count(s.records, 'record')} · {_count(s.turns, 'turn')}{span}")
    outcomes = ", ".join(f"{k} {v}" for k, v in s.outcomes.items()) or "none"
    _echo(f"turn outcomes: {outcomes}")
    _echo(
        f"tool calls: {_n(s.tool_calls)} · unknown outcomes: {s.unknown_outcomes} · "
        f"outputs in blobs: {s.blobs}"
    )
    _echo(
        f"working memory revision {s.revision} · compression epoch {s.compression_epoch} · "
        f"{s.episodes} episode(s)"
    )
    _echo("")
    _echo("records by kind:")
    for line in _table(["kind", "count"], [[k, _n(v)] for k, v in s.by_kind.items()], right=(1,)):
        _echo("  " + line)
    _echo("")
    if not s.prompts:
        _echo("no recorded prompts (prompt_rendered records), so no token figures")
        return
    _echo(
        f"prompts: {s.prompts} · cache keys: {s.cache_keys} distinct, "
        f"{s.cache_key_changes} change(s) between "
        f"consecutive prompts · evictions: {_n(s.evictions)}"
    )
    rows = [
        [x.section, x.prompts, _n(x.min), f"{x.median:,.0f}", _n(x.max), x.compacted, x.omitted]
        for x in (*s.sections, *((s.prompt_tokens,) if s.prompt_tokens else ()))
    ]
    for line in _table(
        ["section", "prompts", "min", "median", "max", "shortened", "omitted"], rows, right=(1, 2, 3, 4, 5, 6)
    ):
        _echo("  " + line)
    if s.evictions_by_cause:
        _echo("")
        # By cause, not reason: reasons name their item ("decision d7 not shown"), a row each.
        _echo("evictions by cause (item ids shown as <id>, counts as N):")
        for line in _table(
            ["cause", "count"], [[k, _n(v)] for k, v in s.evictions_by_cause.items()], right=(1,)
        ):
            _echo("  " + line)


# --------------------------------------------------------------------------- report


@main.command()
@_common
@click.option(
    "-o",
    "--out",
    "out",
    type=click.Path(path_type=Path),
    default=Path("report.html"),
    show_default=True,
    help="The HTML file to write (outside the ledger directory).",
)
@click.option(
    "--memory-limit",
    "memory_limit",
    metavar="SIZE",
    callback=_memory_limit,
    help="Most memory DuckDB holds while loading, e.g. 2GB (see `holon audit --memory-limit`).",
)
def report(*, path: Path, as_json: bool, out: Path, memory_limit: str | None) -> None:
    """Draw one run as a self-contained HTML page: tokens, caching, evictions, tools, episodes.

    The page (one file, nothing fetched, readable offline) shows tokens per model call by
    section, each call's cached share with its prefix breaks and their causes, evictions
    and restores, tool calls by tool with durations and outcomes, episodes over the run,
    and the cost under the cache model. Every figure is a query over the audit tables
    (`holon audit PATH --report calls` has the per-call cache model); a long run is drawn
    in buckets, and the page says so. A ledger with no recorded prompts (an imported
    transcript) gets a page that says how to render them: `holon simulate`.

    Example: holon report runs/agent-7 -o agent-7.html
    """
    from holon.report import write_report

    with progress_total("loading") as advance:
        size = write_report(path, out, progress=advance, memory_limit=memory_limit)
    if as_json:
        _echo_json({"path": str(out), "bytes": size})
    else:
        _echo(f"wrote the report of {path} to {out} ({_n(size)} bytes)")


# `holon audit PATH... [--sql Q | --report NAME]` lives with the audit layer (docs/audit.md).
main.add_lazy_command(
    "audit",
    "holon.audit.commands:audit",
    summary="Audit ledgers offline in DuckDB: SQL, canned reports, or a table summary.",
)


if __name__ == "__main__":
    main()
