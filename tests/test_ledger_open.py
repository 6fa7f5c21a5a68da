"""Opening a large ledger stays cheap: open reads only the active segment, ``read(from_seq)``
starts at the segment holding ``from_seq``, and a runtime's ``checkpoints/`` subdirectory
inside the ledger directory is left alone by open, recovery and verify."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from holon.errors import LedgerCorrupt
from holon.ledger import Ledger
from holon.ledger.segments import list_segments
from tests.ledger_support import AGENT, assert_ledger_holds, message


def _fill(path: Path, n: int) -> list:
    with Ledger.create(path, agent_id=AGENT, fsync="never", segment_bytes=4096) as ledger:
        ledger.append_many(message(i, 100) for i in range(n))
    return [msgspec.structs.replace(message(i, 100), seq=i) for i in range(n)]


def _garble_sealed(path: Path) -> list[Path]:
    """Overwrite every sealed segment with bytes that are not zstd: reading one must fail."""
    sealed = [s.sealed for s in list_segments(path / "segments") if s.sealed is not None]
    for file in sealed:
        file.write_bytes(b"not zstd " * 50)
    return sealed


def test_open_and_append_do_not_read_sealed_segments(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 400)
    segs = list_segments(path / "segments")
    assert len(segs) > 10
    sealed = _garble_sealed(path)
    # Opening for writing recovers from the active segment alone, so damage in sealed
    # segments does not stop it (and is not silently accepted either: reads name it).
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()
        assert ledger.head()[0] == 399
        assert ledger.append(message(400, 100)) == 400
        tail_start = segs[-1].start_seq
        assert list(ledger.read(from_seq=tail_start)) == [
            *records[tail_start:],
            msgspec.structs.replace(message(400, 100), seq=400),
        ]
        with pytest.raises(LedgerCorrupt, match="zstd") as info:
            list(ledger.read())
        assert info.value.file == str(sealed[0])
        report = ledger.verify()
        assert not report.ok
        assert {p.file for p in report.problems} >= {str(f) for f in sealed}


def test_read_from_seq_starts_at_the_segment_holding_it(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 400)
    segs = list_segments(path / "segments")
    target = segs[-3]  # a sealed segment near the end
    assert target.sealed is not None
    # Damage every sealed segment before the target: reading from inside it must not touch them.
    for seg in segs[: len(segs) - 3]:
        assert seg.sealed is not None
        seg.sealed.write_bytes(b"garbage")
    from_seq = target.start_seq + 2
    with Ledger.open(path, readonly=True) as reader:
        assert list(reader.read(from_seq=from_seq)) == records[from_seq:]
        assert list(reader.read(from_seq=from_seq, to_seq=from_seq + 5)) == records[from_seq : from_seq + 5]
        assert reader.get(target.start_seq) == records[target.start_seq]
        with pytest.raises(LedgerCorrupt):
            list(reader.read(from_seq=target.start_seq - 1))


def test_a_checkpoints_subdirectory_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 120)
    checkpoints = path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "00000000000000000100.ckpt").write_bytes(b"runtime checkpoint bytes")
    (checkpoints / "00000000000000000110.ckpt.tmp").write_bytes(b"half-written checkpoint")
    (checkpoints / "nested").mkdir()
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()
        ledger.append(message(120, 100))
        records.append(msgspec.structs.replace(message(120, 100), seq=120))
        report = ledger.verify()
        assert report.ok, str(report)
    assert_ledger_holds(path, records)
    # Recovery cleans debris only in segments/ and blobs/: the runtime's files are untouched.
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "00000000000000000100.ckpt",
        "00000000000000000110.ckpt.tmp",
        "nested",
    ]
