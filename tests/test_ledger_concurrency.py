"""Readers work while a writer appends: in another thread and in another process."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from holon.ledger import Ledger
from tests.ledger_support import AGENT, child_env, message

COUNT = 3000


def _write(ledger: Ledger, count: int) -> None:
    """Append ``count`` records in flushed batches of varying size (rolling segments over)."""
    seq = 0
    step = 1
    while seq < count:
        n = min(step, count - seq)
        with ledger.batch():
            ledger.append_many(message(i, 150) for i in range(seq, seq + n))
        seq += n
        step = step % 37 + 1


def test_reader_thread_sees_a_verified_prefix_while_the_writer_appends(tmp_path: Path) -> None:
    path = tmp_path / "l"
    errors: list[BaseException] = []
    observed: list[int] = []
    with Ledger.create(path, agent_id=AGENT, fsync="batch", segment_bytes=16384) as writer:
        done = threading.Event()

        def read_loop() -> None:
            try:
                with Ledger.open(path, readonly=True) as reader:
                    seen = 0
                    while seen < COUNT:
                        finished = done.is_set()
                        for record in reader.read(seen):
                            assert record.seq == seen
                            assert record.body == message(seen, 150).body
                            seen += 1
                        observed.append(seen)
                        if finished:
                            break
                    assert seen == COUNT
                    assert reader.head() == writer.head()
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=read_loop)
        thread.start()
        _write(writer, COUNT)
        done.set()
        thread.join(timeout=120)
        assert not thread.is_alive()
    assert not errors, errors
    assert observed == sorted(observed)


def test_reader_process_sees_a_verified_prefix_while_the_writer_appends(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="batch", segment_bytes=16384) as writer:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.ledger_reader_child", str(path), str(COUNT * 4)],
            stdout=subprocess.PIPE,
            env=child_env(),
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"  # the reader is polling before we write
        _write(writer, COUNT * 4)
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0, out
        seq, digest, _passes = out.decode().split()
        assert (int(seq), digest) == writer.head()
