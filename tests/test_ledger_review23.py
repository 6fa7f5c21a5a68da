"""The ledger as an SRE meets it (a twenty-third review): crashes and a full disk around creation,
the writer lock and rollover, and two processes creating the same ledger.

Each test pins a failure a user hit: a ``holon init`` killed part way that neither ``init``
nor ``open`` would touch again, a lock a process could never take back after a full disk,
and an append reported failed whose record was in the ledger.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import msgspec
import pytest

from holon.ledger import Ledger
from holon.records import Record
from tests.ledger_support import AGENT, assert_ledger_holds, message

_ROOT = Path(__file__).resolve().parent.parent


def _numbered(records: list[Record]) -> list[Record]:
    """``records`` as a ledger holding them reads them back: with their seqs."""
    return [msgspec.structs.replace(record, seq=seq) for seq, record in enumerate(records)]


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path`` with its bytes (None for a directory): what a refusal must keep."""
    return {
        str(entry.relative_to(path)): None if entry.is_dir() else entry.read_bytes()
        for entry in sorted(path.rglob("*"))
    }


# A child that creates a ledger and is killed (SIGKILL, by itself) at one step of it: the
# first or second file sync (segment 0's, the header's temporary file) or as segment 0 or
# the header is about to be written.
def test_a_lock_whose_pid_could_not_be_written_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    Ledger.create(path, agent_id=AGENT).close()
    monkeypatch.setattr(os, "pwrite", _enospc)
    with pytest.raises(OSError, match="No space"):
        Ledger.open(path)
    monkeypatch.undo()
    # The failed open kept the descriptor, and with it the flock, for the life of the
    # process: every later open was LedgerLocked "by another process".
    with Ledger.open(path) as ledger:
        ledger.append(message(0))
    assert_ledger_holds(path, _numbered([message(0)]))
