"""Progress bars for the command line: drawn on stderr, and only when stderr is a terminal.

Not on a terminal that says it cannot move the cursor (``TERM=dumb``: Emacs' shell
buffers, some CI consoles), where each redraw would print a new line.

Both command-line edges — :mod:`holon.cli` and :mod:`holon.audit.commands` — show their
long passes (replay, import, verify, export, the audit load) through these functions, so
a bar never ends up in a pipe, a log file or a test's captured output. Library
functions draw nothing: they take a plain ``progress`` callback, and the functions here
turn such a callback into a bar.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Final, Protocol, TypeVar

import click

__all__ = ["progress_callback", "progress_items", "progress_total", "stderr_is_terminal"]

T = TypeVar("T")

#: The steps of a bar drawn for a ``progress(done, total)`` callback. Its total may grow as
#: the pass goes (verify counts segments sealed since it began), and click's documented API
#: sets a bar's length once: the bar counts thousandths of the pass instead.
_STEPS: Final = 1000


class _Bar(Protocol):
    """What click documents of the bar ``click.progressbar`` makes: it advances by steps."""

    def update(self, n_steps: int, current_item: int | None = None) -> None: ...


def stderr_is_terminal() -> bool:
    """True when stderr is a terminal (where the CLI adds notes meant for a person)."""
    return sys.stderr.isatty()


def _draws_bars() -> bool:
    """True where a progress bar is drawn: a terminal stderr that can redraw a line in place."""
    return stderr_is_terminal() and os.environ.get("TERM") != "dumb"


def progress_items(
    items: Iterable[T], *, length: int | Callable[[], int] | None, label: str
) -> Iterator[T]:
    """``items``, with a progress bar on stderr when it is a terminal (never in pipes or tests).

    ``length`` may be a function, called only when a bar is drawn: counting the items can
    cost a read (the head of a read-only ledger) that a pipe should not pay.
    """
    if not _draws_bars():
        yield from items
        return
    total = length() if callable(length) else length
    with click.progressbar(items, length=total, label=label, file=sys.stderr) as bar:
        yield from bar


@contextmanager
def progress_total(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A ``progress(done, total)`` callback driving a bar on a terminal stderr; ``None`` elsewhere.

    For library passes that learn their total only once they start (``Ledger.verify``,
    ``holon.audit.connect``): the bar appears on the first call.
    """
    if not _draws_bars():
        yield None
        return
    with ExitStack() as stack:
        bar: _Bar | None = None
        shown = 0  # thousandths drawn

        def advance(done: int, total: int) -> None:
            nonlocal bar, shown
            if bar is None:
                bar = stack.enter_context(click.progressbar(length=_STEPS, label=label, file=sys.stderr))
            reached = min(_STEPS, done * _STEPS // total) if total > 0 else _STEPS
            if reached > shown:  # a total that grew never moves the bar back
                bar.update(reached - shown)
                shown = reached

        yield advance


@contextmanager
def progress_callback(length: int, label: str) -> Iterator[Callable[[int], None] | None]:
    """A ``progress(done)`` callback for a pass of ``length`` steps; ``None`` off a terminal."""
    with progress_total(label) as advance:
        if advance is None:
            yield None
            return
        report = advance

        def step(done: int) -> None:
            report(done, length)

        yield step
