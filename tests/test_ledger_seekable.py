"""Sealed segments as zstd frames with a seek table: one record reads without the rest of its segment.

docs/ledger-format.md, "Sealed segment file": the layout, segments sealed as one frame
by older holons, the format version upgrade, and damage to the table or a frame named
with the file and offset — never a wrong record.
"""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest
import xxhash
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holon.errors import HolonError, LedgerCorrupt, NotALedger
from holon.ledger import FORMAT_VERSION, Ledger, sealed
from holon.ledger.compression import compress
from holon.ledger.frames import FrameWalk
from holon.ledger.segments import list_segments, load_segment
from holon.records import Record
from tests.ledger_support import AGENT, flip_byte, frame_offsets, message, scratch_dir

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# docs/ledger-format.md, "Sealed segment file" (little-endian).
SKIPPABLE = struct.Struct("<II")
ENTRY = struct.Struct("<QQQ")
TRAILER = struct.Struct("<QQIIQ8s")


@contextmanager
def small_frames(size: int = 4096) -> Iterator[None]:
    """Seal with zstd frames of ``size`` plain bytes, so small test segments hold many."""
    saved = sealed.SEAL_FRAME_BYTES
    sealed.SEAL_FRAME_BYTES = size  # type: ignore[misc]
    try:
        yield
    finally:
        sealed.SEAL_FRAME_BYTES = saved  # type: ignore[misc]


def _ledger(path: Path, n: int, *, segment_bytes: int = 32768, size: int = 120) -> list[Record]:
    with (
        small_frames(),
        Ledger.create(path, agent_id=AGENT, segment_bytes=segment_bytes, fsync="never") as ledger,
    ):
        ledger.append_many(message(i, size + i % 50) for i in range(n))
    return [msgspec.structs.replace(message(i, size + i % 50), seq=i) for i in range(n)]


def _table(data: bytes) -> tuple[list[tuple[int, int, int]], tuple[int, int, int, int, int, bytes], int]:
    """(entries, trailer fields, offset of the skippable frame) of a sealed file, parsed as the docs say."""
    trailer = TRAILER.unpack_from(data, len(data) - TRAILER.size)
    count = trailer[2]
    at = len(data) - TRAILER.size - count * ENTRY.size - SKIPPABLE.size
    entries = [ENTRY.unpack_from(data, at + SKIPPABLE.size + i * ENTRY.size) for i in range(count)]
    return entries, trailer, at


def _with_table(data: bytes, entries: list[tuple[int, int, int]], end_seq: int | None = None) -> bytes:
    """``data`` with its seek table replaced by ``entries`` under a valid checksum (a writer's bug)."""
    old, trailer, at = _table(data)
    table = b"".join(ENTRY.pack(*entry) for entry in entries)
    head = struct.pack("<QQII", end_seq if end_seq is not None else trailer[0], trailer[1], len(entries), 1)
    checksum = xxhash.xxh3_64_intdigest(table + head)
    body = table + head + struct.pack("<Q", checksum) + b"HOLONSKT"
    assert len(entries) == len(old)
    return data[:at] + SKIPPABLE.pack(0x184D2A50, len(body)) + body


def _sealed(path: Path, index: int) -> Path:
    file = list_segments(path / "segments")[index].sealed
    assert file is not None
    return file


def _make_single_frame(path: Path) -> None:
    """Rewrite a ledger as a holon before format version 2 left it: one zstd frame per sealed segment."""
    for seg in list_segments(path / "segments"):
        if seg.sealed is not None:
            seg.sealed.write_bytes(compress(load_segment(seg)[0], level=3))
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 1'))


# ---------------------------------------------------------------- the layout


