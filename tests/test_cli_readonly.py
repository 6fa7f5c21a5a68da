"""Read commands never modify a ledger: not its bytes, not a torn tail, not while a writer runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon.ledger import Ledger
from tests.cli_support import build_ledger, invoke, tree_bytes

READS = [
    ("replay", "--check"),
    ("render",),
    ("render", "--at-turn", "3", "--format", "anthropic"),
    ("explain", "--at-turn", "3"),
    ("memory", "--at-turn", "2"),
    ("episodes", "--search", "payments"),
    ("get", "ledger:3"),
    ("search", "payments"),
    ("verify",),
    ("stats", "--json"),
]


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return build_ledger(tmp_path / "L", "boundary_turn_cap")


def test_read_commands_leave_every_byte_alone(ledger: Path, tmp_path: Path) -> None:
    before = tree_bytes(ledger)
    for command in READS:
        result = invoke(command[0], ledger, *command[1:])
        assert result.exit_code == 0, (command, result.stderr)
    assert invoke("export", ledger, tmp_path / "out.jsonl").exit_code == 0
    assert tree_bytes(ledger) == before


def test_read_commands_do_not_repair_a_torn_tail(ledger: Path) -> None:
    segment = sorted((ledger / "segments").glob("*.seg"))[-1]
    with segment.open("ab") as handle:
        handle.write(b"\x10\x00\x00")  # a crash mid-append: an incomplete frame head
    before = tree_bytes(ledger)
    for command in READS:
        assert invoke(command[0], ledger, *command[1:]).exit_code == 0, command
    assert tree_bytes(ledger) == before
    # Opening for writing is what cuts it (and says so).
    with Ledger.open(ledger) as writer:
        assert [a.action for a in writer.recovery] == ["truncated_torn_tail"]


def test_read_commands_work_while_a_writer_holds_the_lock(ledger: Path) -> None:
    with Ledger.open(ledger) as writer:
        lock = (ledger / "holon-ledger.lock").read_bytes()
        for command in READS:
            assert invoke(command[0], ledger, *command[1:]).exit_code == 0, command
        assert (ledger / "holon-ledger.lock").read_bytes() == lock
        assert writer.head()[0] == 76
