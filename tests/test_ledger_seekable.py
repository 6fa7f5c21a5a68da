"""Sealed segments as zstd frames with a seek table: one record reads without the rest of its segment.

docs/ledger-format.md, "Sealed segment file": the layout, segments sealed as one frame
by older holons, the format version upgrade, and damage to the table or a frame named
with the file and offset — never a wrong record.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgspec
import pytest
import xxhash
import zstandard
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from holon.cli import main
from holon.errors import HolonError, LedgerCorrupt, NotALedger, UsageError
from holon.ledger import FORMAT_VERSION, Ledger, sealed
from holon.ledger.compression import compress
from holon.ledger.frames import FrameWalk
from holon.ledger.sealed import read_seek_table
from holon.ledger.segments import SegmentFile, list_segments, load_segment
from holon.projections import ProjectionConfig
from holon.records import Message, Record
from holon.runtime import Agent, AgentConfig
from tests.ledger_support import AGENT, flip_byte, frame_offsets, message, scratch_dir
from tests.runtime_support import Tick

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


# ---------------------------------------------------------------- damaged sealed segments

_FAULT_RECORDS = 90


def _fault_ledger(root: Path) -> tuple[Path, list[Record]]:
    path = root / "base"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sealed, "SEAL_FRAME_BYTES", 300)
        with Ledger.create(path, agent_id="fault", segment_bytes=2048) as ledger:
            for i in range(_FAULT_RECORDS):
                ledger.append(message(i, 30 + 17 * (i % 5)))
    with Ledger.open(path, readonly=True) as reader:
        return path, list(reader.read())


@pytest.fixture(scope="module")
def fault_ledger(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Record]]:
    """A ledger of 90 records whose sealed segments hold 5-7 zstd frames each."""
    return _fault_ledger(tmp_path_factory.mktemp("fault"))


def _table_parts(data: bytes) -> tuple[bytes, list[list[int]], list[int]]:
    """A sealed segment's zstd frames, its seek table entries and (end seq, plain size, count, version)."""
    end_seq, plain_size, count, version, _checksum, _magic = sealed._TRAILER.unpack(
        data[-sealed._TRAILER.size :]
    )
    at = len(data) - sealed._TRAILER.size - count * sealed._ENTRY.size - sealed._SKIPPABLE.size
    table = data[at + sealed._SKIPPABLE.size : len(data) - sealed._TRAILER.size]
    return (
        data[:at],
        [list(entry) for entry in sealed._ENTRY.iter_unpack(table)],
        [end_seq, plain_size, count, version],
    )


def _forged(frames: bytes, entries: list[list[int]], trailer: list[int]) -> bytes:
    """``frames`` and a seek table of ``entries`` whose checksum holds (a table that lies)."""
    table = b"".join(sealed._ENTRY.pack(*entry) for entry in entries)
    head = sealed._TRAILER.pack(*trailer, 0, sealed._TRAILER_MAGIC)[:24]
    checksum = xxhash.xxh3_64_intdigest(table + head)
    tail = sealed._TRAILER.pack(*trailer, checksum, sealed._TRAILER_MAGIC)
    return frames + sealed._SKIPPABLE.pack(sealed.SEEK_TABLE_MAGIC, len(table) + len(tail)) + table + tail