def test_a_sealed_segment_is_zstd_frames_and_a_seek_table_as_ledger_format_md_says(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path, 600)
    segs = list_segments(path / "segments")
    assert len(segs) > 2
    for seg in segs[:-1]:
        assert seg.sealed is not None
        data = seg.sealed.read_bytes()
        plain = load_segment(seg)[0]
        entries, (end_seq, plain_size, count, version, checksum, magic), at = _table(data)
        assert (magic, version, count, plain_size) == (b"HOLONSKT", 1, len(entries), len(plain))
        assert SKIPPABLE.unpack_from(data, at) == (0x184D2A50, count * 24 + 40)
        assert checksum == xxhash.xxh3_64_intdigest(data[at + 8 : len(data) - 16])
        offsets = frame_offsets(plain)
        assert end_seq == seg.start_seq + len(offsets)
        # Frame 0 is the segment header; each later one starts at a record and holds whole records.
        assert entries[0] == (seg.start_seq, 0, 0)
        assert entries[1][:2] == (seg.start_seq, 64)
        bounds = [*entries[1:], (end_seq, plain_size, at)]
        for (first, p0, c0), (after, p1, c1) in zip(entries, bounds, strict=True):
            chunk = zstandard.ZstdDecompressor().decompress(data[c0:c1])
            assert chunk == plain[p0:p1]
            if p0:
                assert p0 == offsets[first - seg.start_seq]
                assert p1 == plain_size or p1 == offsets[after - seg.start_seq]
        assert len(entries) > 3  # small_frames(): several frames per segment
        # One zstd stream: a decompressor that reads across frames (zstd -d) gives the plain segment.
        whole = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
        assert whole == plain
    with Ledger.open(path, readonly=True) as reader:
        assert list(reader.read()) == records


def test_a_default_seal_keeps_frames_near_256_kib(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1 << 20, fsync="never") as ledger:
        ledger.append_many(message(i, 400) for i in range(3000))
    seg = list_segments(path / "segments")[0]
    assert seg.sealed is not None
    entries, trailer, _at = _table(seg.sealed.read_bytes())
    sizes = [b[1] - a[1] for a, b in zip(entries[1:], [*entries[2:], (0, trailer[1], 0)], strict=True)]
    assert all(256 << 10 <= size < (256 << 10) + 600 for size in sizes[:-1])
    assert 0 < sizes[-1] < (256 << 10) + 600


# ---------------------------------------------------------------- reading


def test_get_reads_one_frame_not_the_whole_segment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "l"
    records = _ledger(path, 600)
    decompressed: list[int] = []
    real = sealed.decompress

    def counting(data: bytes | memoryview, *, file: str, base: int = 0) -> bytes:
        out = real(data, file=file, base=base)
        decompressed.append(len(out))
        return out

    monkeypatch.setattr(sealed, "decompress", counting)
    seg = list_segments(path / "segments")[1]
    segment_size = len(load_segment(seg)[0])
    decompressed.clear()
    with Ledger.open(path, readonly=True) as reader:
        assert reader.get(seg.start_seq + 20) == records[seg.start_seq + 20]
    # The segment header (64 bytes) and the one ~4 KiB frame holding the record.
    assert decompressed[0] == 64
    assert sum(decompressed) < 4096 + 600 < segment_size / 4


def test_random_gets_over_many_sealed_segments_equal_a_full_read(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 2000, segment_bytes=16384)
    assert len(list_segments(path / "segments")) > 10
    with Ledger.open(path, readonly=True) as reader:
        everything = list(reader.read())
        rng = random.Random(5)
        seqs = [rng.randrange(len(everything)) for _ in range(3000)] + list(range(len(everything)))[::-1]
        for seq in seqs:
            assert reader.get(seq) == everything[seq]
    with Ledger.open(path) as writer:  # the writer's get takes the same path
        for seq in seqs[:500]:
            assert writer.get(seq) == everything[seq]


@FUZZ
@given(
    sizes=st.lists(st.integers(1, 3000), min_size=1, max_size=160),
    segment_bytes=st.sampled_from([1024, 4096, 20000]),
    frame_bytes=st.sampled_from([1, 512, 4096, 1 << 20]),
    order=st.randoms(use_true_random=False),
)
def test_property_any_get_order_equals_the_full_read(
    sizes: list[int], segment_bytes: int, frame_bytes: int, order: random.Random
) -> None:
    with scratch_dir() as root, small_frames(frame_bytes):
        path = root / "l"
        with Ledger.create(path, agent_id=AGENT, segment_bytes=segment_bytes, fsync="never") as ledger:
            ledger.append_many(message(i, size) for i, size in enumerate(sizes))
        expected = [msgspec.structs.replace(message(i, size), seq=i) for i, size in enumerate(sizes)]
        for seg in list_segments(path / "segments")[:-1]:
            assert seg.sealed is not None and seg.plain is None
        with Ledger.open(path, readonly=True) as reader:
            assert list(reader.read()) == expected
            seqs = list(range(len(sizes))) * 2
            order.shuffle(seqs)
            assert [reader.get(seq) for seq in seqs] == [expected[seq] for seq in seqs]
            assert reader.verify().ok


