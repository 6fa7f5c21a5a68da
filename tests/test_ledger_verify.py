"""Ledger.verify: findings named by file and seq, warnings that are not damage, the head that verified.

verify() collects what it finds instead of raising (a missing segments directory,
overlapping segments), runs beside a writer that rolls over, names a ts outside the range a
ledger from before the check holds as a warning, passes over the files a Finder leaves in
the blob store, and reports the head of the run of records that verified.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from holon import records as r
from holon.errors import InvalidRecord, LedgerCorrupt
from holon.ledger import Ledger, export_jsonl, import_jsonl, verify
from holon.ledger.compression import compress
from holon.ledger.segments import encode_segment_header, list_segments, parse_segment_header
from tests.ledger_support import (
    AGENT,
    active_segment,
    expected_head,
    flip_byte,
    frame_offsets,
    ledger_with_a_blob,
    message,
    segment_bytes_of,
    tool_output,
    without_ts_check,
)

# --------------------------------------------------------------------------- findings, not exceptions


def test_verify_while_the_writer_rolls_over_is_not_a_missing_active_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify() lists the segments once. When the writer rolled over and sealed the newest one
    # before verify() read it, the newest listed segment read as sealed, and verify() reported
    # "the active segment after this sealed segment is missing" about a healthy ledger.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024, fsync="batch") as ledger:
        ledger.append_many(message(i, 100) for i in range(3))
        ledger.flush()
        listed_before = list_segments(path / "segments")
        ledger.append_many(message(i, 100) for i in range(3, 30))
    assert len(list_segments(path / "segments")) > len(listed_before)
    listings = [listed_before]
    real = verify.list_segments
    monkeypatch.setattr(verify, "list_segments", lambda d: listings.pop() if listings else real(d))
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert report.ok, str(report)
    assert report.records_checked == 30
    assert report.head[0] == 29


def test_verify_reports_a_missing_segment_directory_instead_of_raising(tmp_path: Path) -> None:
    # verify() collects problems; for a deleted segments/ it raised LedgerCorrupt instead.
    path = tmp_path / "l"
    ledger_with_a_blob(path)
    shutil.rmtree(path / "segments")
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert not report.ok
    (problem,) = report.problems
    assert problem.file == str(path / "segments")
    assert problem.message.startswith("the segment directory is missing")
    assert report.blobs_checked == 1


def test_overlapping_segments_are_named_as_overlapping_not_as_missing_records(tmp_path: Path) -> None:
    # A segment starting inside the one before it (from another copy of the ledger) was
    # reported as "records N..N-2 are missing (segment deleted)": a range running backwards.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024, fsync="batch") as ledger:
        ledger.append_many(message(i, 100) for i in range(20))
    seg = list_segments(path / "segments")[1]
    assert seg.sealed is not None
    data = segment_bytes_of(path, 1)
    start = seg.start_seq - 1
    header = parse_segment_header(data, file="x")
    seg.sealed.unlink()
    moved = path / "segments" / f"{start:020d}.seg.zst"
    moved.write_bytes(compress(encode_segment_header(start, header.prev_hash) + data[64:], level=3))
    overlap = f"the segment starts at seq {start}, but the segment before it holds records up to seq {start}"
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt, match=overlap) as info:
            list(reader.read())
        assert info.value.file == str(moved)
        report = reader.verify()
    assert [p.file for p in report.problems if p.message.startswith(overlap)] == [str(moved)]
    assert "are missing" not in str(report)


# --------------------------------------------------------------------------- ledgers from before the check


def _message(ts: int) -> r.Record:
    return r.Record(body=r.Message(role="user", text="hi"), ts=ts)


def _legacy(path: Path, stamps: list[int]) -> None:
    with without_ts_check(), Ledger.create(path, agent_id="a", fsync="never") as ledger:
        ledger.append_many([_message(ts) for ts in stamps])


def test_verify_names_out_of_range_ts_as_a_warning_not_corruption(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _legacy(path, [1, -(2**63), 7, 2**63 - 1, 2**64 - 1])
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
        assert [rec.ts for rec in ledger.read()] == [1, -(2**63), 7, 2**63 - 1, 2**64 - 1]  # still reads
    assert report.ok and not report.problems and report.records_checked == 5
    assert report.ts_out_of_range == ((1, -(2**63)), (3, 2**63 - 1), (4, 2**64 - 1))
    assert report.ts_out_of_range_count == 3
    (warning,) = report.warnings
    assert warning.startswith("3 record(s) hold a ts outside 0..99999999999999")
    assert "seq 1 (ts -9223372036854775808), seq 3 (ts 9223372036854775807)" in warning
    assert "warning: 3 record(s)" in str(report)


def test_verify_counts_every_out_of_range_ts_and_names_the_first_few(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _legacy(path, [-n for n in range(1, 26)])
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
    assert report.ok and report.ts_out_of_range_count == 25
    assert report.ts_out_of_range == tuple((seq, -(seq + 1)) for seq in range(10))
    assert "seq 9 (ts -10) and 15 more;" in report.warnings[0]


def test_verify_of_an_ordinary_ledger_has_no_ts_warning(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id="a", fsync="never") as ledger:
        ledger.append_many([_message(0), _message(r.MAX_TS)])
        report = ledger.verify()
    assert report.ok and report.warnings == () and report.ts_out_of_range_count == 0


def test_an_export_of_a_legacy_ledger_exports_and_its_import_names_the_line(tmp_path: Path) -> None:
    _legacy(tmp_path / "old", [1, 2, -3])
    with Ledger.open(tmp_path / "old", readonly=True) as old:
        assert export_jsonl(old, tmp_path / "x.jsonl") == 3
    with Ledger.create(tmp_path / "new", agent_id="a", fsync="never") as new:
        with pytest.raises(InvalidRecord, match=r"line 3 of .*x\.jsonl, field `ts`: ts -3 is out of range"):
            import_jsonl(tmp_path / "x.jsonl", new)
        assert new.head()[0] == -1


# ------------------------------------------------------------------------ a Finder's files, the verified head


@pytest.fixture
def blobbed(tmp_path: Path) -> Path:
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT, blob_threshold=16) as ledger:
        ledger.append(tool_output(0, 300))
        ledger.append(message(1))
    return path


def _blob_files(path: Path) -> list[Path]:
    return sorted(p for p in (path / "blobs").rglob("*") if p.is_file())


def test_verify_skips_the_files_finder_leaves_in_the_blob_store(blobbed: Path) -> None:
    # A Finder-browsed ledger: .DS_Store in blobs/ and a fan-out directory, AppleDouble
    # ._ files beside a blob and a fan-out directory, a hidden directory of Spotlight's.
    (blob,) = _blob_files(blobbed)
    (blobbed / "blobs" / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (blob.parent / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    (blob.parent / f"._{blob.name}").write_bytes(b"\0\5\26\7")
    (blobbed / "blobs" / f"._{blob.parent.name}").write_bytes(b"\0\5\26\7")
    (blobbed / "blobs" / ".Spotlight-V100").mkdir()
    (blobbed / "blobs" / ".Spotlight-V100" / "Store-V2").write_bytes(b"x")
    with Ledger.open(blobbed, readonly=True) as ledger:
        report = ledger.verify()
    assert report.ok, str(report)
    assert report.blobs_checked == 1
    assert len(report.ignored) == 5
    (warning,) = report.warnings
    assert "5 file(s)" in warning and ".DS_Store" in warning and "not blobs" in warning


def test_verify_still_reports_files_that_look_like_blobs(blobbed: Path) -> None:
    (blob,) = _blob_files(blobbed)
    (blob.parent / blob.name.upper()).write_bytes(blob.read_bytes())  # misnamed
    (blobbed / "blobs" / "00").mkdir()
    (blobbed / "blobs" / "00" / blob.name).write_bytes(blob.read_bytes())  # wrong fan-out
    (blob.parent / "notes.txt").write_bytes(b"mine")  # not holon's, not a dotfile
    flip_byte(blob, 8)  # damaged
    with Ledger.open(blobbed, readonly=True) as ledger:
        report = ledger.verify()
    assert not report.ok
    files = sorted(Path(p.file).name for p in report.problems)
    assert files == sorted([blob.name, blob.name, blob.name.upper(), "notes.txt"])


def test_verify_reports_the_head_of_the_records_that_verified(tmp_path: Path) -> None:
    # A frame damaged mid-segment: 5 records verified, yet the report's head was seq -1 and
    # the genesis hash, which reads as an empty ledger.
    path = tmp_path / "L"
    records = []
    with Ledger.create(path, agent_id=AGENT) as ledger:
        for i in range(10):
            ledger.append(message(i))
        records = list(ledger.read())
    seg = active_segment(path)
    flip_byte(seg, frame_offsets(seg.read_bytes())[5] + 60)
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert report.records_checked == 5
    assert report.head == expected_head(AGENT, records[:5])
    assert "records verified up to seq 4" in str(report)


def test_verify_head_stops_at_a_gap_between_segments(tmp_path: Path) -> None:
    # Records after a missing segment verify on their own, but the ledger's verified run
    # from seq 0 ends before the gap.
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024) as ledger:
        for i in range(60):
            ledger.append(message(i, size=100))
        records = list(ledger.read())
    segs = list_segments(path / "segments")
    assert len(segs) >= 4
    second = segs[1]
    assert second.sealed is not None
    second.sealed.unlink()
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
    assert not report.ok
    assert report.head == expected_head(AGENT, records[: second.start_seq])
