"""An omission's reason as a cause to count by, for `holon stats` and the audit's evictions report.

holon.context names the item a reason is about ("decision d7 not shown", "3 finished
plan steps collapsed") so that `holon explain` can tell them apart; counted by reason,
a summary has a row per item. The cause leaves the item's id out (``<id>``) and every
count (``N``): "decision d1 not shown" and "decision d7 not shown" are one cause. An id
is told from a word by a digit or one of ``_./-`` in it ("wait of wait q1 clipped"); an
id of letters alone stays, and its reason is a cause of its own.

The patterns are written once and read by two engines: Python's ``re`` (here) and
DuckDB's RE2 (holon.audit.tables builds its SQL from them), so they use only what both
read the same way: ASCII classes spelled out (RE2's ``\\s`` lacks ``\\v``), ``\\b`` under
``re.ASCII``.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["CAUSE_COUNT", "CAUSE_ID", "CAUSE_ID_REPLACEMENT", "omission_cause"]

#: The words before an item's id, the id (a run without separators holding a digit or
#: ``_./-``), replaced by ``\1 <id>``.
CAUSE_ID: Final = (
    r"\b(decision|follow-up|work item|wait|arguments of|result of|file) "
    r"[^\t\n\f\r :;,()]*[0-9_./-][^\t\n\f\r :;,()]*"
)
CAUSE_ID_REPLACEMENT: Final = r"\1 <id>"
#: A count (digits, with thousands separators), replaced by ``N``.
CAUSE_COUNT: Final = r"\b[0-9][0-9,]*\b"

_ID: Final = re.compile(CAUSE_ID, re.ASCII)
_COUNT: Final = re.compile(CAUSE_COUNT, re.ASCII)


def omission_cause(reason: str) -> str:
    """``reason`` without the id of the item it names and without its counts."""
    return _COUNT.sub("N", _ID.sub(CAUSE_ID_REPLACEMENT, reason))
