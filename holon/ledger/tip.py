"""Where an open ledger's writer stands: the one state its writer and its reader share.

:class:`~holon.ledger.store.Ledger` hands the same :class:`Tip` to its writer
(:mod:`holon.ledger.writer`), which moves it with every append and rollover, and to its
reader (:mod:`holon.ledger.reader`), which trusts it over the directory for the writer's
own active segment. Neither part reaches into the other.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["Tip"]


class Tip:
    """The writer's active segment and next seq; a read-only ledger's tip has no writer (``fd``).

    ``fd`` is the writer's descriptor of the active segment: None in a read-only ledger and
    once the writer let it go, when the files are all a read can go by. ``failed`` is what
    made an earlier write fail: the writer's own count may then be ahead of what the disk
    holds, so reads go by the files too. ``active_start`` and ``active_path`` name the
    active segment, ``next_seq`` is the seq the next append gets.
    """

    __slots__ = ("active_path", "active_start", "failed", "fd", "next_seq")

    def __init__(self, seg_dir: Path) -> None:
        self.fd: int | None = None
        self.failed: BaseException | None = None
        self.active_path = seg_dir
        self.active_start = 0
        self.next_seq = 0
