"""Crash and fault safety of sealed segments with seek tables and of checkpoint chunk files.

Sealing: a child appends with fsync ``always`` and seals 4 KiB segments into 512-byte
zstd frames plus a seek table; it is killed (SIGKILL) at each step of a seal and at random
moments. Reopening loses no acknowledged record, finishes or redoes the seal, verifies,
serves every seq by ``get`` through the seek tables, and appending continues.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from holon.ledger import Ledger
from holon.ledger import sealed
from holon.ledger.sealed import read_seek_table
from holon.ledger.segments import list_segments
from holon.records import Record, ToolResult
from tests.ledger_crash_child import expected_record
from tests.ledger_support import child_env
from tests.seal_crash_child import FRAME_BYTES, STEPS

SEED = 20261123
RANDOM_ROUNDS = 14
_ROOT = Path(__file__).resolve().parent.parent


def _plain(ledger: Ledger, record: Record) -> Record:
    """``record`` with a blob-moved tool output put back inline, as the child appended it."""
    body = record.body
    if isinstance(body, ToolResult) and body.blob is not None:
        body = msgspec.structs.replace(body, output=ledger.get_blob(body.blob.hash).decode(), blob=None)
    return msgspec.structs.replace(record, body=body)


def _kill_round(path: Path, step: str, wanted: int) -> tuple[int, bool]:
    """Run the child until it holds at ``step`` (or, ``random``, acknowledged ``wanted`` records),
    SIGKILL it; returns the last seq it acknowledged and whether it was held."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.seal_crash_child", str(path), step],
        stdout=subprocess.PIPE,
        env=child_env(),
        cwd=_ROOT,
    )
    assert child.stdout is not None
    acked, held, seen = -1, False, 0
    try:
        while True:
            line = child.stdout.readline()
            assert line, f"child exited early with {child.wait()}"
            if line.startswith(b"hold"):
                held = True
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


def _check_reopened(path: Path, acked: int, step: str, where: str) -> None:
    with Ledger.open(path) as ledger:
        if step in _REPAIRS:
            # Besides the seal, only the record being appended may leave debris (a torn
            # tail, a blob's temp file).
            done = {
                action.action
                for action in ledger.recovery
                if Path(action.file).parent.name == "segments" and action.action != "truncated_torn_tail"
            }
            assert done == _REPAIRS[step], f"{where}: {ledger.recovery}"
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


def test_sigkill_at_every_step_of_a_seal_and_at_random_moments_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A seal the reopening writer finishes splits frames as the child's do.
    monkeypatch.setattr(sealed, "SEAL_FRAME_BYTES", FRAME_BYTES)
    path = tmp_path / "l"
    Ledger.create(path, agent_id="crash", segment_bytes=4096, blob_threshold=2048).close()
    rng = random.Random(SEED)
    plan = [*STEPS, *STEPS, *["random"] * RANDOM_ROUNDS]
    acked = -1
    for round_no, step in enumerate(plan):
        got, held = _kill_round(path, step, rng.randint(1, 80))
        assert held == (step != "random"), f"round {round_no}: the child never reached {step}"
        acked = max(acked, got)
        _check_reopened(path, acked, step, f"round {round_no} ({step})")
    assert len(plan) >= 20