def _only_named_damage(path: Path, damaged: str, records: list[Record]) -> None:
    """Every read of ``path`` gives the original records or LedgerCorrupt naming ``damaged`` and an offset."""

    def named(exc: LedgerCorrupt) -> None:
        assert Path(exc.file).name == damaged and exc.offset is not None, str(exc)

    with Ledger.open(path, readonly=True) as reader:
        for record in records:
            try:
                got = reader.get(record.seq)
            except LedgerCorrupt as exc:
                named(exc)
            else:
                assert got == record, f"get({record.seq}) gave another record"
        try:
            for got in reader.read():
                assert got == records[got.seq], f"read gave another record at seq {got.seq}"
        except LedgerCorrupt as exc:
            named(exc)
        report = reader.verify()
        assert all(Path(problem.file).name == damaged for problem in report.problems), str(report)
    try:
        with Ledger.open(path) as writer:  # a sealed segment is not decompressed on open
            assert writer.head()[0] == len(records) - 1
    except LedgerCorrupt as exc:
        named(exc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, 10),
    fault=st.sampled_from(["flip", "truncate", "zeros", "entry", "trailer", "drop_entry"]),
    at=st.floats(0, 1, exclude_max=True),
    delta=st.sampled_from([-64, -3, -1, 1, 2, 64]),
)
def test_damage_to_a_sealed_segment_is_named_never_a_wrong_record(
    fault_ledger: tuple[Path, list[Record]], tmp_path: Path, *, which: int, fault: str, at: float, delta: int
) -> None:
    base, records = fault_ledger
    # tmp_path is one directory for every example, and Hypothesis may run an example again
    # (hypothesis 6.100 replays one to check it is not flaky): a new directory for each run.
    path = Path(tempfile.mkdtemp(prefix=f"l{which}-{fault}-{delta}-", dir=tmp_path)) / "ledger"
    shutil.copytree(base, path)
    segs = [seg.sealed for seg in list_segments(path / "segments") if seg.sealed is not None]
    target = segs[which % len(segs)]
    data = target.read_bytes()
    frames, entries, trailer = _table_parts(data)
    pos = int(at * len(data))
    if fault == "flip":
        damaged = data[:pos] + bytes([data[pos] ^ (1 << (abs(delta) % 8))]) + data[pos + 1 :]
    elif fault == "truncate":
        damaged = data[:pos]
    elif fault == "zeros":
        damaged = data[:pos] + bytes(len(data[pos : pos + 40])) + data[pos + 40 :]
    elif fault == "entry":  # one field of one entry lies, the checksum holds
        entry = entries[int(at * len(entries))]
        field = abs(delta) % 3
        entry[field] = max(0, entry[field] + delta)
        damaged = _forged(frames, entries, trailer)
    elif fault == "trailer":  # the end seq or the plain size lies
        trailer[abs(delta) % 2] = max(0, trailer[abs(delta) % 2] + delta)
        damaged = _forged(frames, entries, trailer)
    else:  # a frame's entry is gone: two frames read as one
        del entries[1 + int(at * (len(entries) - 1))]
        trailer[2] -= 1
        damaged = _forged(frames, entries, trailer)
    assume(damaged != data)
    target.write_bytes(damaged)
    _only_named_damage(path, target.name, records)


def test_a_frame_from_another_ledger_breaks_the_chain_read_and_verify_check(tmp_path: Path) -> None:
    """A frame spliced in from another ledger (same seqs, same sizes) passes every check of
    ``get``, which checks checksums and seqs, not chain links, in any segment; the chain
    that ``read`` and ``verify`` check names it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sealed, "SEAL_FRAME_BYTES", 300)
        for name, word in (("ours", "record"), ("theirs", "RECORD")):
            with Ledger.create(tmp_path / name, agent_id="fault", segment_bytes=2048) as ledger:
                for i in range(_FAULT_RECORDS):
                    text = f"{word} {i} " * (i % 5 + 2)
                    ledger.append(
                        msgspec.structs.replace(message(i), body=Message(role="assistant", text=text))
                    )
    spliced = 0
    for ours in list_segments(tmp_path / "ours" / "segments")[:-1]:
        assert ours.sealed is not None
        theirs = tmp_path / "theirs" / "segments" / ours.sealed.name
        mine, other = ours.sealed.read_bytes(), theirs.read_bytes()
        ends = [entry[2] for entry in _table_parts(mine)[1]] + [len(_table_parts(mine)[0])]
        other_ends = [entry[2] for entry in _table_parts(other)[1]] + [len(_table_parts(other)[0])]
        for index in range(1, len(ends) - 1):
            if ends[index : index + 2] == other_ends[index : index + 2]:
                start, stop = ends[index], ends[index + 1]
                ours.sealed.write_bytes(mine[:start] + other[start:stop] + mine[stop:])
                spliced += 1
                break
        if spliced:
            break
    assert spliced, "no frame of equal size to splice"
    with Ledger.open(tmp_path / "ours", readonly=True) as reader:
        with pytest.raises(LedgerCorrupt) as raised:
            list(reader.read())
        assert raised.value.file == str(ours.sealed)
        report = reader.verify()
        assert not report.ok and all(problem.file == str(ours.sealed) for problem in report.problems)


# ---------------------------------------------------------------- a plain copy beside a sealed segment


def _sealed_ledger(path: Path, *, agent_id: str = "fault") -> list[SegmentFile]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sealed, "SEAL_FRAME_BYTES", 300)
        with Ledger.create(path, agent_id=agent_id, segment_bytes=2048) as ledger:
            for i in range(_FAULT_RECORDS):
                ledger.append(message(i, 30 + 17 * (i % 5)))
    return list_segments(path / "segments")


def _frames(seg: SegmentFile, count: int | None = None) -> bytes:
    """The plain bytes of a sealed segment's first ``count`` zstd frames (all: what ``zstd -dc`` gives)."""
    assert seg.sealed is not None
    data = seg.sealed.read_bytes()
    table = read_seek_table(
        lambda size, offset: data[offset : offset + size], len(data), file="", start_seq=seg.start_seq
    )
    assert table is not None
    spans = [table.span(index) for index in range(len(table.plain))][:count]
    return b"".join(zstandard.ZstdDecompressor().decompress(data[c0:c1]) for c0, c1, *_ in spans)


