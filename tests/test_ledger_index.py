"""Random access by seq: ``get`` finds the segment from the file names and, in the active
segment, reads only what was appended since its last call (runtime restores refs by seq)."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from holon.errors import LedgerCorrupt, RefNotFound
from holon.ledger import Ledger
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
