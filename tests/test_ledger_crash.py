"""Durability under kill -9: no acknowledged append is ever lost, and appending continues."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import msgspec

from holon.ledger import Ledger
from holon.records import ToolResult
from tests.ledger_crash_child import expected_record
from tests.ledger_support import child_env

ROUNDS = 24
SEED = 20240601


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
