"""Continuing an import: how much of it a ledger already ends with (cut short by a full disk, or complete)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec

import holon.records as r
from holon.ledger.blobs import blob_hash
from holon.ledger.store import Ledger

__all__ = ["ImportedPrefix", "imported_prefix"]


class ImportedPrefix(NamedTuple):
    """The first ``held`` records of an import that a ledger ends with (:func:`imported_prefix`)."""

    #: How many of the import's records the ledger holds (all of them: the import is complete).
    held: int
    #: The seq of the first of them.
    first_seq: int
    #: Every record of the import as it was placed there (``placed_at(first_seq)``).
    records: tuple[r.Record, ...]


def _same_body(stored: r.Body, given: r.Body) -> bool:
    """Whether a body read from a ledger holds what ``given`` holds, an output moved to a blob included."""
    if stored == given:
        return True
    if not isinstance(stored, r.ToolResult | r.TaskResult) or type(given) is not type(stored):
        return False
    assert isinstance(given, r.ToolResult | r.TaskResult)
    ref = stored.blob
    if ref is None or given.blob is not None or stored.output:
        return False
    try:
        data = given.output.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return (
        len(data) == ref.size
        and blob_hash(data) == ref.hash
        and msgspec.structs.replace(stored, output=given.output, blob=None) == given
    )


def _alike(held: r.Record, anchor: r.Record, given: r.Record, given_anchor: r.Record) -> bool:
    """``held`` is ``given`` shifted as ``anchor`` is from ``given_anchor`` (ts, turn), same body."""
    if held.kind != given.kind or held.ts - anchor.ts != given.ts - given_anchor.ts:
        return False
    if (held.turn is None) != (given.turn is None):
        return False
    # Turns shift alike (whether an anchor has one was checked with the anchors themselves).
    if (
        held.turn is not None
        and given.turn is not None
        and anchor.turn is not None
        and given_anchor.turn is not None
        and held.turn - anchor.turn != given.turn - given_anchor.turn
    ):
        return False
    return _same_body(held.body, given.body)


def imported_prefix(
    ledger: Ledger,
    records: Sequence[r.Record],
    placed_at: Callable[[int], Sequence[r.Record]],
) -> ImportedPrefix | None:
    """How much of an import of ``records`` the ledger ends with, if it ends with any of it.

    An import appends ``records`` placed where it starts: ``placed_at(seq)`` gives them as an
    import whose first record gets ``seq`` places them (a transcript's synthetic clock and
    turn numbers continue the ledger before it; the same records, shifted). One cut short (a
    full disk, a kill) left the ledger ending with its first records and the derived records
    among them; one that completed, with all of them. Either is found by content: the
    ledger's last evidence records (derived ones are the refresh's, and skipped) are
    ``records[:n]`` for the largest such ``n``, each record's kind, turn and body equal (an
    output the ledger moved to its blob store compared by its bytes' hash) and its ``ts`` and
    ``turn`` shifted alike; and, placed at the seq the first of them has, the import gives
    exactly those records, ``ts`` and ``turn`` included. Anything else — a ledger that ends
    with other records, or with these under another placement — is no such import: None.

    Deterministic (the ledger and ``records`` decide), and read from the head backwards:
    a ledger whose last evidence record is no record of the import is told so at once.
    """
    head = ledger.head()[0]
    if head < 0 or not records:
        return None
    tail: list[r.Record] = []  # the ledger's evidence records, newest first, read as needed
    cursor = head

    def back(i: int) -> r.Record | None:
        """The ledger's ``i``-th evidence record from the end (0: its last), or None."""
        nonlocal cursor
        while len(tail) <= i:
            if cursor < 0:
                return None
            record = ledger.get(cursor)
            cursor -= 1
            if record.kind not in r.DERIVED_KINDS:
                tail.append(record)
        return tail[i]

    last = back(0)
    if last is None:  # derived records alone: no import's
        return None
    for end in range(len(records) - 1, -1, -1):  # the ledger's last evidence record is records[end]
        if not _alike(last, last, records[end], records[end]):
            continue
        matched = True
        for i in range(1, end + 1):
            held = back(i)
            if held is None or not _alike(held, last, records[end - i], records[end]):
                matched = False
                break
        if not matched:
            continue
        first = back(end)
        assert first is not None
        placed = tuple(placed_at(first.seq))
        if len(placed) == len(records) and all(
            (held := back(end - i)) is not None
            and held.kind == placed[i].kind
            and held.ts == placed[i].ts
            and held.turn == placed[i].turn
            and _same_body(held.body, placed[i].body)
            for i in range(end + 1)
        ):
            return ImportedPrefix(held=end + 1, first_seq=first.seq, records=placed)
    return None
