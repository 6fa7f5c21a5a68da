"""Segment rollover, sealed (zstd) segments, and finishing a rollover a crash interrupted."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import msgspec
import pytest

import holon.ledger.recovery as recovery_mod
import holon.ledger.writer as writer_mod
from holon import records as r
from holon.errors import NotALedger, UsageError
from holon.ledger import Ledger
from holon.ledger.frames import encode_frame
from holon.ledger.sealed import decompress_sealed
from holon.ledger.segments import encode_segment_header, list_segments, seal_segment
from holon.records import Record, encode_msgpack_record
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


# --------------------------------------------------------------------------- a segment exactly full


def _message(ts: int) -> r.Record:
    return r.Record(body=r.Message(role="user", text="hi"), ts=ts)


@pytest.mark.parametrize("many", [False, True], ids=["append", "append_many"])
@pytest.mark.parametrize("over", [-1, 0, 1])
def test_a_segment_that_reaches_segment_bytes_exactly_rolls_over(
    tmp_path: Path, many: bool, over: int
) -> None:
    # The active segment is sealed once it holds segment_bytes or more: a first frame that
    # fills it to exactly 1024 bytes starts a new segment at seq 1; one byte less does not.
    path = tmp_path / "l"
    empty = len(r.encode_msgpack_record(r.Record(body=r.Message(role="user", text=""), ts=1, seq=0)))
    text = "x" * (1024 - 64 - 48 - empty - 2 + over)  # segment header, frame overhead, str16 length
    first = r.Record(body=r.Message(role="user", text=text), ts=1)
    assert 64 + 48 + len(r.encode_msgpack_record(msgspec.structs.replace(first, seq=0))) == 1024 + over
    with Ledger.create(path, agent_id="a", fsync="never", segment_bytes=1024) as ledger:
        if many:
            ledger.append_many([first, _message(2)])
        else:
            ledger.append(first)
            ledger.append(_message(2))
    starts = sorted(int(name.name.split(".")[0]) for name in (path / "segments").iterdir())
    assert starts == ([0, 2] if over < 0 else [0, 1])
    with Ledger.open(path) as ledger:  # reopens, reads across and appends on
        assert [rec.seq for rec in ledger.read()] == [0, 1]
        assert ledger.append(_message(3)) == 2
        assert ledger.verify().ok


# --------------------------------------------------------------------------- a full disk at rollover


def _numbered(records: list[Record]) -> list[Record]:
    """``records`` as a ledger holding them reads them back: with their seqs."""
    return [msgspec.structs.replace(record, seq=seq) for seq, record in enumerate(records)]


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _failing_create_segment(
    monkeypatch: pytest.MonkeyPatch, failures: int, *, leave_name: bool = False
) -> list[int]:
    """Make the next ``failures`` segment creations fail with ENOSPC; returns the start seqs tried.

    ``leave_name``: the failure comes after the rename (a failed directory sync), so the
    new segment's name exists.
    """
    tried: list[int] = []
    real = writer_mod.create_segment

    def create(seg_dir: Path, start_seq: int, prev_hash: bytes) -> Path:
        tried.append(start_seq)
        if len(tried) <= failures:
            if leave_name:
                real(seg_dir, start_seq, prev_hash)
            _enospc()
        return real(seg_dir, start_seq, prev_hash)

    monkeypatch.setattr(writer_mod, "create_segment", create)
    return tried


@pytest.mark.parametrize("batched", [False, True])
def test_an_append_whose_rollover_cannot_start_a_segment_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batched: bool
) -> None:
    path = tmp_path / "ledger"
    records = [message(i, size=8) for i in range(120)]
    with Ledger.create(path, agent_id=AGENT, segment_bytes=4096) as ledger:
        tried = _failing_create_segment(monkeypatch, 2)
        # The record that fills the segment was synced before the next segment was made: on a
        # full disk that append raised OSError, and a reopen found its record in the ledger.
        if batched:
            assert ledger.append_many(records[:60]) == list(range(60))
        else:
            assert [ledger.append(record) for record in records[:60]] == list(range(60))
        # Tried again only after the segment grew by an eighth more, not at every record.
        first = tried[0]
        assert len(tried) == 3
        assert tried[1] - first >= 4
        assert tried[2] - tried[1] >= 4
        assert [seg.start_seq for seg in list_segments(path / "segments")] == [0, tried[2]]
        assert ledger.head()[0] == 59
        for record in records[60:]:
            ledger.append(record)
    assert_ledger_holds(path, _numbered(records))
    with Ledger.open(path, readonly=True) as reader:
        assert reader.verify().ok


def test_a_rollover_that_fails_after_naming_the_new_segment_still_fails_the_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    ledger = Ledger.create(path, agent_id=AGENT, segment_bytes=1024)
    _failing_create_segment(monkeypatch, 1, leave_name=True)
    with pytest.raises(OSError, match="No space"):
        for i in range(30):
            ledger.append(message(i))
    # The new segment exists: appending on in the old one would make the two overlap.
    with pytest.raises(UsageError, match="earlier write"):
        ledger.append(message(99))
    ledger.close()
    with Ledger.open(path) as reopened:
        assert reopened.verify().ok


def test_a_writer_opens_when_the_disk_has_no_room_to_seal_a_segment_a_crash_left_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    records = [message(i) for i in range(40)]
    # A writer whose seals did not happen (killed first, or its sealing thread failed).
    monkeypatch.setattr(writer_mod, "seal_segment", _enospc)
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024) as ledger:
        for record in records[:30]:
            ledger.append(record)
    plain = [seg.start_seq for seg in list_segments(path / "segments") if seg.plain is not None]
    assert len(plain) > 1
    monkeypatch.setattr(recovery_mod, "seal_segment", _enospc)
    # Opening for writing sealed them first, and a full disk refused the whole open.
    with Ledger.open(path) as ledger:
        assert not [action for action in ledger.recovery if action.action == "sealed_segment"]
        for record in records[30:]:
            ledger.append(record)
    monkeypatch.undo()
    assert_ledger_holds(path, _numbered(records))
    with Ledger.open(path) as ledger:
        sealed = [action for action in ledger.recovery if action.action == "sealed_segment"]
        assert len(sealed) >= len(plain) - 1  # those plain before, and those the writer rolled out of
    assert all(seg.plain is None for seg in list_segments(path / "segments")[:-1])
