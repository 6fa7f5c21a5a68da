"""Segment rollover, sealed (zstd) segments, and finishing a rollover a crash interrupted."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec
import pytest

from holon.errors import NotALedger
from holon.ledger import Ledger
from holon.ledger.frames import encode_frame
from holon.ledger.sealed import decompress_sealed
from holon.ledger.segments import encode_segment_header, list_segments, seal_segment
from holon.records import encode_msgpack_record
from tests.ledger_support import AGENT, assert_ledger_holds, message, segment_bytes_of


def _fill(path: Path, n: int, *, segment_bytes: int = 2048) -> list:
    with Ledger.create(path, agent_id=AGENT, segment_bytes=segment_bytes, fsync="batch") as ledger:
        ledger.append_many(message(i, 100) for i in range(n))
    return [msgspec.structs.replace(message(i, 100), seq=i) for i in range(n)]


def test_rollover_seals_full_segments_and_reads_across_them(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 200)
    segs = list_segments(path / "segments")
    assert len(segs) > 5
    assert all(s.sealed is not None and s.plain is None for s in segs[:-1])
    assert segs[-1].plain is not None and segs[-1].sealed is None
    # Each segment is named by its first seq: that record is the first frame after its header.
    with Ledger.open(path, readonly=True) as reader:
        for seg in segs:
            if seg.start_seq < 200:
                assert [r.seq for r in reader.read(seg.start_seq, seg.start_seq + 1)] == [seg.start_seq]
    assert_ledger_holds(path, records)
    with Ledger.open(path, readonly=True) as reader:
        for seq in (0, 1, 57, 120, 199):
            assert reader.get(seq) == records[seq]
        assert [r.seq for r in reader.read(95, 105)] == list(range(95, 105))


def test_sealed_segment_is_compressed(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _fill(path, 200, segment_bytes=8192)
    first = list_segments(path / "segments")[0]
    assert first.sealed is not None
    assert first.sealed.stat().st_size * 3 < len(segment_bytes_of(path, 0))


def test_crash_between_writing_the_sealed_copy_and_removing_the_plain_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "l"
    records = _fill(path, 100)
    first = list_segments(path / "segments")[0]
    assert first.sealed is not None
    # Recreate the state after the sealed copy was renamed in but before the unlink.
    first.sealed.with_name(first.sealed.name.removesuffix(".zst")).write_bytes(segment_bytes_of(path, 0))
    assert_ledger_holds(path, records)  # readers cope with both files present
    with caplog.at_level(logging.WARNING, logger="holon.ledger"), Ledger.open(path) as ledger:
        assert [a.action for a in ledger.recovery] == ["finished_seal"]
    assert "finished_seal" in caplog.text
    assert list_segments(path / "segments")[0].plain is None
    assert_ledger_holds(path, records)


def test_crash_before_sealing_leaves_a_plain_segment_that_open_seals(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 100)
    first = list_segments(path / "segments")[0]
    assert first.sealed is not None
    plain = first.sealed.with_name(first.sealed.name.removesuffix(".zst"))
    plain.write_bytes(segment_bytes_of(path, 0))
    first.sealed.unlink()
    (path / "segments" / (first.sealed.name + ".tmp")).write_bytes(b"half a zstd file")
    assert_ledger_holds(path, records)
    with Ledger.open(path) as ledger:
        actions = sorted(a.action for a in ledger.recovery)
        assert actions == ["removed_temp_file", "sealed_segment"]
    assert list_segments(path / "segments")[0].plain is None
    assert_ledger_holds(path, records)


def test_a_damaged_sealed_copy_next_to_its_plain_file_is_redone(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 100)
    first = list_segments(path / "segments")[0]
    assert first.sealed is not None
    plain = first.sealed.with_name(first.sealed.name.removesuffix(".zst"))
    plain.write_bytes(segment_bytes_of(path, 0))
    first.sealed.write_bytes(b"\x28\xb5\x2f\xfd garbage")
    with Ledger.open(path) as ledger:
        assert [a.action for a in ledger.recovery] == ["sealed_segment"]
    assert_ledger_holds(path, records)


def test_seal_segment_replaces_plain_by_zst(tmp_path: Path) -> None:
    plain = tmp_path / "00000000000000000000.seg"
    prev = b"\0" * 32
    frames = [encode_frame(prev, encode_msgpack_record(msgspec.structs.replace(message(0), seq=0)))[0]]
    plain.write_bytes(encode_segment_header(0, prev) + b"".join(frames))
    data = plain.read_bytes()
    sealed = seal_segment(plain, data)
    assert not plain.exists()
    assert sorted(os.listdir(tmp_path)) == [sealed.name]
    assert decompress_sealed(sealed.read_bytes(), file=str(sealed), start_seq=0) == data


def test_newer_format_version_is_refused_with_upgrade_advice(tmp_path: Path) -> None:
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 3'))
    with pytest.raises(NotALedger, match=r"format version 3.*upgrade holon"):
        Ledger.open(path, readonly=True)
