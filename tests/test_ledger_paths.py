"""Opening a path that is part of a ledger, or holds ledgers, names the ledger to pass.

A user who tab-completes one level too deep (`holon verify state/agent-7/segments`,
`.../holon-ledger.json`) or stops one level short (`holon verify state`) used to be told
the path "has no holon-ledger.json" or "is not a directory" and to create a ledger —
advice that, followed, would put a second ledger inside the first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holon.errors import NotALedger
from holon.ledger import Ledger
from tests.ledger_support import segment_files, tool_output


def _ledger(path: Path) -> Path:
    with Ledger.create(path, agent_id="a", blob_threshold=64) as ledger:
        ledger.append(tool_output(0, size=400))  # over the threshold: a blob and its directory
    return path


def _refused(path: Path) -> str:
    with pytest.raises(NotALedger) as info:
        Ledger.open(path, readonly=True)
    return str(info.value)


def test_a_file_or_directory_inside_a_ledger_names_the_ledger(tmp_path: Path) -> None:
    root = _ledger(tmp_path / "agent-7")
    blob_dirs = [p for p in (root / "blobs").iterdir() if p.is_dir()]
    assert blob_dirs, "the test needs a blob directory"
    for part in (root / "holon-ledger.json", segment_files(root)[0], root / "segments", blob_dirs[0]):
        message_text = _refused(part)
        assert f"inside the ledger {root}" in message_text or f"a file of the ledger {root}" in message_text
        assert f"pass {root} itself" in message_text
        assert "holon init" not in message_text


def test_a_directory_holding_ledgers_lists_them(tmp_path: Path) -> None:
    _ledger(tmp_path / "state" / "agent-7")
    assert _refused(tmp_path / "state").endswith(
        f"it holds the ledger {tmp_path / 'state' / 'agent-7'}: pass that directory"
    )
    for i in range(7):
        _ledger(tmp_path / "many" / f"agent-{i}")
    text = _refused(tmp_path / "many")
    assert f"it holds the ledgers {tmp_path / 'many' / 'agent-0'}, " in text
    assert "and 2 more: pass one of them" in text


def test_a_missing_path_or_a_plain_directory_still_says_how_to_create_one(tmp_path: Path) -> None:
    root = _ledger(tmp_path / "agent-7")
    assert "does not exist: check the path, or to start a new ledger there, create one with `holon init" in (
        _refused(root / "missing")
    )
    # A mistyped ledger name: the ledgers beside it are named.
    assert _refused(tmp_path / "agent-8").startswith(
        f"{tmp_path / 'agent-8'} does not exist: check the path (beside it: {root}), or to start"
    )
    (tmp_path / "empty").mkdir()
    assert "pass the ledger directory itself, or create one" in _refused(tmp_path / "empty")
