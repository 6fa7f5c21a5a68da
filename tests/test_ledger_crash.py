"""Durability under kill -9: no acknowledged append is ever lost, and appending continues."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from holon.ledger import Ledger, blobs, files, sealed, store
from holon.ledger.sealed import read_seek_table
from holon.ledger.segments import list_segments
from holon.records import Record, ToolResult
from tests.ledger_crash_child import expected_record
from tests.ledger_support import AGENT, child_env
from tests.seal_crash_child import FRAME_BYTES, STEPS

ROUNDS = 24
SEED = 20240601


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_acknowledged_record(tmp_path: Path) -> None:
    path = tmp_path / "l"
    # Small segments so kills also land in rollovers and seals, not only in frame writes.
    Ledger.create(path, agent_id="crash", segment_bytes=4096, blob_threshold=2048).close()
    rng = random.Random(SEED)
    acked = -1
    for round_no in range(ROUNDS):
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.ledger_crash_child", str(path)],
            stdout=subprocess.PIPE,
            env=child_env(),
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert child.stdout is not None
        # The kill moment is random relative to the child's progress: it keeps appending
        # while we wait for a random number of acknowledgements.
        wanted = rng.randint(1, 60)
        for _ in range(wanted):
            line = child.stdout.readline()
            assert line, f"round {round_no}: child exited early with {child.wait()}"
            acked = int(line)
        os.kill(child.pid, signal.SIGKILL)
        # Acknowledgements printed before death count too.
        for line in child.stdout.read().split():
            acked = int(line)
        child.wait(timeout=60)
        child.stdout.close()

        with Ledger.open(path) as ledger:
            head_seq, _ = ledger.head()
            assert head_seq >= acked, f"round {round_no}: acked {acked} but head is {head_seq}"
            report = ledger.verify()
            assert report.ok, str(report)
            assert report.records_checked == head_seq + 1
            for record in ledger.read(max(0, acked - 30)):
                expected = expected_record(record.seq)
                body = record.body
                if isinstance(body, ToolResult) and body.blob is not None:
                    body = msgspec.structs.replace(
                        body, output=ledger.get_blob(body.blob.hash).decode(), blob=None
                    )
                assert msgspec.structs.replace(record, body=body) == msgspec.structs.replace(
                    expected, seq=record.seq
                )
            # Appending continues on the recovered ledger.
            assert ledger.append(expected_record(head_seq + 1)) == head_seq + 1
    with Ledger.open(path, readonly=True) as reader:
        assert reader.verify().ok
        assert reader.head()[0] >= acked + 1


# --------------------------------------------------------------------------- directory entries made durable


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


# --------------------------------------------------------------------------- a seal killed at every step
# A child appends with fsync ``always`` and seals 4 KiB segments into 512-byte zstd frames
# plus a seek table; it is killed (SIGKILL) at each step of a seal and at random moments.
# Reopening loses no acknowledged record, finishes or redoes the seal, verifies, serves
# every seq by ``get`` through the seek tables, and appending continues.

SEAL_SEED = 20261123
SEAL_RANDOM_ROUNDS = 14
_ROOT = Path(__file__).resolve().parent.parent


def _plain(ledger: Ledger, record: Record) -> Record:
    """``record`` with a blob-moved tool output put back inline, as the child appended it."""
    body = record.body
    if isinstance(body, ToolResult) and body.blob is not None:
        body = msgspec.structs.replace(body, output=ledger.get_blob(body.blob.hash).decode(), blob=None)
    return msgspec.structs.replace(record, body=body)


def _kill_round(path: Path, step: str, wanted: int) -> tuple[int, int | None]:
    """Run the child until it holds at ``step`` (or, ``random``, acknowledged ``wanted`` records),
    SIGKILL it; returns the last seq it acknowledged and the start seq of the segment whose
    seal it was held in (None if it was not held)."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.seal_crash_child", str(path), step],
        stdout=subprocess.PIPE,
        env=child_env(),
        cwd=_ROOT,
    )
    assert child.stdout is not None
    acked, held, seen = -1, None, 0
    try:
        while True:
            line = child.stdout.readline()
            assert line, f"child exited early with {child.wait()}"
            if line.startswith(b"hold"):
                held = int(line.split()[2])
                break
            acked = int(line)
            seen += 1
            if step == "random" and seen >= wanted:
                break
    finally:
        os.kill(child.pid, signal.SIGKILL)
        rest = child.stdout.read().split()
        child.wait(timeout=60)
        child.stdout.close()
    for word in rest:  # acknowledgements printed before death count too
        if word.isdigit():
            acked = int(word)
    return acked, held


