"""holon.replay.verify_ledger: a ledger's stored bytes, then its derived records, as `holon verify` does."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from holon import records as r
from holon.ledger import Ledger
from holon.projections import DEFAULT_CONFIG, ProjectionConfig
from holon.replay import LedgerVerification, projection_config_of, verify_ledger
from tests.cli_support import build_ledger, divergent_ledger, invoke
from tests.ledger_support import AGENT, active_segment, flip_byte, frame_offsets, message


def _verified(path: Path) -> LedgerVerification:
    with Ledger.open(path, readonly=True) as ledger:
        return verify_ledger(ledger)


def test_an_intact_ledger_verifies_its_storage_and_its_derivations(tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "L", "boundary_turn_cap")
    found = _verified(path)
    assert found.ok and found.storage.ok
    assert found.derivations is not None and found.derivations.ok
    assert found.derivations.derived_checked > 0  # the fixture's deltas and episodes, compared
    assert found.derivations.records == found.storage.records_checked
    with Ledger.open(path, readonly=True) as ledger:
        assert found.projection == projection_config_of(ledger.read())
    assert invoke("verify", path).exit_code == 0  # what the command reports


def test_a_tampered_derived_record_fails_the_derivations_not_the_storage(tmp_path: Path) -> None:
    # The episode was edited before it was appended: its bytes and chain are intact.
    path, seq = divergent_ledger(tmp_path / "L")
    found = _verified(path)
    assert found.storage.ok and not found.ok
    assert found.derivations is not None and not found.derivations.ok
    assert found.derivations.divergence is not None and found.derivations.divergence.seq == seq


def test_damaged_storage_is_not_replayed(tmp_path: Path) -> None:
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        for i in range(10):
            ledger.append(message(i))
    segment = active_segment(path)
    flip_byte(segment, frame_offsets(segment.read_bytes())[5] + 60)
    found = _verified(path)
    assert not found.ok and not found.storage.ok and found.storage.head[0] == 4
    assert found.derivations is None and found.projection == DEFAULT_CONFIG


def test_each_read_of_the_records_goes_through_passes_up_to_the_verified_head(tmp_path: Path) -> None:
    path = build_ledger(tmp_path / "L", "boundary_turn_cap")
    seen: list[tuple[str, int, int]] = []
    files: list[tuple[int, int]] = []

    def passes(records: Iterator[r.Record], count: int, label: str) -> Iterable[r.Record]:
        held = list(records)
        seen.append((label, count, len(held)))
        return held

    with Ledger.open(path, readonly=True) as ledger:
        head = ledger.head()[0]
        found = verify_ledger(ledger, progress=lambda done, total: files.append((done, total)), passes=passes)
    assert found.ok and isinstance(found.projection, ProjectionConfig)
    assert seen == [("reading prompts", head + 1, head + 1), ("verifying derivations", head + 1, head + 1)]
    assert files and files[-1][0] == files[-1][1]  # the storage check reported its files to the end
