"""Opening a large ledger stays cheap: open reads only the active segment, ``read(from_seq)``
starts at the segment holding ``from_seq``, and a runtime's ``checkpoints/`` subdirectory
inside the ledger directory is left alone by open, recovery and verify. A header whose
settings are out of the range ``Ledger.create`` accepts is refused on open."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import msgspec
import pytest

from holon.errors import LedgerCorrupt, UsageError
from holon.ledger import Ledger
from holon.ledger.segments import list_segments
from tests.ledger_support import AGENT, assert_ledger_holds, message


def _fill(path: Path, n: int) -> list:
    with Ledger.create(path, agent_id=AGENT, fsync="never", segment_bytes=4096) as ledger:
        ledger.append_many(message(i, 100) for i in range(n))
    return [msgspec.structs.replace(message(i, 100), seq=i) for i in range(n)]


def _garble_sealed(path: Path) -> list[Path]:
    """Overwrite every sealed segment with bytes that are not zstd: reading one must fail."""
    sealed = [s.sealed for s in list_segments(path / "segments") if s.sealed is not None]
    for file in sealed:
        file.write_bytes(b"not zstd " * 50)
    return sealed


def test_open_and_append_do_not_read_sealed_segments(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 400)
    segs = list_segments(path / "segments")
    assert len(segs) > 10
    sealed = _garble_sealed(path)
    # Opening for writing recovers from the active segment alone, so damage in sealed
    # segments does not stop it (and is not silently accepted either: reads name it).
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()
        assert ledger.head()[0] == 399
        assert ledger.append(message(400, 100)) == 400
        tail_start = segs[-1].start_seq
        assert list(ledger.read(from_seq=tail_start)) == [
            *records[tail_start:],
            msgspec.structs.replace(message(400, 100), seq=400),
        ]
        with pytest.raises(LedgerCorrupt, match="zstd") as info:
            list(ledger.read())
        assert info.value.file == str(sealed[0])
        report = ledger.verify()
        assert not report.ok
        assert {p.file for p in report.problems} >= {str(f) for f in sealed}


def test_read_from_seq_starts_at_the_segment_holding_it(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 400)
    segs = list_segments(path / "segments")
    target = segs[-3]  # a sealed segment near the end
    assert target.sealed is not None
    # Damage every sealed segment before the target: reading from inside it must not touch them.
    for seg in segs[: len(segs) - 3]:
        assert seg.sealed is not None
        seg.sealed.write_bytes(b"garbage")
    from_seq = target.start_seq + 2
    with Ledger.open(path, readonly=True) as reader:
        assert list(reader.read(from_seq=from_seq)) == records[from_seq:]
        assert list(reader.read(from_seq=from_seq, to_seq=from_seq + 5)) == records[from_seq : from_seq + 5]
        assert reader.get(target.start_seq) == records[target.start_seq]
        with pytest.raises(LedgerCorrupt):
            list(reader.read(from_seq=target.start_seq - 1))


def test_a_checkpoints_subdirectory_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _fill(path, 120)
    checkpoints = path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / "00000000000000000100.ckpt").write_bytes(b"runtime checkpoint bytes")
    (checkpoints / "00000000000000000110.ckpt.tmp").write_bytes(b"half-written checkpoint")
    (checkpoints / "nested").mkdir()
    with Ledger.open(path) as ledger:
        assert ledger.recovery == ()
        ledger.append(message(120, 100))
        records.append(msgspec.structs.replace(message(120, 100), seq=120))
        report = ledger.verify()
        assert report.ok, str(report)
    assert_ledger_holds(path, records)
    # Recovery cleans debris only in segments/ and blobs/: the runtime's files are untouched.
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "00000000000000000100.ckpt",
        "00000000000000000110.ckpt.tmp",
        "nested",
    ]


def _edit_header(path: Path, field: str, value: object) -> None:
    header = path / "holon-ledger.json"
    doc = json.loads(header.read_text())
    doc[field] = value
    header.write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("field", "value", "shown", "allowed"),
    [
        ("segment_bytes", -1, "-1", "1,024 to 1,073,741,824"),
        ("segment_bytes", 1, "1", "1,024 to 1,073,741,824"),
        ("segment_bytes", 1023, "1023", "1,024 to 1,073,741,824"),
        ("segment_bytes", True, "true", "1,024 to 1,073,741,824"),
        ("segment_bytes", 10**30, str(10**30), "1,024 to 1,073,741,824"),
        ("blob_threshold", -5, "-5", "0 to 268,435,456"),
        ("blob_threshold", True, "true", "0 to 268,435,456"),
        ("blob_threshold", (1 << 28) + 1, str((1 << 28) + 1), "0 to 268,435,456"),
    ],
)
def test_a_header_setting_out_of_range_is_refused_by_open_and_by_create(
    tmp_path: Path, field: str, value: object, shown: str, allowed: str
) -> None:
    # Before: a hand-edited header passed `holon verify` and writers used the value
    # (segment_bytes 1: one segment per record).
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    _edit_header(path, field, value)
    before = sorted(p.name for p in (path / "segments").iterdir())
    for readonly in (True, False):
        with pytest.raises(LedgerCorrupt) as info:
            Ledger.open(path, readonly=readonly)
        assert info.value.file == str(path / "holon-ledger.json")
        assert f"header field {field} is {shown}, but it must be an integer from {allowed}" in str(info.value)
    assert sorted(p.name for p in (path / "segments").iterdir()) == before
    with pytest.raises(UsageError, match=f"{field} .* must be an integer from {allowed}"):
        Ledger.create(tmp_path / "new", agent_id=AGENT, **{field: value})  # type: ignore[arg-type]
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("field", "low", "high"), [("segment_bytes", 1024, 1 << 30), ("blob_threshold", 0, 1 << 28)]
)
def test_open_accepts_exactly_the_header_settings_create_accepts(
    tmp_path: Path, field: str, low: int, high: int
) -> None:
    for value in (low, high):
        path = tmp_path / f"ok-{value}"
        Ledger.create(path, agent_id=AGENT, **{field: value}).close()  # type: ignore[arg-type]
        with Ledger.open(path) as ledger:
            assert getattr(ledger.header, field) == value
            ledger.append(message(0))
        assert_ledger_holds(path, [msgspec.structs.replace(message(0), seq=0)])
        for outside in (low - 1, high + 1):
            with pytest.raises(UsageError, match=field):
                Ledger.create(tmp_path / "refused", agent_id=AGENT, **{field: outside})  # type: ignore[arg-type]
            _edit_header(path, field, outside)
            with pytest.raises(LedgerCorrupt, match=f"header field {field} is {outside}"):
                Ledger.open(path, readonly=True)
        _edit_header(path, field, value)


# --------------------------------------------------------------------------- a segment directory missing


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