#: What reopening repairs after a kill held at each step of a seal.
_REPAIRS = {
    "before_write": {"sealed_segment"},
    "tmp_partial": {"removed_temp_file", "sealed_segment"},
    "tmp_written": {"removed_temp_file", "sealed_segment"},
    "renamed": {"finished_seal"},
    "unlinked": set(),
}


def _check_reopened(path: Path, acked: int, step: str, held: int | None, where: str) -> None:
    with Ledger.open(path) as ledger:
        if held is not None:
            # Besides the held seal, only the record being appended may leave debris (a torn
            # tail, a blob's temp file), and a segment the appends filled while the seal was
            # held, whose own seal was still waiting for it: that one is sealed on reopen.
            done: dict[int, set[str]] = {}
            for action in ledger.recovery:
                name = Path(action.file).name
                if Path(action.file).parent.name == "segments" and action.action != "truncated_torn_tail":
                    done.setdefault(int(name.split(".")[0]), set()).add(action.action)
            assert done.pop(held, set()) == _REPAIRS[step], f"{where}: {ledger.recovery}"
            assert all(actions == {"sealed_segment"} for actions in done.values()), (
                f"{where}: {ledger.recovery}"
            )
            assert all(start > held for start in done), f"{where}: {ledger.recovery}"
        head_seq, _ = ledger.head()
        assert head_seq >= acked, f"{where}: acked {acked} but head is {head_seq}"
        report = ledger.verify()
        assert report.ok, f"{where}: {report}"
        assert report.records_checked == head_seq + 1
        assert ledger.append(expected_record(head_seq + 1)) == head_seq + 1
    segs = list_segments(path / "segments")
    assert all(seg.plain is None or seg.sealed is None for seg in segs), f"{where}: a seal left half done"
    for seg in segs[:-1]:
        assert seg.sealed is not None, f"{where}: {seg.name} is not sealed"
        data = seg.sealed.read_bytes()
        table = read_seek_table(
            lambda count, offset, data=data: data[offset : offset + count],
            len(data),
            file=str(seg.sealed),
            start_seq=seg.start_seq,
        )
        assert table is not None and len(table.plain) > 2, f"{where}: {seg.name} has no multi-frame table"
    # A fresh reader serves every record through the seek tables, as appended.
    with Ledger.open(path, readonly=True) as reader:
        for seq in range(head_seq + 2):
            got = _plain(reader, reader.get(seq))
            assert got == msgspec.structs.replace(expected_record(seq), seq=seq), f"{where}: seq {seq}"


@pytest.mark.slow
def test_sigkill_at_every_step_of_a_seal_and_at_random_moments_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A seal the reopening writer finishes splits frames as the child's do.
    monkeypatch.setattr(sealed, "SEAL_FRAME_BYTES", FRAME_BYTES)
    path = tmp_path / "l"
    Ledger.create(path, agent_id="crash", segment_bytes=4096, blob_threshold=2048).close()
    rng = random.Random(SEAL_SEED)
    plan = [*STEPS, *STEPS, *["random"] * SEAL_RANDOM_ROUNDS]
    acked = -1
    for round_no, step in enumerate(plan):
        got, held = _kill_round(path, step, rng.randint(1, 80))
        assert (held is not None) == (step != "random"), f"round {round_no}: the child never reached {step}"
        acked = max(acked, got)
        _check_reopened(path, acked, step, held, f"round {round_no} ({step})")
    assert len(plan) >= 20
