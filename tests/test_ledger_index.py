"""Random access by seq: ``get`` finds the segment from the file names and, in the active
segment, reads only what was appended since its last call (runtime restores refs by seq)."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from holon.errors import LedgerCorrupt, RefNotFound
from holon.ledger import Ledger, index, segments, writer
from holon.ledger.segments import list_segments
from tests.ledger_support import AGENT, active_segment, flip_byte, frame_offsets, message


def _stored(i: int, size: int = 40) -> object:
    return msgspec.structs.replace(message(i, size), seq=i)


@pytest.fixture
def pread_bytes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the bytes ``get`` reads from segment files through os.pread."""
    counted: list[int] = []
    real = os.pread

    def counting(fd: int, n: int, offset: int) -> bytes:
        data = real(fd, n, offset)
        counted.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting)
    yield counted


@pytest.mark.parametrize("readonly", [False, True])
def test_get_follows_appends_in_the_active_segment(tmp_path: Path, readonly: bool) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="batch") as writer:
        reader = Ledger.open(path, readonly=True) if readonly else writer
        try:
            for i in range(60):
                writer.append(message(i))
                if readonly:
                    writer.flush()
                assert reader.get(i) == _stored(i)
                assert reader.get(i // 2) == _stored(i // 2)
            with pytest.raises(RefNotFound, match="next seq is 60"):
                reader.get(60)
            with pytest.raises(RefNotFound, match="seqs start at 0"):
                reader.get(-1)
        finally:
            if readonly:
                reader.close()


def test_get_in_the_active_segment_reads_only_new_frames(tmp_path: Path, pread_bytes: list[int]) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ledger.append_many(message(i, 300) for i in range(2000))
        first = ledger.get(1999)
        assert first == _stored(1999, 300)
        size = os.path.getsize(active_segment(path))
        assert sum(pread_bytes) >= size - 64  # the first call indexes the segment once
        for i in range(2000, 2010):
            ledger.append(message(i, 300))
            pread_bytes.clear()
            assert ledger.get(i) == _stored(i, 300)
            assert ledger.get(5) == _stored(5, 300)
            # The new frame, the two frames fetched, and one short read at the end: never the
            # ~700 KB segment again.
            assert sum(pread_bytes) < 4 * 65536


def test_get_across_rollover_and_sealed_segments(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with (
        Ledger.create(path, agent_id=AGENT, fsync="batch", segment_bytes=4096) as writer,
        Ledger.open(path, readonly=True) as reader,
    ):
        for i in range(300):
            writer.append(message(i))
            writer.flush()
            # The reader's cached listing and index must notice each rollover.
            assert reader.get(i) == _stored(i)
        segs = list_segments(path / "segments")
        assert len(segs) > 10
        for seg in segs:
            assert reader.get(seg.start_seq) == _stored(seg.start_seq)
            assert writer.get(seg.start_seq) == _stored(seg.start_seq)
        assert [writer.get(i) for i in range(300)] == [_stored(i) for i in range(300)]


def test_get_of_a_damaged_frame_in_the_active_segment_names_file_and_offset(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ledger.append_many(message(i) for i in range(10))
    seg = active_segment(path)
    offsets = frame_offsets(seg.read_bytes())
    flip_byte(seg, offsets[4] + 60)  # inside the payload of seq 4
    with Ledger.open(path, readonly=True) as reader:
        # A damaged active segment is reported, not partly served: any get that indexes it
        # names the damage (here seq 3, before it, as well as seq 4 and 8 after it).
        for seq in (3, 4, 8):
            with pytest.raises(LedgerCorrupt, match="checksum") as info:
                reader.get(seq)
            assert (info.value.file, info.value.offset) == (str(seg), offsets[4])


def test_an_active_segment_that_cannot_be_opened_raises_once_and_nothing_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `holon get` on a ledger whose active segment is unreadable (chmod 000 as another user):
    # before, the half-built index printed "Exception ignored ... no attribute 'fd'" on top.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ledger.append_many(message(i) for i in range(8))
    seg = str(active_segment(path))
    real_open = os.open

    def denied(file: str | os.PathLike[str], flags: int, *args: int) -> int:
        if os.fspath(file) == seg:
            raise PermissionError(13, "Permission denied", seg)
        return real_open(file, flags, *args)

    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    reader = Ledger.open(path, readonly=True)
    with monkeypatch.context() as patch:
        patch.setattr(os, "open", denied)
        with pytest.raises(PermissionError) as info:
            reader.get(5)
    assert info.value.filename == seg
    del info
    gc.collect()
    assert unraisable == []
    assert reader.get(5) == _stored(5)
    reader.close()


# ---------------------------------------------------------------------- get across damaged frames and headers


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