# ---------------------------------------------------------------- segments sealed by older holons


def test_segments_sealed_as_one_frame_still_read_and_a_writer_upgrades_the_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path, 600)
    _make_single_frame(path)
    old = {seg.start_seq: seg.sealed.read_bytes() for seg in list_segments(path / "segments") if seg.sealed}
    with Ledger.open(path, readonly=True) as reader:
        assert reader.header.format_version == 1
        assert list(reader.read()) == records
        rng = random.Random(2)
        for seq in [rng.randrange(600) for _ in range(300)]:
            assert reader.get(seq) == records[seq]
        assert reader.verify().ok
    assert (
        json.loads((path / "holon-ledger.json").read_text())["format_version"] == 1
    )  # readers write nothing
    with small_frames(), Ledger.open(path) as writer:
        assert writer.header.format_version == 1  # raised at its first seal, not on open
        writer.append_many(message(i, 120) for i in range(600, 1200))
        assert writer.header.format_version == FORMAT_VERSION == 2
    assert json.loads((path / "holon-ledger.json").read_text())["format_version"] == 2
    layouts = set()
    for seg in list_segments(path / "segments")[:-1]:
        assert seg.sealed is not None
        data = seg.sealed.read_bytes()
        if seg.start_seq in old:
            assert data == old[seg.start_seq]  # never rewritten
        layouts.add(data.endswith(b"HOLONSKT"))
    assert layouts == {True, False}  # a ledger of both layouts
    everything = records + [msgspec.structs.replace(message(i, 120), seq=i) for i in range(600, 1200)]
    with Ledger.open(path, readonly=True) as reader:
        assert list(reader.read()) == everything
        assert [reader.get(seq) for seq in range(0, 1200, 7)] == everything[::7]
        assert reader.verify().ok


def test_an_older_holon_refuses_a_version_2_ledger_by_name(tmp_path: Path) -> None:
    # An older holon decompressing a segment of several frames misread it (the stale build
    # at hand took frame 0 for the whole segment: "records 0..19 are missing"), so the
    # header says 2 and such a holon refuses the ledger, naming the version.
    path = tmp_path / "l"
    _ledger(path, 10)
    assert json.loads((path / "holon-ledger.json").read_text())["format_version"] == 2
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 3'))
    with pytest.raises(NotALedger, match="format version 3, newer than the 2 this holon reads"):
        Ledger.open(path, readonly=True)


