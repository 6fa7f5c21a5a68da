"""Review findings in the ledger: each test pins a bug that was fixed (what a user did, what broke)."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from pathlib import Path

import pytest

from holon.errors import InvalidRecord, LedgerCorrupt, RefNotFound
from holon.ledger import (
    Ledger,
    blobs,
    export_jsonl,
    files,
    import_jsonl,
    index,
    segments,
    store,
    verify,
    writer,
)
from holon.ledger.compression import compress
from holon.ledger.segments import encode_segment_header, list_segments, parse_segment_header
from holon.records import BlobRef, Record, ToolResult
from tests.ledger_support import (
    AGENT,
    active_segment,
    flip_byte,
    frame_offsets,
    message,
    segment_bytes_of,
    tool_output,
)


def _files(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes: a ledger exactly as it is on disk."""
    return {str(f.relative_to(path)): f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file()}


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


def _large_frame_ledger(path: Path) -> tuple[Path, list[int]]:
    """A ledger whose active segment holds a small frame, one over 64 KiB, and a small one."""
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append_many([message(0), message(1, 3 * index._INDEX_CHUNK // 2), message(2)])
    active = active_segment(path)
    offsets = frame_offsets(active.read_bytes())
    assert offsets[2] - offsets[1] > index._INDEX_CHUNK
    return active, offsets


@pytest.mark.parametrize("who", ["reader", "writer"])
def test_get_of_a_damaged_frame_longer_than_an_index_chunk_is_corrupt_not_past_the_end(
    tmp_path: Path, who: str
) -> None:
    # The active segment's index reads a frame longer than its 64 KiB chunk with a read of
    # exactly that frame; a checksum failure with nothing after it *in that read* looked like
    # a torn tail, so the index stopped there and get(1), get(2) said "past the end of
    # ledger (next seq is 1)" although the segment holds three records.
    path = tmp_path / "l"
    active, offsets = _large_frame_ledger(path)
    ledger = Ledger.open(path, readonly=who == "reader")
    try:
        flip_byte(active, offsets[1] + 100)  # bit rot, after the writer's recovery
        for seq in (1, 2):
            with pytest.raises(LedgerCorrupt, match="checksum mismatch") as info:
                ledger.get(seq)
            assert (info.value.file, info.value.offset) == (str(active), offsets[1])
        assert ledger.get(0).seq == 0
    finally:
        ledger.close()


def test_a_damaged_large_final_frame_is_still_a_torn_tail_for_get(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append_many([message(0), message(1, 3 * index._INDEX_CHUNK // 2)])
    active = active_segment(path)
    flip_byte(active, frame_offsets(active.read_bytes())[1] + 100)
    with Ledger.open(path, readonly=True) as reader:
        # As read() and verify() see it: a final frame that does not verify ends the data.
        assert [r.seq for r in reader.read()] == [0]
        assert reader.get(0).seq == 0
        with pytest.raises(RefNotFound, match="next seq is 1"):
            reader.get(1)


def test_zero_bytes_filling_an_index_chunk_before_more_frames_are_corrupt(tmp_path: Path) -> None:
    # Zeros reaching the end of a 64 KiB read looked like never-written space at the end of
    # the file, so get() said "past the end" for every seq behind them.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append_many(message(i, 1000) for i in range(100))
    active = active_segment(path)
    data = bytearray(active.read_bytes())
    start = frame_offsets(bytes(data))[0]
    data[start : start + index._INDEX_CHUNK] = bytes(index._INDEX_CHUNK)
    assert any(data[start + index._INDEX_CHUNK :])
    active.write_bytes(bytes(data))
    with Ledger.open(path, readonly=True) as reader:
        for seq in (0, 99):
            with pytest.raises(LedgerCorrupt, match="frame head is damaged") as info:
                reader.get(seq)
            assert info.value.offset is not None and info.value.offset >= start


def _ledger_with_a_blob(path: Path) -> str:
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(tool_output(0, 9000))
        (record,) = ledger.read()
    assert isinstance(record.body, ToolResult) and record.body.blob is not None
    return record.body.blob.hash


def test_a_directory_under_a_blob_name_is_reported_not_an_oserror(tmp_path: Path) -> None:
    # verify() and get_blob() raised IsADirectoryError.
    path = tmp_path / "l"
    blob_hash = _ledger_with_a_blob(path)
    blob_file = path / "blobs" / blob_hash[:2] / blob_hash
    blob_file.unlink()
    blob_file.mkdir()
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt, match="blob file cannot be read") as info:
            reader.get_blob(blob_hash)
        assert info.value.file == str(blob_file)
        report = reader.verify()
    assert not report.ok
    assert [(p.file, p.message.split(" (")[0]) for p in report.problems] == [
        (str(blob_file), "blob file cannot be read")
    ]


def test_a_blob_in_the_wrong_fan_out_directory_or_the_store_root_is_a_stray_file(tmp_path: Path) -> None:
    # verify() checked the file at the right place under the misplaced file's name, so a copy
    # in blobs/zz/ counted as a second good blob, and files in blobs/ itself went unseen.
    path = tmp_path / "l"
    blob_hash = _ledger_with_a_blob(path)
    (path / "blobs" / "zz").mkdir()
    misplaced = path / "blobs" / "zz" / blob_hash
    shutil.copy(path / "blobs" / blob_hash[:2] / blob_hash, misplaced)
    (path / "blobs" / "notes.txt").write_text("hi")
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert report.blobs_checked == 1
    assert [p.file for p in report.problems] == [str(path / "blobs" / "notes.txt"), str(misplaced)]
    assert all(p.message.startswith("stray file in the blob store") for p in report.problems)
    assert str(path / "blobs" / blob_hash[:2] / blob_hash) in report.problems[1].message


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
    _ledger_with_a_blob(path)
    shutil.rmtree(path / "segments")
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert not report.ok
    (problem,) = report.problems
    assert problem.file == str(path / "segments")
    assert problem.message.startswith("the segment directory is missing")
    assert report.blobs_checked == 1


def test_a_ledger_without_a_blobs_directory_stores_its_first_blob(tmp_path: Path) -> None:
    # A ledger kept in git (or unpacked from an archive that skips empty directories) has no
    # blobs/ until its first blob; appending a large tool output raised FileNotFoundError.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    (path / "blobs").rmdir()
    with Ledger.open(path) as ledger:
        ledger.append(tool_output(1, 9000))
        ref = ledger.put_blob(b"more bytes")
        assert ledger.get_blob(ref.hash) == b"more bytes"
        assert ledger.verify().ok
    with Ledger.open(path, readonly=True) as reader:
        body = reader.get(1).body
        assert isinstance(body, ToolResult) and body.blob is not None
        assert reader.get_blob(body.blob.hash).decode() == tool_output(1, 9000).body.output  # type: ignore[union-attr]


@pytest.fixture
def synced_dirs(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every directory the ledger fsyncs, in order."""
    synced: list[Path] = []
    real = files.fsync_dir

    def spy(path: Path) -> None:
        synced.append(Path(path))
        real(path)

    for module in (files, blobs, store):
        monkeypatch.setattr(module, "fsync_dir", spy, raising=False)
    return synced


def test_a_new_blob_fan_out_directory_is_made_durable_in_the_store(
    tmp_path: Path, synced_dirs: list[Path]
) -> None:
    # The blob's rename was fsynced in blobs/ab/, but blobs/ab's own entry in blobs/ never
    # was: a crash could lose the directory and with it a blob an acknowledged record names.
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        synced_dirs.clear()
        ref = ledger.put_blob(b"first blob in its fan-out directory")
        fan = tmp_path / "l" / "blobs" / ref.hash[:2]
        assert tmp_path / "l" / "blobs" in synced_dirs
        assert synced_dirs.index(tmp_path / "l" / "blobs") < synced_dirs.index(fan)
        synced_dirs.clear()
        ledger.put_blob(b"first blob in its fan-out directory")  # already stored: nothing to sync
        assert synced_dirs == []


def test_create_makes_the_new_ledger_directory_durable_in_its_parent(
    tmp_path: Path, synced_dirs: list[Path]
) -> None:
    # The header and segment were fsynced inside the new directories, but the ledger
    # directory's own entry (and that of a parent mkdir created) never was.
    path = tmp_path / "new" / "l"
    Ledger.create(path, agent_id=AGENT).close()
    assert tmp_path / "new" in synced_dirs
    assert tmp_path in synced_dirs


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda line: line.replace(b'"ts":1002', b'"ts":100000000000000000000000'), id="ts"),
        pytest.param(lambda line: line.replace(b'"turn":0', b'"turn":-100000000000000000000000'), id="turn"),
    ],
)
def test_import_of_an_integer_msgpack_cannot_hold_names_the_line_and_stores_no_blob(
    tmp_path: Path, edit: object
) -> None:
    # JSON holds integers of any size; the ledger's msgpack frames hold 64 bits. The line
    # decoded, the blobs were stored, and append_many then refused "invalid record at seq 2"
    # (no line, no file), leaving the blob behind in a ledger the import did not change.
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as source:
        source.append_many([message(0), tool_output(1, 9000), message(2)])
        export_jsonl(source, tmp_path / "x.jsonl")
    lines = (tmp_path / "x.jsonl").read_bytes().split(b"\n")
    edited = edit(lines[2])  # type: ignore[operator]
    assert edited != lines[2]
    lines[2] = edited
    (tmp_path / "x.jsonl").write_bytes(b"\n".join(lines))
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        with pytest.raises(InvalidRecord, match=r"line 3 of .*x\.jsonl.*cannot be stored"):
            import_jsonl(tmp_path / "x.jsonl", target)
        assert target.head()[0] == -1
    assert list((tmp_path / "b" / "blobs").rglob("*")) == []


def test_get_in_a_segment_sealed_after_it_was_listed_decompresses_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer's (and a reader's) segment listing is cached. A get() listed while the
    # sealing thread was still at work saw the segment as plain; once sealed, every later
    # get() there found the plain file gone, decompressed the whole segment and rebuilt its
    # offset table, bypassing the cache of sealed segments each time.
    sealing, sealed = threading.Event(), threading.Event()
    real_seal = writer.seal_segment

    def gated_seal(plain: Path, data: bytes) -> Path:
        sealing.wait()
        try:
            return real_seal(plain, data)
        finally:
            sealed.set()

    decompressed: list[str] = []
    real_decompress = segments.decompress_sealed

    def counting(data: bytes, *, file: str, start_seq: int) -> bytes:
        decompressed.append(file)
        return real_decompress(data, file=file, start_seq=start_seq)

    monkeypatch.setattr(writer, "seal_segment", gated_seal)
    monkeypatch.setattr(segments, "decompress_sealed", counting)
    with Ledger.create(tmp_path / "l", agent_id=AGENT, segment_bytes=4096, fsync="batch") as ledger:
        try:
            ledger.append_many(message(i, 100) for i in range(30))
            assert ledger.get(3).seq == 3  # listed while the first segment is still plain
        finally:
            sealing.set()  # close() waits for the sealing thread
        assert sealed.wait(timeout=60)
        for _ in range(5):
            assert ledger.get(3).seq == 3
    assert len(decompressed) == 1


def test_a_header_of_deeply_nested_garbage_is_corrupt_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    (path / "holon-ledger.json").write_bytes(b"[" * 200_000)
    for readonly in (True, False):
        with pytest.raises(LedgerCorrupt, match="header is not valid JSON") as info:
            Ledger.open(path, readonly=readonly)
        assert info.value.file == str(path / "holon-ledger.json")


@pytest.mark.parametrize(
    "damage", [b"", b"\x28\xb5\x2f\xfd half a frame", "other bytes"], ids=["empty", "partial", "other"]
)
def test_storing_bytes_whose_blob_file_is_damaged_repairs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: bytes | str
) -> None:
    # A blob name that existed was taken as the blob: after a crash under fsync="never" left
    # an empty file behind a durable rename, the same output appended again was acknowledged
    # with a reference to a blob that could never be read (get_blob: LedgerCorrupt).
    path = tmp_path / "l"
    blob_hash = _ledger_with_a_blob(path)
    blob_file = path / "blobs" / blob_hash[:2] / blob_hash
    blob_file.write_bytes(compress(b"other bytes", level=3) if damage == "other bytes" else damage)
    output = tool_output(0, 9000).body.output  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger="holon.ledger"), Ledger.open(path, fsync="never") as ledger:
        assert not ledger.verify().ok
        seq = ledger.append(tool_output(0, 9000))
        body = ledger.get(seq).body
        assert isinstance(body, ToolResult) and body.blob is not None and body.blob.hash == blob_hash
        assert ledger.get_blob(blob_hash).decode() == output
        assert ledger.verify().ok
    assert f"replacing damaged blob file {blob_file}" in caplog.text


def test_import_with_a_directory_in_place_of_a_blob_file_names_the_line(tmp_path: Path) -> None:
    # It raised IsADirectoryError, naming neither the line nor what to do.
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as source:
        source.append_many([message(0), tool_output(1, 9000)])
        export_jsonl(source, tmp_path / "x.jsonl")
    (blob_file,) = (tmp_path / "x.jsonl.blobs").iterdir()
    blob_file.unlink()
    blob_file.mkdir()
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        with pytest.raises(InvalidRecord, match=r"line 2 of .*cannot be read") as info:
            import_jsonl(tmp_path / "x.jsonl", target)
        assert info.value.field == "body.blob.hash"
        assert target.head()[0] == -1


def test_get_in_the_active_segment_checks_its_header(tmp_path: Path) -> None:
    # get() indexed the active segment's frames without reading its header: a damaged
    # header went unnoticed by get() while read(), verify() and a writer's open refused it.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append_many(message(i) for i in range(5))
    active = active_segment(path)
    flip_byte(active, 30)  # inside the chain hash the segment starts from
    with Ledger.open(path, readonly=True) as reader:
        for seq in (0, 4):
            with pytest.raises(LedgerCorrupt, match="segment header checksum mismatch") as info:
                reader.get(seq)
            assert (info.value.file, info.value.offset) == (str(active), 0)


def test_get_in_a_segment_whose_header_names_another_start_seq_is_corrupt(tmp_path: Path) -> None:
    # An empty active segment whose file was renamed one seq down overlaps the sealed segment
    # before it: read() yielded the last sealed record and then named the mismatch, but get()
    # of that record went to the renamed file and said "seq N is past the end (next seq is N)".
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024) as ledger:
        while len(list_segments(path / "segments")) == 1:
            ledger.append(message(ledger.head()[0] + 1, 100))
    active = active_segment(path)
    start = int(active.name[:20])
    renamed = active.with_name(f"{start - 1:020d}.seg")
    active.rename(renamed)
    mismatch = f"says it starts at seq {start}, its name says {start - 1}"
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt, match=mismatch):
            list(reader.read())
        with pytest.raises(LedgerCorrupt, match=mismatch) as info:
            reader.get(start - 1)
        assert (info.value.file, info.value.offset) == (str(renamed), 0)


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


@pytest.mark.parametrize("which", ["sealed", "active"])
def test_a_directory_under_a_segments_name_is_corruption_named_not_an_oserror(
    tmp_path: Path, which: str
) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never", segment_bytes=4096) as ledger:
        ledger.append_many([message(i, size=100) for i in range(100)])
    segs = list_segments(path / "segments")
    seg = segs[1] if which == "sealed" else segs[-1]
    target = seg.sealed if which == "sealed" else seg.plain
    assert target is not None
    target.unlink()
    target.mkdir()
    for attempt in (
        lambda: list(Ledger.open(path, readonly=True).read()),
        lambda: Ledger.open(path, readonly=True).get(segs[-1].start_seq),
        lambda: Ledger.open(path),
    ):
        with pytest.raises(LedgerCorrupt, match="not a regular file") as caught:
            attempt()
        assert caught.value.file == str(target)
    report = Ledger.open(path, readonly=True).verify()
    assert not report.ok and any(str(target) in str(p) for p in report.problems)


def test_a_blob_ref_stating_the_wrong_size_is_refused_on_append_and_reported_by_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The size is what audit reports as a tool output's bytes: a hand-built BlobRef with
    # the right hash and a wrong size was acknowledged, and verify() said nothing.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ref = ledger.put_blob(b"x" * 5000)
        wrong = BlobRef(hash=ref.hash, size=10, preview="")
        before = ledger.head()
        with pytest.raises(InvalidRecord, match="holds 5,000") as refused:
            ledger.append(Record(body=ToolResult(call_id="c", tool="t", status="ok", blob=wrong), ts=1))
        assert refused.value.field == "body.blob.size" and ledger.head() == before
        ledger.append(Record(body=ToolResult(call_id="c", tool="t", status="ok", blob=ref), ts=1))
        # A ledger written before the check (or by other code) can still hold one.
        monkeypatch.setattr(blobs.BlobStore, "size", lambda self, blob_hash: 10)
        ledger.append(Record(body=ToolResult(call_id="d", tool="t", status="ok", blob=wrong), ts=2))
    report = Ledger.open(path, readonly=True).verify()
    assert [p.message for p in report.problems] == ["seq 1 says this blob holds 10 bytes, it holds 5,000"]


@pytest.mark.parametrize("planted", ["symlink", "directory"])
def test_a_lock_file_that_is_not_a_file_is_refused_and_nothing_it_points_to_is_touched(
    tmp_path: Path, planted: str
) -> None:
    # Opening for writing writes the pid over the lock file's contents: through a symlink
    # planted (or copied) into the ledger, it truncated whatever file the link named.
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    lock = path / "holon-ledger.lock"
    lock.unlink(missing_ok=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    if planted == "symlink":
        lock.symlink_to(precious)
    else:
        lock.mkdir()
    with pytest.raises(LedgerCorrupt, match="lock file") as refused:
        Ledger.open(path)
    assert refused.value.file == str(lock)
    assert precious.read_text() == "keep me\n"
    assert list(Ledger.open(path, readonly=True).read()) == []  # readers need no lock


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_a_blob_that_is_a_symlink_or_a_pipe_is_corrupt_not_followed_or_waited_on(
    tmp_path: Path, planted: str
) -> None:
    # holon writes blobs as regular files. A symlink was followed (anywhere: /dev/zero never
    # ends), and a pipe under a blob's name blocked the read forever.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ref = ledger.put_blob(b"y" * 5000)
    blob = path / "blobs" / ref.hash[:2] / ref.hash
    if planted == "symlink":
        copy = tmp_path / "copy"
        copy.write_bytes(blob.read_bytes())  # even the right bytes, elsewhere
        blob.unlink()
        blob.symlink_to(copy)
    else:
        blob.unlink()
        os.mkfifo(blob)
    with pytest.raises(LedgerCorrupt, match="blob file cannot be read") as refused:
        Ledger.open(path, readonly=True).get_blob(ref.hash)
    assert refused.value.file == str(blob)
    assert not Ledger.open(path, readonly=True).verify().ok
    # Storing the same bytes again puts a regular file back in its place.
    with Ledger.open(path) as ledger:
        assert ledger.put_blob(b"y" * 5000) == ref
        assert ledger.get_blob(ref.hash) == b"y" * 5000
    assert not blob.is_symlink() and blob.is_file()
