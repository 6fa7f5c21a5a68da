"""One writer at a time: LedgerLocked names the holder's pid, in-process and across processes."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from holon.errors import LedgerCorrupt, LedgerLocked
from holon.ledger import Ledger
from holon.records import Record
from tests.ledger_support import AGENT, assert_ledger_holds, child_env, message

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


# --------------------------------------------------------------------------- a lock file that is not a file


@pytest.mark.parametrize("planted", ["symlink", "directory"])
def test_a_lock_file_that_is_not_a_file_is_refused_and_nothing_it_points_to_is_touched(
    tmp_path: Path, planted: str
) -> None:
    # Opening for writing writes the pid over the lock file's contents: through a symlink
    # planted (or copied) into the ledger, it truncated whatever file the link named.
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    lock = path / "holon-ledger.lock"
    lock.unlink(missing_ok=True)
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    if planted == "symlink":
        lock.symlink_to(precious)
    else:
        lock.mkdir()
    with pytest.raises(LedgerCorrupt, match="lock file") as refused:
        Ledger.open(path)
    assert refused.value.file == str(lock)
    assert precious.read_text() == "keep me\n"
    assert list(Ledger.open(path, readonly=True).read()) == []  # readers need no lock


# ---------------------------------------------------------------------- a lock whose pid could not be written


def _numbered(records: list[Record]) -> list[Record]:
    """``records`` as a ledger holding them reads them back: with their seqs."""
    return [msgspec.structs.replace(record, seq=seq) for seq, record in enumerate(records)]


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_lock_whose_pid_could_not_be_written_is_released(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    Ledger.create(path, agent_id=AGENT).close()
    monkeypatch.setattr(os, "pwrite", _enospc)
    with pytest.raises(OSError, match="No space"):
        Ledger.open(path)
    monkeypatch.undo()
    # The failed open kept the descriptor, and with it the flock, for the life of the
    # process: every later open was LedgerLocked "by another process".
    with Ledger.open(path) as ledger:
        ledger.append(message(0))
    assert_ledger_holds(path, _numbered([message(0)]))
