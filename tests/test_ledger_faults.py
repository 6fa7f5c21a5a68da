"""Fault injection: damaged bytes give LedgerCorrupt naming file and offset, and nothing else escapes."""

from __future__ import annotations

import contextlib
import os
import random
import struct
from pathlib import Path

import pytest
import xxhash
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon.errors import HolonError, LedgerCorrupt
from holon.ledger import Ledger, decode_frame, encode_frame
from holon.ledger.compression import compress
from holon.ledger.segments import list_segments
from tests.ledger_support import (
    AGENT,
    active_segment,
    flip_byte,
    frame_offsets,
    message,
    scratch_dir,
    segment_bytes_of,
)

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _ledger(path: Path, n: int, *, segment_bytes: int = 1 << 20) -> None:
    with Ledger.create(path, agent_id=AGENT, segment_bytes=segment_bytes, fsync="never") as ledger:
        ledger.append_many(message(i, 120) for i in range(n))


def _read_all(path: Path) -> None:
    with Ledger.open(path, readonly=True) as reader:
        for _ in reader.read():
            pass


# Positions inside a frame: length, guard, checksum, prev hash, payload start, payload end.
@pytest.mark.parametrize("delta", [0, 5, 9, 20, 50, 150])
def test_flipped_byte_in_the_active_segment_names_file_and_frame(tmp_path: Path, delta: int) -> None:
    path = tmp_path / "l"
    _ledger(path, 20)
    seg = active_segment(path)
    offsets = frame_offsets(seg.read_bytes())
    target = offsets[10]
    flip_byte(seg, target + delta)
    for attempt in (_read_all, Ledger.open):
        with pytest.raises(LedgerCorrupt) as info:
            attempt(path)  # type: ignore[operator]
        assert info.value.file == str(seg)
        assert info.value.offset == target
        assert f"{seg} at byte {target}" in str(info.value)
        # A plain segment's offsets are file offsets: no note about decompression.
        assert "decompressed" not in str(info.value)
    report = Ledger.open(path, readonly=True).verify()
    assert not report.ok
    assert [(p.file, p.offset) for p in report.problems] == [(str(seg), target)]
    assert str(report.problems[0]).startswith(f"{seg} at byte {target}: ")


