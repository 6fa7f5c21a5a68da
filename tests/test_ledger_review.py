"""Review findings in the ledger: each test pins a bug that was fixed (what a user did, what broke)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from holon.errors import LedgerCorrupt
from holon.ledger import Ledger
from tests.ledger_support import AGENT, message


@pytest.mark.parametrize("damage", ["deleted", "a file"])
def test_opening_for_writing_without_a_segment_directory_is_ledger_corrupt(
    tmp_path: Path, damage: str
) -> None:
    # It raised FileNotFoundError (NotADirectoryError for a file in its place) from the
    # cleanup of temporary files, before any check; read-only opens said LedgerCorrupt.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    shutil.rmtree(path / "segments")
    if damage == "a file":
        (path / "segments").write_bytes(b"")
    with pytest.raises(LedgerCorrupt, match="segment directory is missing") as info:
        Ledger.open(path)
    assert info.value.file == str(path / "segments")