def _snapshot(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_a_partial_plain_copy_of_a_sealed_segment_is_refused_not_sealed_over_it(tmp_path: Path) -> None:
    """The documented mend of a damaged seek table puts ``zstd -dc``'s output beside the file
    and opens for writing; a copy that stopped at a frame boundary (damage in a frame) holds
    whole records and walked clean, so the open sealed it over the .zst: records lost."""
    path = tmp_path / "l"
    segs = _sealed_ledger(path)
    seg = segs[2]  # neither the first nor the one before the active segment
    assert seg.sealed is not None and len(segs) > 4
    plain = seg.sealed.with_name(seg.sealed.name.removesuffix(".zst"))
    plain.write_bytes(_frames(seg, 3))
    before = _snapshot(path)
    with pytest.raises(LedgerCorrupt) as raised:
        Ledger.open(path)
    assert raised.value.file == str(plain) and raised.value.offset == plain.stat().st_size
    assert f"next segment starts at seq {segs[3].start_seq}" in raised.value.detail
    assert _snapshot(path) == before  # refused: nothing changed, the sealed copy is there
    plain.unlink()
    with Ledger.open(path) as ledger:
        assert ledger.verify().ok and ledger.head()[0] == _FAULT_RECORDS - 1


def test_a_plain_copy_from_another_ledger_is_refused_by_the_next_segments_link(tmp_path: Path) -> None:
    segs = _sealed_ledger(tmp_path / "ours")
    theirs = _sealed_ledger(tmp_path / "theirs", agent_id="other")  # same seqs, another chain
    seg = segs[2]
    assert seg.sealed is not None and [s.start_seq for s in theirs] == [s.start_seq for s in segs]
    plain = seg.sealed.with_name(seg.sealed.name.removesuffix(".zst"))
    plain.write_bytes(_frames(theirs[2]))
    before = _snapshot(tmp_path / "ours")
    with pytest.raises(LedgerCorrupt) as raised:
        Ledger.open(tmp_path / "ours")
    assert raised.value.file == str(segs[3].sealed) and raised.value.offset == 24
    assert "broken hash chain" in raised.value.detail
    assert _snapshot(tmp_path / "ours") == before


def test_a_damaged_seek_table_is_mended_by_a_whole_plain_copy_and_an_open(tmp_path: Path) -> None:
    path = tmp_path / "l"
    segs = _sealed_ledger(path)
    seg = segs[2]
    assert seg.sealed is not None
    data = bytearray(seg.sealed.read_bytes())
    data[-30] ^= 0x40  # inside the table's trailer: the checksum fails
    whole = _frames(seg)
    seg.sealed.write_bytes(bytes(data))
    with Ledger.open(path, readonly=True) as reader, pytest.raises(LedgerCorrupt) as raised:
        reader.get(seg.start_seq)
    assert raised.value.file == str(seg.sealed) and "seek table" in raised.value.detail
    seg.sealed.with_name(seg.sealed.name.removesuffix(".zst")).write_bytes(whole)
    with Ledger.open(path) as ledger:
        assert [action.action for action in ledger.recovery] == ["sealed_segment"]
        assert ledger.verify().ok
        assert ledger.get(seg.start_seq) == next(ledger.read(seg.start_seq))


# --------------------------------------------------------------------------- a ledger an older holon wrote
# A version 1 ledger (sealed segments of one zstd frame, the header saying 1) stays readable
# by the holon that wrote it until this holon seals a segment in the new layout: an open for
# writing that seals nothing (a refused append, an Agent.open refusing its agent id or its
# projection config, `holon append` of an empty file) leaves the header alone.


def _version(path: Path) -> int:
    version = json.loads((path / "holon-ledger.json").read_text())["format_version"]
    assert isinstance(version, int)
    return version


def _version_1_ledger(path: Path, n: int = 300) -> None:
    """A ledger as a holon before format version 2 left it: sealed segments of one frame, header 1."""
    with Ledger.create(path, agent_id=AGENT, segment_bytes=16384, fsync="never") as ledger:
        ledger.append_many(message(i, 120) for i in range(n))
    segs = list_segments(path / "segments")
    assert any(seg.sealed is not None for seg in segs)
    for seg in segs:
        if seg.sealed is not None:
            seg.sealed.write_bytes(compress(load_segment(seg)[0], level=3))
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 1'))


def _files(path: Path) -> dict[str, bytes]:
    return {
        str(f.relative_to(path)): f.read_bytes()
        for f in sorted(path.rglob("*"))
        if f.is_file() and f.name != "holon-ledger.lock"
    }


def test_an_open_for_writing_that_seals_nothing_leaves_a_version_1_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    before = _files(path)
    with Ledger.open(path) as writer:
        assert writer.header.format_version == 1
    assert _version(path) == 1
    assert _files(path) == before


def test_a_refused_append_leaves_an_older_holons_ledger_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    before = _files(path)
    backwards = tmp_path / "back.jsonl"
    backwards.write_text(
        '{"seq":0,"ts":0,"turn":null,"kind":"message","v":3,"body":{"role":"operator","text":"late"}}\n'
    )
    result = CliRunner().invoke(main, ["append", str(path), str(backwards)])
    assert result.exit_code == 2, result.output
    assert "timestamps never go backwards" in result.output
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = CliRunner().invoke(main, ["append", str(path), str(empty)])
    assert result.exit_code == 0, result.output
    assert "nothing to append" in result.output
    assert _files(path) == before  # the header too: the holon that wrote it still reads it


def test_an_agent_open_refused_leaves_a_version_1_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    with pytest.raises(UsageError, match="belongs to agent"):
        Agent.open(path, agent_id="someone-else")
    assert _version(path) == 1


def test_the_first_seal_raises_the_header_before_it_writes_the_new_layout(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _version_1_ledger(path)
    with Ledger.open(path, fsync="never") as writer:
        writer.append_many(message(i, 120) for i in range(300, 302))
        assert writer.header.format_version == 1  # no segment sealed yet
        writer.append_many(message(i, 120) for i in range(302, 600))
        assert writer.header.format_version == FORMAT_VERSION
    assert _version(path) == FORMAT_VERSION
    with Ledger.open(path, readonly=True) as reader:
        assert [record.seq for record in reader.read()] == list(range(600))
        assert reader.verify().ok


def test_a_segment_left_plain_by_a_crash_is_sealed_under_a_raised_header(tmp_path: Path) -> None:
    # A crash between a rollover and its seal leaves a plain segment before the active one:
    # the next writer's recovery seals it in the new layout, so it raises the header first.
    path = tmp_path / "l"
    _version_1_ledger(path)
    segs = list_segments(path / "segments")
    victim = segs[-2]
    assert victim.sealed is not None
    plain = path / "segments" / victim.sealed.name.removesuffix(".zst")
    plain.write_bytes(load_segment(victim)[0])
    victim.sealed.unlink()
    with Ledger.open(path) as writer:
        assert writer.header.format_version == FORMAT_VERSION
    assert _version(path) == FORMAT_VERSION
    assert not plain.exists()


def test_agent_open_with_another_projection_config_leaves_a_version_1_header(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Agent.open(path, agent_id=AGENT, clock=Tick()) as agent:
        for i in range(4):
            with agent.turn(input=f"tick {i}", trigger="timer") as turn:
                if agent.state.active_work_item is None:
                    turn.add_work_item("W1", "watch the queue", state="active")
                turn.record_message(f"tick {i}: nothing new")
    header = path / "holon-ledger.json"
    header.write_text(header.read_text().replace('"format_version": 2', '"format_version": 1'))
    before = _files(path)
    other = AgentConfig(projection=ProjectionConfig(turn_cap=3))
    with pytest.raises(UsageError, match="was derived under"):
        Agent.open(path, config=other, clock=Tick())
    assert _files(path) == before
