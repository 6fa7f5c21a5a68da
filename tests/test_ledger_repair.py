"""`holon repair`: cutting the damaged tail a power loss can leave under fsync batch/never.

Opening refuses a damaged frame with intact frames after it (only the application knows
whether they were acknowledged). `inspect_tail` shows what a cut loses, changing nothing;
`cut_tail` cuts exactly there, keeps the bytes it cut, and leaves a ledger that opens,
verifies and takes appends again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import holon.ledger.segments as segments_mod
from holon.cli import EXIT_CORRUPT, EXIT_OK
from holon.errors import LedgerCorrupt, LedgerLocked, UsageError
from holon.ledger import Ledger, cut_tail, inspect_tail
from holon.ledger.sealed import decompress_sealed
from holon.ledger.segments import SEGMENT_HEADER, list_segments
from holon.records import Record
from tests.cli_support import invoke
from tests.ledger_support import (
    AGENT,
    active_segment,
    assert_ledger_holds,
    child_env,
    expected_head,
    flip_byte,
    frame_offsets,
    message,
    scratch_dir,
)


def _ledger(path: Path, n: int = 12, *, segment_bytes: int | None = None) -> list[Record]:
    options = {} if segment_bytes is None else {"segment_bytes": segment_bytes}
    with Ledger.create(path, agent_id=AGENT, fsync="batch", **options) as ledger:
        for i in range(n):
            ledger.append(message(i, 80))
        ledger.flush()
    return [msgspec.structs.replace(message(i, 80), seq=i) for i in range(n)]


def _zero(path: Path, start: int, stop: int) -> None:
    """What an unwritten page leaves after a power loss: zeros between intact bytes."""
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(b"\0" * (stop - start))


def _plain(sealed: Path) -> bytes:
    return decompress_sealed(sealed.read_bytes(), file=str(sealed), start_seq=int(sealed.name[:20]))


def _tree(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_out_of_order_writeback_is_found_cut_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "l"
    records = _ledger(path)
    seg = active_segment(path)
    offsets = frame_offsets(seg.read_bytes())
    original = seg.read_bytes()
    # The page holding frame 7's head and part of frame 8 never reached the disk.
    _zero(seg, offsets[7], offsets[8] + 20)
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger.open(path)
    assert refused.value.offset == offsets[7]

    found = inspect_tail(path)
    assert found is not None
    assert (found.file, found.offset, found.length) == (str(seg), offsets[7], len(original) - offsets[7])
    assert found.first_seq == 7
    assert found.later_seqs == (9, 10, 11)  # frame 8 is damaged too; 9-11 are intact
    assert found.last_seq == 11
    damaged = seg.read_bytes()

    action = cut_tail(path, found.offset)
    assert action.action == "cut_damaged_tail"
    assert (action.file, action.offset, action.bytes_cut) == (str(seg), offsets[7], found.length)
    assert action.kept == str(path / "cut" / f"{seg.name}.{offsets[7]}.cut")
    # Nothing lost: the cut bytes are kept exactly, and the segment is what came before them.
    assert Path(action.kept).read_bytes() == damaged[offsets[7] :]
    assert seg.read_bytes() == original[: offsets[7]]
    assert_ledger_holds(path, records[:7])
    with Ledger.open(path, fsync="batch") as ledger:
        assert ledger.append(message(99, 80)) == 7
    assert_ledger_holds(path, [*records[:7], msgspec.structs.replace(message(99, 80), seq=7)])


def test_a_cut_elsewhere_or_without_damage_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    seg = active_segment(path)
    offsets = frame_offsets(seg.read_bytes())
    with pytest.raises(UsageError, match=f"valid up to byte {seg.stat().st_size}"):
        cut_tail(path, offsets[5])
    flip_byte(seg, offsets[6] + 60)
    before = _tree(path)
    elsewhere = f"first damaged frame of .* is at byte {offsets[6]}, not {offsets[5]}"
    with pytest.raises(UsageError, match=elsewhere):
        cut_tail(path, offsets[5])
    with pytest.raises(UsageError):
        cut_tail(path, offsets[7])
    after = _tree(path)
    after.pop("holon-ledger.lock")
    before.pop("holon-ledger.lock")
    assert after == before
    assert not (path / "cut").exists()


def test_a_torn_tail_is_not_a_damaged_one(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    seg = active_segment(path)
    last = frame_offsets(seg.read_bytes())[-1]
    with open(seg, "r+b") as f:
        f.truncate(last + 30)  # a crash mid-append: opening cuts this by itself
    assert inspect_tail(path) is None
    with pytest.raises(UsageError, match="torn tail after them is cut by any open"):
        cut_tail(path, last)


def test_other_damage_is_checked_before_anything_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path, 40, segment_bytes=2048)
    segs = sorted((path / "segments").iterdir())
    sealed = segs[-2]
    assert sealed.name.endswith(".zst")
    # A crash before sealing left the predecessor plain, and a byte in it is damaged: no
    # crash or power loss under batch explains that (its records were synced before the
    # rollover), so the cut of the active tail must not happen either.
    plain = sealed.with_name(sealed.name.removesuffix(".zst"))
    plain.write_bytes(_plain(sealed))
    sealed.unlink()
    flip_byte(plain, frame_offsets(plain.read_bytes())[1] + 60)
    seg = active_segment(path)
    at = frame_offsets(seg.read_bytes())[0]
    flip_byte(seg, at + 60)
    assert inspect_tail(path) is not None  # the active tail alone would be cut
    before = _tree(path)
    with pytest.raises(LedgerCorrupt) as refused:
        cut_tail(path, at)
    assert refused.value.file == str(plain)
    after = _tree(path)
    after.pop("holon-ledger.lock", None)
    before.pop("holon-ledger.lock", None)
    assert after == before


def test_a_damaged_segment_header_has_no_cut(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    flip_byte(active_segment(path), 2)
    with pytest.raises(LedgerCorrupt):
        inspect_tail(path)


def test_a_live_writer_is_never_cut_under(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    with Ledger.open(path, fsync="batch") as writer:
        writer.append(message(50, 80))
        writer.flush()
        offset = frame_offsets(active_segment(path).read_bytes())[-1]
        with pytest.raises(LedgerLocked):
            cut_tail(path, offset)


def test_the_same_damage_cut_twice_keeps_both(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    seg = active_segment(path)
    at = frame_offsets(seg.read_bytes())[9]
    kept = []
    for round_ in range(2):
        with Ledger.open(path, fsync="batch") as ledger:
            while ledger.head()[0] < 11:
                ledger.append(message(100 + round_, 80))
            ledger.flush()
        flip_byte(seg, at + 50)
        kept.append(cut_tail(path, at).kept)
    assert kept == [str(path / "cut" / f"{seg.name}.{at}.cut"), str(path / "cut" / f"{seg.name}.{at}.2.cut")]
    assert Path(kept[0]).read_bytes() != Path(kept[1]).read_bytes()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(2, 30), data=st.data())
def test_any_damaged_range_of_the_active_tail_cuts_to_a_verifying_prefix(n: int, data: st.DataObject) -> None:
    """Damage anywhere after the segment header: either opening copes (a torn tail) or the
    damage is found; the cut leaves exactly the records before the damaged frame, and the
    kept bytes plus what remains are the damaged file."""
    with scratch_dir() as tmp:
        path = tmp / "l"
        records = _ledger(path, n)
        seg = active_segment(path)
        original = seg.read_bytes()
        size = len(original)
        start = data.draw(st.integers(SEGMENT_HEADER.size, size - 1), label="start")
        stop = data.draw(st.integers(start + 1, min(size, start + 400)), label="stop")
        if data.draw(st.booleans(), label="zeros"):
            _zero(seg, start, stop)
        else:
            for offset in range(start, stop):
                flip_byte(seg, offset)
        damaged = seg.read_bytes()
        found = inspect_tail(path)
        if found is None:
            with Ledger.open(path) as ledger:  # a torn tail: opening cuts it
                kept = ledger.head()[0] + 1
            assert_ledger_holds(path, records[:kept])
            return
        # Every frame before the cut is valid, and the damage starts in the frame cut first.
        assert found.first_seq == len(frame_offsets(damaged[: found.offset]))
        changed = next(i for i in range(start, stop) if damaged[i] != original[i])
        assert found.offset <= changed < found.offset + found.length
        action = cut_tail(path, found.offset)
        assert action.kept is not None
        assert damaged[: found.offset] + Path(action.kept).read_bytes() == damaged
        assert_ledger_holds(path, records[: found.first_seq])


def test_cli_repair_shows_then_cuts(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    seg = active_segment(path)
    at = frame_offsets(seg.read_bytes())[6]
    flip_byte(seg, at + 60)

    shown = invoke("repair", path)
    assert shown.exit_code == 3
    assert f"damaged frame     {seg} at byte {at}: frame checksum mismatch" in shown.output
    assert "a cut loses       seqs 6-11" in shown.output
    assert f"holon repair {path} --cut-at {at}" in shown.output
    as_json = invoke("repair", path, "--json")
    assert as_json.exit_code == 3
    doc = json.loads(as_json.stdout)
    assert doc["cut_at"] == at and doc["damaged_tail"]["later_seqs"] == [7, 8, 9, 10, 11]

    verified = invoke("verify", path)
    assert verified.exit_code == 3
    assert f"`holon repair {path}` shows what cutting it there loses" in verified.output

    wrong = invoke("repair", path, "--cut-at", str(at + 1))
    assert wrong.exit_code == 2 and "nothing was changed" in wrong.output

    done = invoke("repair", path, "--cut-at", str(at))
    assert done.exit_code == 0, done.output
    assert "(seqs 6-11)" in done.output and f"kept in           {path / 'cut'}" in done.output
    assert invoke("verify", path).exit_code == 0
    nothing = invoke("repair", path)
    assert nothing.exit_code == 0 and nothing.output.startswith("nothing to cut")
    assert os.listdir(path / "cut") == [f"{seg.name}.{at}.cut"]


def _roll_over(writer: Ledger) -> Path:
    """Append until ``writer`` rolls over, and wait for its seal; returns the segment it sealed."""
    sealing = writer._tip.active_path
    seq = writer.head()[0] + 1
    while writer._tip.active_path == sealing:
        writer.append(message(seq, 80))
        seq += 1
    writer._writer._join_sealer()
    assert not sealing.exists() and sealing.with_name(sealing.name + ".zst").is_file()
    return sealing


def test_a_writer_sealing_between_the_listing_and_the_read_is_listed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `holon repair` lists segments/ and reads the newest plain segment. A writer rolling
    # over between the two seals that file and unlinks it: inspect_tail raised
    # FileNotFoundError and `holon repair` (the show mode too, and `holon verify` of a
    # damaged ledger, which asks it) exited 2, a usage error: about 1 run in 4 against a
    # writer of 1 KiB segments.
    path = tmp_path / "l"
    _ledger(path, 3, segment_bytes=1024)
    sealed: list[Path] = []
    real_scandir = os.scandir
    with Ledger.open(path, fsync="batch") as writer:

        def scandir_then_seal(where: Path) -> Iterator[os.DirEntry[str]]:
            with real_scandir(where) as listing:
                entries = list(listing)
            if Path(where) == path / "segments" and len(sealed) < 2:
                sealed.append(_roll_over(writer))  # the writer, between the listing and the read
            return iter(entries)

        monkeypatch.setattr(segments_mod.os, "scandir", scandir_then_seal)
        assert inspect_tail(path) is None
        shown = invoke("repair", path)
        assert shown.exit_code == 0, shown.output
        assert shown.output.startswith("nothing to cut")
        head = writer.head()[0]
    assert len(sealed) == 2
    monkeypatch.undo()
    assert_ledger_holds(path, [msgspec.structs.replace(message(i, 80), seq=i) for i in range(head + 1)])


@pytest.mark.slow
def test_a_writer_sealing_after_every_listing_is_reported_locked_not_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Listing again has a bound: a writer that seals the active segment each time before
    # repair reads it leaves nothing to inspect (repair is for a ledger no writer appends to).
    path = tmp_path / "l"
    _ledger(path, 3, segment_bytes=1024)
    real_scandir = os.scandir
    with Ledger.open(path, fsync="never") as writer:

        def scandir_then_seal(where: Path) -> Iterator[os.DirEntry[str]]:
            with real_scandir(where) as listing:
                entries = list(listing)
            if Path(where) == path / "segments":
                _roll_over(writer)
            return iter(entries)

        monkeypatch.setattr(segments_mod.os, "scandir", scandir_then_seal)
        with pytest.raises(LedgerLocked, match="rolled over to a new segment 100 times") as locked:
            inspect_tail(path)
        assert locked.value.pid == os.getpid()
        shown = invoke("repair", path)
        assert shown.exit_code == 3, shown.output
        assert "stop the writer, then run holon repair again" in shown.output


@pytest.mark.slow
def test_repair_beside_a_writer_rolling_over_in_another_process_never_fails(tmp_path: Path) -> None:
    # The race above, as it happens: a writer process appending to 1 KiB segments (a seal
    # every few appends) while repair looks at the active segment, over and over.
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT, segment_bytes=1024).close()
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.ledger_crash_child", str(path)],
        stdout=subprocess.PIPE,
        env=child_env(),
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert child.stdout is not None
        child.stdout.readline()  # appending
        first = active_segment(path)
        runs = 0
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert inspect_tail(path) is None
            runs += 1
        assert invoke("repair", path).exit_code == 0
        rolled = int(active_segment(path).name[:20]) - int(first.name[:20])
    finally:
        child.kill()
        child.wait()
    assert runs > 100 and rolled > 100, (runs, rolled)


# --------------------------------------------------------------------------- an empty active segment


def test_repair_offers_and_makes_the_repair_of_an_empty_active_segment(tmp_path: Path) -> None:
    path = tmp_path / "L"
    assert invoke("init", path, "--agent-id", "a").exit_code == EXIT_OK
    active_segment(path).write_bytes(b"")
    append = invoke("append", path, os.devnull)
    assert append.exit_code == EXIT_CORRUPT
    assert "holon repair" in append.stderr
    shown = invoke("repair", path)
    assert shown.exit_code == EXIT_CORRUPT
    assert "no record (a segment's records follow its header)" in shown.stdout
    assert "--cut-at 0" in shown.stdout
    assert "the genesis hash" in shown.stdout
    cut = invoke("repair", path, "--cut-at", "0")
    assert cut.exit_code == EXIT_OK, cut.stderr
    assert cut.stdout.startswith("new header ")
    assert invoke("verify", path).exit_code == EXIT_OK


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
