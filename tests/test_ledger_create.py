"""Creating a ledger: a create a crash or a full disk stopped is finished by creating again.

Each test pins a failure a user hit: a `holon init` killed part way that neither `init`
nor `open` would touch again, a directory holding records taken for an interrupted create,
two processes creating the same ledger, and an agent whose first start failed before its
header was written.
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import msgspec
import pytest

import holon.ledger.store as store_mod
from holon.errors import LedgerLocked, NotALedger, UsageError
from holon.ledger import Ledger
from holon.ledger.header import genesis_hash, interrupted_create
from holon.ledger.segments import SEGMENT_HEADER, segment_name
from holon.records import Record
from holon.runtime import Agent
from tests.ledger_support import AGENT, assert_ledger_holds, child_env, message

_ROOT = Path(__file__).resolve().parent.parent


def _numbered(records: list[Record]) -> list[Record]:
    """``records`` as a ledger holding them reads them back: with their seqs."""
    return [msgspec.structs.replace(record, seq=seq) for seq, record in enumerate(records)]


def _enospc(*_args: object, **_kwargs: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _tree(path: Path) -> dict[str, bytes | None]:
    """Every entry under ``path`` with its bytes (None for a directory): what a refusal must keep."""
    return {
        str(entry.relative_to(path)): None if entry.is_dir() else entry.read_bytes()
        for entry in sorted(path.rglob("*"))
    }


# A child that creates a ledger and is killed (SIGKILL, by itself) at one step of it: the
# first or second file sync (segment 0's, the header's temporary file) or as segment 0 or
# the header is about to be written.
_KILLED_CREATE = textwrap.dedent(
    """
    import os, signal, sys
    import holon.ledger.files as files
    import holon.ledger.store as store
    from holon.ledger import Ledger

    step = sys.argv[2]

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    if step.startswith("sync"):
        syncs, real = [0], files.sync_file

        def sync(fd):
            syncs[0] += 1
            if syncs[0] == int(step[4:]):
                die()
            real(fd)

        files.sync_file = sync
    else:
        setattr(store, step, die)
    Ledger.create(sys.argv[1], agent_id="a1")
    """
)


@pytest.mark.parametrize("step", ["create_segment", "sync1", "sync2", "write_header"])
def test_a_create_killed_before_its_header_is_finished_by_creating_again(tmp_path: Path, step: str) -> None:
    path = tmp_path / "ledger"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_CREATE, str(path), step], env=child_env(), cwd=_ROOT, check=False
    )
    assert child.returncode == -signal.SIGKILL
    assert path.is_dir()
    assert interrupted_create(path)
    # Opening says what happened and what to do (it said "not a holon ledger" only) ...
    with pytest.raises(NotALedger, match=r"interrupted ledger creation left .* create the ledger again"):
        Ledger.open(path)
    # ... and doing it works: create refused the directory as "not empty", for ever.
    with Ledger.create(path, agent_id="a2") as ledger:
        assert ledger.head() == (-1, genesis_hash("a2").hex())
        ledger.append(message(0))
    with Ledger.open(path, readonly=True) as reader:
        assert reader.verify().ok
        assert reader.head()[0] == 0


def test_a_create_that_failed_on_a_full_disk_is_finished_by_creating_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    monkeypatch.setattr(store_mod, "write_header", _enospc)
    with pytest.raises(OSError, match="No space"):
        Ledger.create(path, agent_id=AGENT)
    monkeypatch.undo()
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    assert_ledger_holds(path, _numbered([message(0)]))


def test_a_directory_holding_records_or_other_files_is_not_taken_for_an_interrupted_create(
    tmp_path: Path,
) -> None:
    # A ledger whose header was deleted: its segment 0 holds records, which a create would
    # overwrite. Refused, and nothing in it changes.
    headless = tmp_path / "headless"
    with Ledger.create(headless, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    (headless / "holon-ledger.json").unlink()
    assert (headless / "segments" / segment_name(0)).stat().st_size > SEGMENT_HEADER.size
    # Someone's directory that happens to hold an empty segments/ and another file.
    foreign = tmp_path / "foreign"
    (foreign / "segments").mkdir(parents=True)
    (foreign / "notes.txt").write_text("mine")
    # A blob in blobs/: no create writes one.
    with_blob = tmp_path / "with-blob"
    (with_blob / "segments").mkdir(parents=True)
    (with_blob / "blobs" / "ab").mkdir(parents=True)
    for directory in (headless, foreign, with_blob):
        before = _tree(directory)
        assert not interrupted_create(directory)
        with pytest.raises(UsageError, match="not an empty directory"):
            Ledger.create(directory, agent_id=AGENT)
        assert _tree(directory) == before
        with pytest.raises(NotALedger) as refused:
            Ledger.open(directory)
        assert "interrupted" not in str(refused.value)


def _rival_create(monkeypatch: pytest.MonkeyPatch, path: Path, *, keep_open: bool) -> list[Ledger]:
    """Make a rival create the ledger at ``path`` right after this create checked it is empty.

    The rival runs in this process: flock locks belong to the open file, so a second one
    here is refused as one in another process is. ``keep_open``: the rival is still the
    writer (a daemon that created it), else it created the ledger and closed it.
    """
    rivals: list[Ledger] = []
    real = store_mod.enclosing_ledger
    started: list[bool] = []

    def then_a_rival(target: Path, **kwargs: int | None) -> Path | None:
        if not started:
            started.append(True)  # the rival's own create comes through here too
            rivals.append(Ledger.create(path, agent_id="rival"))
            rivals[0].append(message(0))
            if not keep_open:
                rivals[0].close()
        return real(target, **kwargs)

    monkeypatch.setattr(store_mod, "enclosing_ledger", then_a_rival)
    return rivals


def test_the_second_of_two_processes_creating_a_ledger_gets_ledgerlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    rivals = _rival_create(monkeypatch, path, keep_open=True)
    # It got FileExistsError from mkdir segments/ (an OSError, not a holon error).
    with pytest.raises(LedgerLocked):
        Ledger.create(path, agent_id=AGENT)
    rivals[0].append(message(1))
    rivals[0].close()
    assert_ledger_holds(path, _numbered([message(0), message(1)]), agent_id="rival")


def test_a_ledger_created_meanwhile_by_another_process_is_refused_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger"
    _rival_create(monkeypatch, path, keep_open=False)
    with pytest.raises(UsageError, match="another process created one there meanwhile"):
        Ledger.create(path, agent_id=AGENT)
    assert_ledger_holds(path, _numbered([message(0)]), agent_id="rival")
    with Ledger.open(path) as ledger:  # the refused create left no lock behind
        ledger.append(message(1))


def test_create_refuses_a_bad_fsync_policy_before_making_anything(tmp_path: Path) -> None:
    path = tmp_path / "ledger"
    with pytest.raises(UsageError, match="fsync policy"):
        Ledger.create(path, agent_id=AGENT, fsync="sometimes")  # type: ignore[arg-type]
    # It created the whole ledger, then refused to open it.
    assert not path.exists()


def test_an_agent_whose_first_start_failed_before_the_header_starts_on_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # holon.Agent.open decides "new ledger" itself: what a failed create left is created
    # again there too (it was NotALedger for ever), and with create=False it is not one.
    path = tmp_path / "agent"
    monkeypatch.setattr(store_mod, "write_header", _enospc)
    with pytest.raises(OSError, match="No space"):
        Agent.open(path, agent_id=AGENT)
    monkeypatch.undo()
    assert interrupted_create(path)
    with pytest.raises(NotALedger):
        Agent.open(path, agent_id=AGENT, create=False)
    with Agent.open(path, agent_id=AGENT) as agent:
        assert agent.report.created
        with agent.turn(input="hello") as turn:
            turn.record_message("hi")
    with Ledger.open(path, readonly=True) as reader:
        assert reader.verify().ok
