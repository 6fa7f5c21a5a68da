"""Readers work while a writer appends: in another thread and in another process."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import holon.ledger.reader as reader_mod
import holon.ledger.segments as segments_mod
import holon.ledger.verify as verify_mod
from holon.ledger import Ledger
from holon.ledger.blobs import BlobStore
from holon.ledger.segments import list_segments, seal_segment
from tests.ledger_support import AGENT, child_env, message, tool_output

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


@pytest.mark.slow
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


# -------------------------------------------------------------------------- races a reader lost to the writer
# Readers of a live ledger: the test does the writer's step (a seal, a blob removed by a
# refused append) at the exact point between a reader's steps where it hurt.


def _rolled(path: Path, count: int = 40) -> list[Path]:
    """A ledger of small segments; returns its plain segment files (newest last)."""
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024) as ledger:
        for i in range(count):
            ledger.append(message(i))
    return sorted((path / "segments").glob("*.seg"))


class _UntypedEntry:
    """A directory entry without a file type (DT_UNKNOWN: XFS without ftype, NFS, some
    FUSE file systems): ``is_file()`` must stat the name, as os.DirEntry does then."""

    def __init__(self, entry: os.DirEntry[str]) -> None:
        self.name = entry.name
        self.path = entry.path

    def is_file(self) -> bool:
        try:
            return os.stat(self.path).st_mode & 0o170000 == 0o100000
        except FileNotFoundError:
            return False  # what os.DirEntry.is_file answers for a name gone since the listing

    def is_symlink(self) -> bool:
        try:
            return os.lstat(self.path).st_mode & 0o170000 == 0o120000
        except FileNotFoundError:
            return False  # likewise


def test_a_listing_without_file_types_survives_a_seal_between_readdir_and_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a file system whose directory entries carry no type, each is_file() is a stat; the
    # sealer unlinking the plain segment between the readdir and that stat made every reader
    # (read, get, head, verify) fail with "a segment's name holds something that is not a
    # regular file": a spurious LedgerCorrupt on a healthy, live ledger.
    path = tmp_path / "L"
    Ledger.create(path, agent_id=AGENT, segment_bytes=1024).close()
    with Ledger.open(path) as writer:
        for i in range(40):
            writer.append(message(i))
        writer._writer._join_sealer()
        # Leave the newest predecessor plain, as it is while the sealing thread runs.
        sealed = sorted((path / "segments").glob("*.seg.zst"))[-1]
        plain = sealed.with_suffix("")
        data = segments_mod.decompress_sealed(
            sealed.read_bytes(), file=str(sealed), start_seq=int(sealed.name[:20])
        )
        sealed.unlink()
        plain.write_bytes(data)
        real_scandir = os.scandir

        def scandir_then_seal(where: Path) -> Iterator[_UntypedEntry]:
            with real_scandir(where) as listing:
                entries = [_UntypedEntry(e) for e in listing]
            if plain.exists():
                seal_segment(plain, data)  # the sealing thread, between readdir and stat
            return iter(entries)

        monkeypatch.setattr(segments_mod.os, "scandir", scandir_then_seal)
        segs = list_segments(path / "segments")
        monkeypatch.undo()
        assert [s.start_seq for s in segs] == [s.start_seq for s in list_segments(path / "segments")]
        reader = Ledger.open(path, readonly=True)
        reader._reader._segs = segs
        assert [r.seq for r in reader.read()] == list(range(40))
        reader.close()


def test_verify_of_a_live_ledger_ignores_a_blob_a_refused_append_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A refused append removes the blob it had just stored for its output. A verify() that
    # listed the blob store before that removal reported the blob as a problem ("not in the
    # blob store"): `holon verify` of a healthy live ledger failed. A blob no record names
    # is no problem; one a record names is still reported missing by the reference check.
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT, blob_threshold=16) as writer:
        writer.append(tool_output(0, 200))
        doomed = writer.put_blob(b"stored for an append that is then refused" * 10)
    real_hashes = BlobStore.hashes

    def hashes_then_discard(self: BlobStore, skipped: list[Path] | None = None) -> Iterator[tuple[str, Path]]:
        listed = list(real_hashes(self, skipped))
        self.discard(doomed.hash)  # the writer's refused append, right after the listing
        return iter(listed)

    monkeypatch.setattr(BlobStore, "hashes", hashes_then_discard)
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert report.ok, str(report)
    assert report.blobs_checked == 1


def test_readers_find_a_segment_their_listing_missed_mid_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A readdir of a directory too large for one getdents call can miss a segment sealed
    # during it (its .zst renamed in behind the listing, its plain file unlinked ahead of
    # it). read(), get(), export and verify() then raised or reported "records N..M are
    # missing: the segment holding them was deleted" on a healthy live ledger (a child
    # appending with 1 KiB segments hit it within seconds once segments/ held ~700 files).
    path = tmp_path / "L"
    _rolled(path, 60)
    everything = list_segments(path / "segments")
    missed = everything[2]

    def listing_that_misses(where: Path) -> list[segments_mod.SegmentFile]:
        return [s for s in list_segments(where) if s.start_seq != missed.start_seq]

    monkeypatch.setattr(reader_mod, "list_segments", listing_that_misses)
    monkeypatch.setattr(verify_mod, "list_segments", listing_that_misses)
    with Ledger.open(path, readonly=True) as reader:
        assert [r.seq for r in reader.read()] == list(range(60))
        assert [r.seq for r in reader.read(missed.start_seq + 1)] == list(range(missed.start_seq + 1, 60))
        assert reader.get(missed.start_seq + 1).seq == missed.start_seq + 1
        assert reader.head()[0] == 59
        report = reader.verify(progress=lambda done, total: None)
        assert report.ok, str(report)
        assert report.records_checked == 60