def test_flipped_bytes_in_a_sealed_segment_name_the_zst_file(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 300, segment_bytes=16384)
    sealed = list_segments(path / "segments")[1].sealed
    assert sealed is not None
    rng = random.Random(7)
    original = sealed.read_bytes()
    for _ in range(8):
        sealed.write_bytes(original)
        flip_byte(sealed, rng.randrange(len(original) // 4, 3 * len(original) // 4))
        with pytest.raises(LedgerCorrupt) as info:
            _read_all(path)
        assert info.value.file == str(sealed)
        assert info.value.offset is not None
        report = Ledger.open(path, readonly=True).verify()
        assert [p.file for p in report.problems] == [str(sealed)]


def test_a_damaged_zstd_header_in_a_sealed_segment_is_named_not_allocated(tmp_path: Path) -> None:
    # Found by the mutation fuzz below: one byte inserted into the zstd frame header makes
    # it declare ~1e19 bytes, and a one-shot decompress raised MemoryError.
    path = tmp_path / "l"
    _ledger(path, 300, segment_bytes=16384)
    sealed = list_segments(path / "segments")[1].sealed
    assert sealed is not None
    original = sealed.read_bytes()
    sealed.write_bytes(original[:4] + b"\xc0" + original[4:])
    with pytest.raises(LedgerCorrupt, match="declares") as info:
        _read_all(path)
    assert (info.value.file, info.value.offset) == (str(sealed), 0)
    # zstd damage is located in the compressed bytes: the file as stored.
    assert f"({sealed} at byte 0)" in str(info.value)
    report = Ledger.open(path, readonly=True).verify()
    assert [(p.file, p.offset) for p in report.problems] == [(str(sealed), 0)]
    assert str(report.problems[0]).startswith(f"{sealed} at byte 0: ")


def test_damage_inside_a_sealed_segment_names_the_decompressed_offset(tmp_path: Path) -> None:
    # Before: "x.seg.zst at byte 36915" for a 9,368-byte file. Frames are found in the
    # decompressed bytes, so that is where the offset points, and the message says so.
    path = tmp_path / "l"
    _ledger(path, 300, segment_bytes=16384)
    seg = list_segments(path / "segments")[1]
    sealed = seg.sealed
    assert sealed is not None
    raw = segment_bytes_of(path, 1)
    offsets = frame_offsets(raw)
    target = offsets[-1]
    assert target > sealed.stat().st_size
    damaged = bytearray(raw)
    damaged[target + 60] ^= 0xFF  # a payload byte: the frame checksum fails
    sealed.write_bytes(compress(bytes(damaged), level=3))
    where = f"{sealed} at byte {target} of the decompressed segment"
    with pytest.raises(LedgerCorrupt, match="frame checksum mismatch") as info:
        _read_all(path)
    assert (info.value.file, info.value.offset, info.value.decompressed) == (str(sealed), target, True)
    assert f"({where})" in str(info.value)
    with Ledger.open(path, readonly=True) as reader, pytest.raises(LedgerCorrupt) as got:
        reader.get(seg.start_seq + len(offsets) - 1)
    assert f"({where})" in str(got.value)
    report = Ledger.open(path, readonly=True).verify()
    assert [(p.file, p.offset, p.decompressed) for p in report.problems] == [(str(sealed), target, True)]
    assert str(report.problems[0]) == f"{where}: frame checksum mismatch"


def test_tampered_frame_with_recomputed_checksum_breaks_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 5)
    seg = active_segment(path)
    data = bytearray(seg.read_bytes())
    offsets = frame_offsets(bytes(data))
    at = offsets[2]
    n = struct.unpack_from("<I", data, at)[0]
    i = data.index(b"record 2", at)
    data[i : i + 8] = b"record X"  # same length, different content
    struct.pack_into("<Q", data, at + 8, xxhash.xxh3_64_intdigest(bytes(data[at + 16 : at + 48 + n]), n))
    seg.write_bytes(bytes(data))
    with pytest.raises(LedgerCorrupt, match="broken hash chain") as info:
        _read_all(path)
    assert (info.value.file, info.value.offset) == (str(seg), offsets[3])


def test_deleted_segment_is_named(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 300, segment_bytes=8192)
    segs = list_segments(path / "segments")
    assert len(segs) >= 4
    assert segs[1].sealed is not None
    segs[1].sealed.unlink()
    with pytest.raises(
        LedgerCorrupt, match=rf"records {segs[1].start_seq}\.\.{segs[2].start_seq - 1} are missing"
    ) as info:
        _read_all(path)
    assert (info.value.file, info.value.offset) == (segs[2].name, 0)
    report = Ledger.open(path, readonly=True).verify()
    assert [(p.file, p.offset) for p in report.problems] == [(segs[2].name, 0)]


def test_deleted_first_or_active_segment_is_named(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 300, segment_bytes=8192)
    segs = list_segments(path / "segments")
    assert segs[0].sealed is not None and segs[-1].plain is not None
    segs[-1].plain.unlink()
    with pytest.raises(LedgerCorrupt, match="active segment") as info:
        Ledger.open(path)
    assert info.value.file == segs[-2].name
    with pytest.raises(LedgerCorrupt, match="active segment"):
        _read_all(path)
    segs[0].sealed.unlink()
    with pytest.raises(LedgerCorrupt, match=r"seqs 0\.\.") as info:
        _read_all(path)
    assert (info.value.file, info.value.offset) == (segs[1].name, 0)


def test_random_garbage_segment_and_header_files(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 300, segment_bytes=8192)
    rng = random.Random(3)
    sealed = list_segments(path / "segments")[0].sealed
    assert sealed is not None
    sealed.write_bytes(rng.randbytes(5000))
    with pytest.raises(LedgerCorrupt) as info:
        _read_all(path)
    assert (info.value.file, info.value.offset) == (str(sealed), 0)

    active = active_segment(path)
    active.write_bytes(rng.randbytes(5000))
    with pytest.raises(LedgerCorrupt, match="magic") as info:
        Ledger.open(path)
    assert (info.value.file, info.value.offset) == (str(active), 0)

    header = path / "holon-ledger.json"
    header.write_bytes(rng.randbytes(300))
    with pytest.raises(LedgerCorrupt, match="not valid JSON") as info:
        Ledger.open(path, readonly=True)
    assert info.value.file == str(header)


@FUZZ
@given(st.binary(max_size=400), st.integers(0, 64))
def test_frame_decoder_raises_only_ledger_corrupt(data: bytes, pos: int) -> None:
    try:
        decode_frame(data, min(pos, len(data)))
    except LedgerCorrupt as exc:
        assert exc.file == "<frame>"
        assert exc.offset is not None


@FUZZ
@given(st.binary(min_size=1, max_size=300), st.binary(min_size=32, max_size=32))
def test_frame_round_trip(payload: bytes, prev: bytes) -> None:
    frame, digest = encode_frame(prev, payload)
    assert decode_frame(frame) == (prev, payload, len(frame))
    assert len(digest) == 32


def _exercise(path: Path) -> None:
    """Everything a user can do to a ledger; only holon errors may come out."""
    for action in (
        lambda: _read_all(path),
        lambda: Ledger.open(path, readonly=True).head(),
        lambda: Ledger.open(path, readonly=True).verify(),
        lambda: Ledger.open(path, readonly=True).get(3),
        lambda: Ledger.open(path).close(),
    ):
        with contextlib.suppress(HolonError):
            action()


@FUZZ
@given(st.binary(max_size=3000))
def test_reader_fed_random_segment_bytes_raises_only_holon_errors(garbage: bytes) -> None:
    with scratch_dir() as root:
        path = root / "l"
        _ledger(path, 3)
        active_segment(path).write_bytes(garbage)
        _exercise(path)


@FUZZ
@given(st.data())
def test_reader_fed_mutated_ledgers_raises_only_holon_errors(data: st.DataObject) -> None:
    with scratch_dir() as root:
        path = root / "l"
        _ledger(path, 40, segment_bytes=2048)
        files = sorted((path / "segments").iterdir())
        victim = data.draw(st.sampled_from(files))
        content = bytearray(victim.read_bytes())
        for _ in range(data.draw(st.integers(1, 4))):
            op = data.draw(st.sampled_from(["flip", "cut", "insert", "zero"]))
            at = data.draw(st.integers(0, max(len(content) - 1, 0)))
            if op == "flip" and content:
                content[at] ^= data.draw(st.integers(1, 255))
            elif op == "cut":
                del content[at : at + data.draw(st.integers(1, 64))]
            elif op == "insert":
                content[at:at] = data.draw(st.binary(min_size=1, max_size=32))
            else:
                content[at : at + 16] = bytes(len(content[at : at + 16]))
        victim.write_bytes(bytes(content))
        _exercise(path)
        if data.draw(st.booleans()):
            os.unlink(victim)
            _exercise(path)


# ---------------------------------------------------------------------- garbage headers, directories as files


def test_a_header_of_deeply_nested_garbage_is_corrupt_not_a_recursion_error(tmp_path: Path) -> None:
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    (path / "holon-ledger.json").write_bytes(b"[" * 200_000)
    for readonly in (True, False):
        with pytest.raises(LedgerCorrupt, match="header is not valid JSON") as info:
            Ledger.open(path, readonly=readonly)
        assert info.value.file == str(path / "holon-ledger.json")


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
