"""The ``holon`` click group (:func:`main`), its error handling, and the options every command shares.

Central error handling lives in :class:`HolonGroup`, so commands registered from other
modules (``holon audit``) get the same exit codes and one-line messages. The commands
are registered on :func:`main` by the package (``holon/cli/__init__.py``), not here: of
the package this module imports only :mod:`holon.cli.printing` and :mod:`holon.cli.failures`.
"""

from __future__ import annotations

import importlib
import io
import logging
import re
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import click
from click.core import ParameterSource

from holon._version import __version__
from holon.cli.failures import _Failure, _failure_for, _Interrupted, _Usage
from holon.cli.printing import _echo, _printable, _silence

# A ceiling for token options: far above any real window, and well inside the 64-bit
# integers a recorded render config is encoded with.
_MAX_TOKENS: Final = 1_000_000_000
_DEBUG_KEY: Final = "holon.debug"
_COMMAND_KEY: Final = "holon.command"
_JSON_KEY: Final = "holon.json"
_ARGS_KEY: Final = "holon.args"


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
            raise _failure_for(exc, ctx.meta.get(_COMMAND_KEY, "")) from None


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


def _given(name: str) -> bool:
    """Whether the option ``name`` of the running command was given, not left at its default."""
    source = click.get_current_context().get_parameter_source(name)
    return source is not None and source is not ParameterSource.DEFAULT


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
