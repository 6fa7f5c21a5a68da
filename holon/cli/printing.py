"""How the commands print: readable text with control characters made visible, exact
bytes, JSON (also streamed item by item) and aligned tables.

Of the package it imports nothing: the failures, the group and every command print through it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

import click
import msgspec


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
