"""One writer at a time: LedgerLocked names the holder's pid, in-process and across processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from holon.errors import LedgerLocked
from holon.ledger import Ledger
from tests.ledger_support import AGENT, child_env, message

_HOLD = """
import sys
from holon.ledger import Ledger
ledger = Ledger.open(sys.argv[1])
print("locked", flush=True)
sys.stdin.read()
"""

_TRY = """
import sys
from holon.errors import LedgerLocked
from holon.ledger import Ledger
try:
    Ledger.open(sys.argv[1])
except LedgerLocked as exc:
    print("LedgerLocked", exc.pid, flush=True)
else:
    print("opened", flush=True)
"""


def test_second_writer_in_the_same_process_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as writer:
        with pytest.raises(LedgerLocked, match=f"process {os.getpid()}") as info:
            Ledger.open(path)
        assert info.value.pid == os.getpid()
        with Ledger.open(path, readonly=True) as reader:  # readers never need the lock
            writer.append(message(0))
            assert reader.head() == writer.head()
    with Ledger.open(path) as again:  # released on close
        assert again.head()[0] == 0


def test_second_writer_in_another_process_gets_the_holders_pid(tmp_path: Path) -> None:
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == b"locked"
        with pytest.raises(LedgerLocked) as info:
            Ledger.open(path)
        assert info.value.pid == holder.pid
        assert str(holder.pid) in str(info.value)
        other = subprocess.run(
            [sys.executable, "-c", _TRY, str(path)],
            capture_output=True,
            env=child_env(),
            timeout=60,
            check=True,
        )
        assert other.stdout.split() == [b"LedgerLocked", str(holder.pid).encode()]
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=60)
    # The kernel drops a flock when its holder dies: no stale lock after kill -9.
    with Ledger.open(path) as ledger:
        assert ledger.head()[0] == -1
