"""Crash and fault safety of sealed segments with seek tables and of checkpoint chunk files.

Sealing: a child appends with fsync ``always`` and seals 4 KiB segments into 512-byte
zstd frames plus a seek table; it is killed (SIGKILL) at each step of a seal and at random
moments. Reopening loses no acknowledged record, finishes or redoes the seal, verifies,
serves every seq by ``get`` through the seek tables, and appending continues.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
import xxhash
import zstandard
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from holon.errors import LedgerCorrupt
from holon.ledger import Ledger, sealed
from holon.ledger.sealed import read_seek_table
from holon.ledger.segments import SegmentFile, list_segments
from holon.projections import ProjectionConfig, ProjectionState
from holon.records import Message, Record, ToolResult
from holon.runtime import Agent, AgentConfig
from holon.runtime import checkpoints as ck
from holon.runtime.checkpoints import CHECKPOINT_DIR, CHUNK_DIR, KeyEntry, list_checkpoints
from tests.ledger_crash_child import expected_record
from tests.ledger_support import child_env, message
from tests.runtime_support import Tick
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
        assert (held is not None) == (step != "random"), f"round {round_no}: the child never reached {step}"
        acked = max(acked, got)
        _check_reopened(path, acked, step, held, f"round {round_no} ({step})")
    assert len(plan) >= 20


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


# ---------------------------------------------------------------- checkpoint chunk files


class _Killed(BaseException):
    """Stands for SIGKILL at one step of a checkpoint: nothing after it runs, nothing is cleaned up."""


_CK_CONFIG = AgentConfig(
    checkpoint_every=100, checkpoints_kept=1, fsync="never", projection=ProjectionConfig(turn_cap=1)
)
_CK_TURNS = 140


def _ck_agent(path: Path, turns: range, *, agent_id: str | None = None) -> None:
    with Agent.open(path, agent_id=agent_id, config=_CK_CONFIG, clock=Tick(1_000 * turns.start)) as agent:
        for i in turns:
            with agent.turn(input=f"turn {i} about parser{i % 9}") as turn:
                call = turn.tool("bash", {"command": f"make {i}"}, idempotency_key=f"k{i}")
                call.run(lambda i=i: (f"built {i}", 0))
                turn.record_message(f"done {i}")


@pytest.fixture(scope="module")
def ck_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent's ledger of 140 one-turn episodes checkpointed at turn 100 only (one full archive
    chunk, key chunks of 8 keys), and a chunk file no checkpoint names (a crash's debris)."""
    path = tmp_path_factory.mktemp("ck") / "l"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ck, "KEY_CHUNK", 8)
        _ck_agent(path, range(_CK_TURNS), agent_id="a")
    (path / CHECKPOINT_DIR / CHUNK_DIR / ("ab" * 32 + ".arc")).write_bytes(b"debris")
    return path


def _fold_all(path: Path, into: Path) -> tuple[ProjectionState, bytes, list[tuple[str, KeyEntry]]]:
    shutil.copytree(path, into)
    shutil.rmtree(into / CHECKPOINT_DIR)
    with Agent.open(into, config=_CK_CONFIG) as agent:
        return agent._state, agent.episodes.export(), list(agent._tools.keys.items())


def _kill_at(monkeypatch: pytest.MonkeyPatch, kill_at: int, steps: list[str]) -> None:
    """Raise _Killed at the ``kill_at``-th step of what a checkpoint does to its files (each
    write before it starts, with half its temp file written, and done; each directory sync;
    each removal); ``steps`` lists the steps reached."""

    def step(what: str) -> None:
        steps.append(what)
        if len(steps) - 1 == kill_at:
            raise _Killed(what)

    write, fsync_dir, unlink = ck._write_atomic, ck._fsync_dir, Path.unlink

    def writing(path: Path, data: bytes) -> None:
        step(f"before writing {path.name}")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data[: len(data) // 2])
        step(f"half of {tmp.name} written")
        write(path, data)
        step(f"{path.name} written")

    def syncing(path: Path) -> None:
        step(f"syncing {path.name}/")
        fsync_dir(path)

    def removing(path: Path, missing_ok: bool = False) -> None:
        step(f"removing {path.name}")
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(ck, "_write_atomic", writing)
    monkeypatch.setattr(ck, "_fsync_dir", syncing)
    monkeypatch.setattr(Path, "unlink", removing)


def test_a_kill_at_every_step_of_a_checkpoint_falls_back_and_the_next_names_no_missing_chunk(
    ck_ledger: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ck, "KEY_CHUNK", 8)
    want = _fold_all(ck_ledger, tmp_path / "fold")
    (old_seq, _), *_ = list_checkpoints(ck_ledger)
    kill_at, reached = 0, 0
    while True:
        path = tmp_path / f"k{kill_at}"
        shutil.copytree(ck_ledger, path)
        steps: list[str] = []
        agent = Agent.open(path, config=_CK_CONFIG)
        with monkeypatch.context() as patch:
            _kill_at(patch, kill_at, steps)
            try:
                agent.checkpoint()
            except _Killed:
                pass
            else:
                break  # every step was killed at once
            finally:
                agent._ledger.close()  # the process is gone: its lock with it
        where = f"killed {steps[-1]!r}"
        with Agent.open(path, config=_CK_CONFIG) as reopened:
            # A .ckpt is in place only with everything it names: none is rejected.
            assert reopened.report.rejected == (), where
            assert reopened.report.checkpoint_seq in (old_seq, reopened.seq), where
            got = reopened._state, reopened.episodes.export(), list(reopened._tools.keys.items())
            assert got == want, where
            reopened.checkpoint()
        with Agent.open(path, config=_CK_CONFIG) as again:
            assert again.report.rejected == () and again.report.checkpoint_seq == again.seq, where
            assert again._state == want[0], where
        (_, kept), *older = list_checkpoints(path)
        assert not older, where
        chunk_dir = path / CHECKPOINT_DIR / CHUNK_DIR
        assert {p.name for p in chunk_dir.iterdir()} == set(ck._named_chunks(kept)), where
        assert not [p for p in (path / CHECKPOINT_DIR).iterdir() if p.name.endswith(".tmp")], where
        reached = len(steps)
        kill_at += 1
    # The checkpoint wrote an archive chunk, its index segment and a key chunk, then its
    # three files, and removed the older checkpoint and the debris chunk.
    done = " | ".join(steps)
    for what in (".arc written", ".epx written", ".keys written", ".ckpt written", "removing " + "ab" * 32):
        assert what in done, done
    assert kill_at == reached >= 20


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
