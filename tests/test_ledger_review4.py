"""Bugs found in a fourth review of the ledger, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holon.errors import LedgerCorrupt, UsageError
from holon.ledger import Ledger, export_jsonl, import_jsonl
from holon.ledger.repair import cut_tail, inspect_tail
from holon.ledger.segments import list_segments
from tests.ledger_support import (
    AGENT,
    active_segment,
    expected_head,
    flip_byte,
    frame_offsets,
    message,
    tool_output,
)

# --------------------------------------------------------------------------- export and import


def test_an_empty_ledger_exports_and_imports_back(tmp_path: Path) -> None:
    # An empty ledger exports to an empty file: the library reads it back as no records.
    with Ledger.create(tmp_path / "E", agent_id=AGENT) as source:
        assert export_jsonl(source, tmp_path / "e.jsonl") == 0
    assert (tmp_path / "e.jsonl").read_bytes() == b""
    assert not (tmp_path / "e.jsonl.blobs").exists()
    with Ledger.create(tmp_path / "C", agent_id=AGENT) as copy:
        assert list(import_jsonl(tmp_path / "e.jsonl", copy, require_empty=True)) == []
        assert copy.head() == source.head()


@pytest.mark.parametrize(
    "where",
    [
        "segments/x.jsonl",
        "x.jsonl",
        "blobs/ab/x.jsonl",
        "cut/a/b/c/d/x.jsonl",
    ],
)
def test_an_export_into_another_ledger_is_refused_and_writes_nothing(tmp_path: Path, where: str) -> None:
    # Only the ledger exported was checked: an export into another ledger's directory wrote
    # a file (and a .blobs directory) into that ledger's tree.
    with Ledger.create(tmp_path / "L", agent_id=AGENT, blob_threshold=16) as source:
        source.append(tool_output(0, 200))
    other = tmp_path / "O"
    Ledger.create(other, agent_id="other").close()
    target = other / where
    target.parent.mkdir(parents=True, exist_ok=True)
    before = sorted(p.relative_to(other) for p in other.rglob("*"))
    with Ledger.open(tmp_path / "L", readonly=True) as source, pytest.raises(UsageError) as err:
        export_jsonl(source, target)
    assert f"inside the ledger {other}" in str(err.value)
    assert sorted(p.relative_to(other) for p in other.rglob("*")) == before


def test_an_export_through_a_symlink_into_another_ledger_is_refused(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id=AGENT) as source:
        source.append(message(0))
    other = tmp_path / "O"
    Ledger.create(other, agent_id="other").close()
    (tmp_path / "link").symlink_to(other / "segments")
    with Ledger.open(tmp_path / "L", readonly=True) as source, pytest.raises(UsageError):
        export_jsonl(source, tmp_path / "link" / "x.jsonl")
    assert not (other / "segments" / "x.jsonl").exists()


def test_an_export_beside_a_ledger_is_written(tmp_path: Path) -> None:
    # A directory holding ledgers (runs/) is not a ledger: exports beside them are fine.
    with Ledger.create(tmp_path / "runs" / "L", agent_id=AGENT) as source:
        source.append(message(0))
        assert export_jsonl(source, tmp_path / "runs" / "L.jsonl") == 1


def _synced_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every file and directory fsynced from now on, in order."""
    synced: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name, None)
        if real is None:
            continue

        def spy(fd: int, real: object = real) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)  # type: ignore[operator]

        monkeypatch.setattr(os, name, spy)
    return synced


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name a file descriptor")
def test_an_export_syncs_its_blobs_before_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The JSONL file was synced, the blob files and the .blobs directory were not: after a
    # power loss the export could look complete and miss blobs.
    with Ledger.create(tmp_path / "L", agent_id=AGENT, blob_threshold=16) as source:
        for i in range(3):
            source.append(tool_output(i, 300))
    out = tmp_path / "out"
    out.mkdir()
    synced = _synced_paths(monkeypatch)
    with Ledger.open(tmp_path / "L", readonly=True) as source:
        export_jsonl(source, out / "x.jsonl")
    blob_dir = out / "x.jsonl.blobs"
    blobs = sorted(str(p) for p in blob_dir.iterdir())
    assert len(blobs) == 3
    jsonl_synced = synced.index(str(out / "x.jsonl.tmp"))
    for blob in blobs:
        # the file was written as <hash>.tmp, synced, then renamed
        assert synced.index(blob + ".tmp") < jsonl_synced
    assert synced.index(str(blob_dir)) < jsonl_synced
    # the new directory's own name, in the export's directory, before the file that needs it
    assert synced.index(str(out)) < jsonl_synced


# --------------------------------------------------------------------------- verify


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


# --------------------------------------------------------------------------- a short active segment


@pytest.mark.parametrize("size", [0, 10, 63])
def test_an_active_segment_shorter_than_its_header_says_what_to_do(tmp_path: Path, size: int) -> None:
    path = tmp_path / "L"
    Ledger.create(path, agent_id=AGENT).close()
    seg = active_segment(path)
    seg.write_bytes(seg.read_bytes()[:size])
    for readonly in (False, True):
        with pytest.raises(LedgerCorrupt) as err, Ledger.open(path, readonly=readonly) as ledger:
            list(ledger.read())
        assert "holon repair" in str(err.value)
        assert "copy" in str(err.value)


def test_repair_gives_a_short_first_segment_a_new_header(tmp_path: Path) -> None:
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        genesis = ledger.head()
    seg = active_segment(path)
    seg.write_bytes(b"")
    found = inspect_tail(path)
    assert found is not None
    assert (found.offset, found.length, found.first_seq, found.later_seqs) == (0, 0, 0, ())
    assert found.header
    action = cut_tail(path, 0)
    assert action.action == "cut_damaged_tail" and action.kept is not None
    with Ledger.open(path) as ledger:
        assert ledger.head() == genesis
        ledger.append(message(0))
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok


def test_repair_gives_a_short_later_segment_a_new_header_after_a_sealed_one(tmp_path: Path) -> None:
    # A copy that cut the newest segment to nothing: the records of the sealed segments are
    # intact, and the new header must commit to the last of them.
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024) as ledger:
        for i in range(30):
            ledger.append(message(i, size=100))
    segs = list_segments(path / "segments")
    active = active_segment(path)
    start = segs[-1].start_seq
    assert start > 0 and segs[-2].plain is None
    with Ledger.open(path, readonly=True) as ledger:
        kept = list(ledger.read(0, start))
    active.write_bytes(active.read_bytes()[:7])
    with pytest.raises(LedgerCorrupt, match="holon repair"):
        Ledger.open(path).close()
    found = inspect_tail(path)
    assert found is not None and found.header and found.first_seq == start
    cut_tail(path, 0)
    with Ledger.open(path) as ledger:
        assert ledger.head() == expected_head(AGENT, kept)
        ledger.append(message(99))
    with Ledger.open(path, readonly=True) as ledger:
        report = ledger.verify()
        assert report.ok, str(report)
        assert report.records_checked == start + 1


# --------------------------------------------------------------------------- memory limit (library)


def test_connect_refuses_a_negative_memory_limit_before_loading(tmp_path: Path) -> None:
    # DuckDB reads "-5GB" as no limit at all; connect passed it on.
    from holon.audit import AuditError, connect  # noqa: PLC0415

    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    with pytest.raises(AuditError, match="'-5GB' is negative"):
        connect(path, memory_limit="-5GB")