def test_an_interrupted_seal_of_either_layout_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path, 600)
    seg = list_segments(path / "segments")[1]
    assert seg.sealed is not None
    plain = load_segment(seg)[0]
    data = seg.sealed.read_bytes()
    plain_path = seg.sealed.with_name(seg.sealed.name[: -len(".zst")])
    for partial in (data[: len(data) // 2], data[:-3], compress(plain, level=3), data):
        # A crash left the plain segment and a sealed copy: cut short, sealed the old way, or whole.
        seg.sealed.write_bytes(partial)
        plain_path.write_bytes(plain)
        with Ledger.open(path) as writer:
            assert [a.action for a in writer.recovery] in (["sealed_segment"], ["finished_seal"])
        assert not plain_path.exists()
        with Ledger.open(path, readonly=True) as reader:
            assert list(reader.read()) == records
            assert reader.get(seg.start_seq + 3) == records[seg.start_seq + 3]


# ---------------------------------------------------------------- damage


def _every_reader_names(path: Path, seq: int, file: Path, offset: int, match: str) -> None:
    """read(), get(seq) and verify() all report the damage at ``file`` byte ``offset`` (as stored)."""
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt, match=match) as info:
            reader.get(seq)
        assert (info.value.file, info.value.offset, info.value.decompressed) == (str(file), offset, False)
        assert f"({file} at byte {offset})" in str(info.value)
        with pytest.raises(LedgerCorrupt, match=match) as info:
            list(reader.read())
        assert (info.value.file, info.value.offset) == (str(file), offset)
        report = reader.verify()
    assert [(p.file, p.offset) for p in report.problems] == [(str(file), offset)]
    assert match in report.problems[0].message


def test_a_flipped_byte_in_the_seek_table_is_named_with_the_tables_offset(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path, 600)
    file = _sealed(path, 1)
    data = file.read_bytes()
    entries, _trailer, at = _table(data)
    start = list_segments(path / "segments")[1].start_seq
    for where in (at + 8 + 24 * 2 + 3, at + 8 + len(entries) * 24 + 1, len(data) - 12):
        file.write_bytes(data)
        flip_byte(file, where)
        _every_reader_names(path, start + 5, file, at, "seek table of the sealed segment: checksum mismatch")
        with Ledger.open(path, readonly=True) as reader:  # other segments still read
            assert reader.get(start - 1) == records[start - 1]


@pytest.mark.parametrize("cut", [1, 8, 40, 100])
def test_a_sealed_segment_cut_short_is_named_as_a_missing_seek_table(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "l"
    _ledger(path, 600)
    file = _sealed(path, 1)
    data = file.read_bytes()
    file.write_bytes(data[:-cut])
    start = list_segments(path / "segments")[1].start_seq
    with Ledger.open(path, readonly=True) as reader:
        for attempt in (lambda: reader.get(start + 5), lambda: list(reader.read())):
            with pytest.raises(LedgerCorrupt, match="seek table") as info:
                attempt()
            assert info.value.file == str(file)
            assert info.value.offset is not None and 0 < info.value.offset <= len(data) - cut
        assert not reader.verify().ok


def test_a_seek_table_that_lies_never_yields_a_wrong_record(tmp_path: Path) -> None:
    # A table with a valid checksum but a wrong entry (a writer's bug, or a forged table):
    # each frame's first record and record count are checked against it.
    path = tmp_path / "l"
    records = _ledger(path, 600)
    file = _sealed(path, 1)
    data = file.read_bytes()
    entries, trailer, at = _table(data)
    start, end = (seg.start_seq for seg in list_segments(path / "segments")[1:3])
    first, plain, comp = entries[3]
    last = len(entries) - 1
    lies = {
        "frame 3 starts with seq": ([*entries[:3], (first + 1, plain, comp), *entries[4:]], None),
        "frame 3 starts with seq ": ([*entries[:3], (first - 1, plain, comp), *entries[4:]], None),
        "frame 2 .* decompresses to": ([*entries[:3], (first, plain + 1, comp), *entries[4:]], None),
        f"frame {last} holds": (entries, trailer[0] + 1),
    }
    for match, (table, end_seq) in lies.items():
        file.write_bytes(_with_table(data, table, end_seq))
        with Ledger.open(path, readonly=True) as reader:
            for seq in range(start, end + 1):
                try:
                    got = reader.get(seq)
                except LedgerCorrupt as exc:
                    assert (exc.file, exc.decompressed) == (str(file), False)
                    assert exc.offset is not None and exc.offset >= at
                    assert exc.detail.startswith("seek table of the sealed segment: ")
                else:
                    assert got == records[seq]
            with pytest.raises(LedgerCorrupt, match=match.strip()) as info:
                list(reader.read())
            assert info.value.file == str(file) and info.value.offset is not None and info.value.offset >= at
            report = reader.verify()
        assert [p.file for p in report.problems] == [str(file)]


def _replace_frame(data: bytes, index: int, plain: bytes) -> bytes:
    """``data`` with frame ``index`` recompressed from ``plain`` and the table's offsets moved to match."""
    entries, _trailer, at = _table(data)
    c0 = entries[index][2]
    c1 = entries[index + 1][2] if index + 1 < len(entries) else at
    frame = compress(plain, level=3)
    shift = len(frame) - (c1 - c0)
    moved = [(s, p, c + shift if c > c0 else c) for s, p, c in entries]
    return _with_table(data[:c0] + frame + data[c1:], moved)


def test_a_damaged_frame_is_named_and_the_other_frames_still_read(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path, 600)
    file = _sealed(path, 1)
    data = file.read_bytes()
    entries, _trailer, _at = _table(data)
    start = list_segments(path / "segments")[1].start_seq
    # A byte of frame 3's compressed bytes: zstd damage (named in the file as stored) or,
    # where zstd decodes other bytes, a record frame's checksum (in the decompressed bytes).
    c0, c1, p0, p1 = entries[3][2], entries[4][2], entries[3][1], entries[4][1]
    flip_byte(file, (c0 + c1) // 2)
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt) as info:
            for seq in range(entries[3][0], entries[4][0]):
                reader.get(seq)
        assert info.value.file == str(file) and info.value.offset is not None
        low, high = (p0, p1) if info.value.decompressed else (c0, c1)
        assert low <= info.value.offset < high
        assert reader.get(entries[5][0]) == records[entries[5][0]]  # frames are independent
        assert reader.get(start) == records[start]
        assert not reader.verify().ok
    # A record frame damaged inside a frame that decompresses: named at its decompressed offset.
    whole = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
    p0, p1 = entries[3][1], entries[4][1]
    walk = FrameWalk(whole, file="f", pos=p0, end=p1, prev=None, active=False, verify_chain=False)
    target = [offset for offset, _payload in walk.frames()][1]  # the frame's second record
    damaged = bytearray(whole[p0:p1])
    damaged[target - p0 + 60] ^= 0xFF  # a payload byte: its checksum fails
    file.write_bytes(_replace_frame(data, 3, bytes(damaged)))
    where = f"{file} at byte {target} of the decompressed segment"
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt, match="frame checksum mismatch") as info:
            reader.get(entries[3][0] + 1)
        assert (info.value.file, info.value.offset, info.value.decompressed) == (str(file), target, True)
        assert f"({where})" in str(info.value)
        assert reader.get(entries[4][0]) == records[entries[4][0]]
        with pytest.raises(LedgerCorrupt, match="frame checksum mismatch") as info:
            list(reader.read())
        assert (info.value.offset, info.value.decompressed) == (target, True)
        report = reader.verify()
    assert [(p.file, p.offset, p.decompressed) for p in report.problems] == [(str(file), target, True)]


@FUZZ
@given(data=st.data())
def test_property_damage_anywhere_in_a_sealed_segment_is_named_never_a_wrong_record(
    data: st.DataObject,
) -> None:
    with scratch_dir() as root:
        path = root / "l"
        records = _ledger(path, 300, segment_bytes=16384)
        file = _sealed(path, 1)
        original = file.read_bytes()
        seg = list_segments(path / "segments")[1]
        end = list_segments(path / "segments")[2].start_seq
        mutation = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate"]))
        at = data.draw(st.integers(0, len(original) - 1))
        if mutation == "flip":
            damaged = (
                original[:at] + bytes([original[at] ^ data.draw(st.integers(1, 255))]) + original[at + 1 :]
            )
        elif mutation == "insert":
            damaged = original[:at] + data.draw(st.binary(min_size=1, max_size=8)) + original[at:]
        elif mutation == "delete":
            damaged = original[:at] + original[at + data.draw(st.integers(1, 8)) :]
        else:
            damaged = original[:at]
        file.write_bytes(damaged)
        with Ledger.open(path, readonly=True) as reader:
            for seq in range(seg.start_seq, end):
                try:
                    got = reader.get(seq)
                except HolonError as exc:
                    assert isinstance(exc, LedgerCorrupt) and exc.file == str(file), exc
                else:
                    assert got == records[seq]
            try:
                assert list(reader.read()) == records
            except HolonError as exc:
                assert isinstance(exc, LedgerCorrupt) and exc.file == str(file), exc
            report = reader.verify()
            assert report.ok or [p.file for p in report.problems] == [str(file)]
