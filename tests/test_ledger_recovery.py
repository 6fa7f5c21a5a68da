"""A crash mid-append leaves a torn tail: a writer cuts it (and says so), a reader stops before it."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec
import pytest

from holon.errors import LedgerCorrupt
from holon.ledger import Ledger
from holon.ledger.compression import compress
from holon.ledger.segments import list_segments
from tests.ledger_support import (
    AGENT,
    active_segment,
    assert_ledger_holds,
    flip_byte,
    frame_offsets,
    message,
    segment_bytes_of,
)


def _ledger(path: Path, n: int = 10) -> list:
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append_many(message(i, 80) for i in range(n))
    return [msgspec.structs.replace(message(i, 80), seq=i) for i in range(n)]


@pytest.mark.parametrize("keep", [1, 10, 15, 16, 47, 48, 60, -1])
def test_truncated_final_frame_is_cut_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, keep: int
) -> None:
    path = tmp_path / "l"
    records = _ledger(path)
    seg = active_segment(path)
    data = seg.read_bytes()
    last = frame_offsets(data)[-1]
    cut_at = last + keep if keep >= 0 else len(data) - 1
    seg.write_bytes(data[:cut_at])
    # A reader treats the torn frame as the end of the data: the writer may be mid-append.
    assert_ledger_holds(path, records[:-1])
    with caplog.at_level(logging.WARNING, logger="holon.ledger"), Ledger.open(path) as ledger:
        (action,) = ledger.recovery
        assert action.action == "truncated_torn_tail"
        assert action.file == str(seg)
        assert action.offset == last
        assert action.bytes_cut == cut_at - last
        assert ledger.head()[0] == 8
        ledger.append(message(9, 80))
    assert "truncated_torn_tail" in caplog.text and str(seg) in caplog.text
    assert os.path.getsize(seg) == len(data)
    assert_ledger_holds(path, records)


def test_zero_filled_tail_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path)
    seg = active_segment(path)
    size = seg.stat().st_size
    with open(seg, "ab") as f:
        f.write(b"\0" * 4096)  # what a power loss can leave after a size update
    assert_ledger_holds(path, records)
    with Ledger.open(path) as ledger:
        (action,) = ledger.recovery
        assert (action.offset, action.bytes_cut) == (size, 4096)
    assert seg.stat().st_size == size


def test_complete_final_frame_with_bad_checksum_is_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path)
    seg = active_segment(path)
    data = bytearray(seg.read_bytes())
    last = frame_offsets(bytes(data))[-1]
    data[-3] ^= 0x55  # inside the last payload: as if its final page never reached the disk
    seg.write_bytes(bytes(data))
    with Ledger.open(path) as ledger:
        (action,) = ledger.recovery
        assert action.offset == last
        assert "checksum" in action.detail
    assert_ledger_holds(path, records[:-1])


def test_clean_ledger_reports_no_recovery(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()


@pytest.mark.parametrize("keep", [1, 15, 16, 48, 60, -1])
def test_verify_names_a_torn_tail_without_failing(tmp_path: Path, keep: int) -> None:
    path = tmp_path / "l"
    _ledger(path)
    seg = active_segment(path)
    data = seg.read_bytes()
    last = frame_offsets(data)[-1]
    cut_at = last + keep if keep >= 0 else len(data) - 1
    seg.write_bytes(data[:cut_at])
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    # The records before the tail are complete and verify: a torn tail is what kill -9 leaves.
    assert report.ok and report.problems == ()
    assert report.records_checked == 9
    tail = report.torn_tail
    assert tail is not None
    assert (tail.file, tail.offset, tail.length) == (str(seg), last, cut_at - last)
    text = str(report)
    assert f"{seg} at byte {last}: {cut_at - last} byte" in text
    assert "crash mid-append" in text and "opening the ledger for writing will cut" in text
    assert report.warnings and "crash mid-append" in report.warnings[0]
    # Opening for writing cuts exactly what verify named; then nothing is left to report.
    with Ledger.open(path) as ledger:
        (action,) = ledger.recovery
        assert (action.offset, action.bytes_cut) == (tail.offset, tail.length)
        assert ledger.verify().torn_tail is None


def test_verify_names_a_final_frame_that_does_not_verify(tmp_path: Path) -> None:
    # A complete final frame with a bad checksum: a torn write or damage, indistinguishable.
    path = tmp_path / "l"
    _ledger(path)
    seg = active_segment(path)
    data = bytearray(seg.read_bytes())
    last = frame_offsets(bytes(data))[-1]
    data[-3] ^= 0x55
    seg.write_bytes(bytes(data))
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert report.ok and report.records_checked == 9
    assert report.torn_tail is not None
    assert (report.torn_tail.offset, report.torn_tail.length) == (last, len(data) - last)
    assert "checksum" in report.torn_tail.reason


def test_verify_of_a_clean_ledger_reports_no_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert report.ok and report.torn_tail is None and report.warnings == ()
    assert "torn" not in str(report)


def test_verify_reports_storage_progress(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=8192) as ledger:
        ledger.append_many(message(i, 80) for i in range(300))
        ledger.put_blob(b"blob bytes" * 1000)
    calls: list[tuple[int, int]] = []
    with Ledger.open(path, readonly=True) as reader:
        assert reader.verify(progress=lambda done, total: calls.append((done, total))).ok
    assert len(calls) > 3
    totals = {total for _, total in calls}
    assert len(totals) == 1
    (total,) = totals
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[-1] == total


# --------------------------------------------------------------------------- damage an open finds


def _files(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes: a ledger exactly as it is on disk."""
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}


def test_open_that_finds_damage_modifies_nothing_not_even_crash_debris(tmp_path: Path) -> None:
    # Recovery sealed an unsealed segment, removed .tmp files and a stray sealed copy of the
    # active segment, and only then found the damaged active segment and raised: the ledger
    # the error was about was no longer the ledger on disk.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=2048, fsync="batch") as ledger:
        ledger.append_many(message(i, 100) for i in range(46))
    segs = list_segments(path / "segments")
    before_active = segs[-2]
    assert before_active.sealed is not None
    # A crash before sealing the segment before the active one, and debris of atomic writes.
    plain = before_active.sealed.with_name(before_active.sealed.name.removesuffix(".zst"))
    plain.write_bytes(segment_bytes_of(path, len(segs) - 2))
    before_active.sealed.unlink()
    (path / "segments" / "00000000000000000099.seg.zst.tmp").write_bytes(b"half")
    (path / "blobs" / "ab").mkdir()
    (path / "blobs" / "ab" / ("ab" * 32 + ".tmp")).write_bytes(b"half")
    # And damage a crash cannot explain: a flipped byte in the first frame of the active segment.
    active = active_segment(path)
    flip_byte(active, frame_offsets(active.read_bytes())[0] + 60)
    before = _files(path)
    with pytest.raises(LedgerCorrupt, match="checksum mismatch") as info:
        Ledger.open(path)
    assert info.value.file == str(active)
    assert _files(path) == before


def test_a_stray_sealed_copy_of_a_damaged_active_segment_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append_many(message(i) for i in range(5))
    active = active_segment(path)
    # A sealed copy of the active segment (holon never makes one; a hand copy does).
    active.with_name(active.name + ".zst").write_bytes(compress(active.read_bytes(), level=3))
    flip_byte(active, frame_offsets(active.read_bytes())[1] + 60)
    before = _files(path)
    with pytest.raises(LedgerCorrupt, match="checksum mismatch"):
        Ledger.open(path)
    assert _files(path) == before
