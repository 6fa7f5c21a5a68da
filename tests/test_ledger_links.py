"""A symbolic link where a ledger keeps a file or a directory is refused by name, never gone through.

holon makes no link in a ledger. One planted there or copied in (``cp -s``, an archive
restored with its links) pointed holon's writes elsewhere: appends went to the file an
active segment linked to and a torn-tail cut truncated it, a rollover truncated the file
a ``.tmp`` name linked to, a blob or a sealed segment was written into the directory a
link named. Each test plants a link to something outside the ledger, runs what would go
through it, and checks that it is refused naming the link (LedgerCorrupt, which says to
put a copy in its place) and that what it points to is byte for byte as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import blake3
import msgspec
import pytest

from holon.errors import LedgerCorrupt
from holon.ledger import Ledger, cut_tail, inspect_tail
from holon.ledger.files import write_atomic
from holon.ledger.header import HEADER_NAME
from holon.ledger.segments import list_segments
from holon.records import Record
from tests.cli_support import invoke, tree_bytes
from tests.ledger_support import AGENT, active_segment, assert_ledger_holds, frame_offsets, message


def _records(n: int) -> list[Record]:
    return [msgspec.structs.replace(message(i, 80), seq=i) for i in range(n)]


def _ledger(path: Path, n: int = 30, *, segment_bytes: int = 1024) -> list[Record]:
    with Ledger.create(path, agent_id=AGENT, segment_bytes=segment_bytes, fsync="batch") as ledger:
        ledger.append_many(message(i, 80) for i in range(n))
    return _records(n)


def _link_to_copy(name: Path, outside: Path) -> Path:
    """Move what is at ``name`` to ``outside`` and leave a link to it in its place: the same
    bytes (a reader would find nothing wrong), kept where the ledger does not hold them."""
    shutil.move(name, outside)
    name.symlink_to(outside, target_is_directory=outside.is_dir())
    return outside


def _snapshot(target: Path) -> dict[str, bytes] | bytes:
    return tree_bytes(target) if target.is_dir() else target.read_bytes()


def _refused(refused: pytest.ExceptionInfo[LedgerCorrupt], link: Path) -> None:
    assert refused.value.file == str(link)
    assert "is a symbolic link" in refused.value.detail and "nothing was changed" in refused.value.detail


def test_an_active_segment_that_is_a_link_is_neither_appended_to_nor_cut(tmp_path: Path) -> None:
    # The writer appended to the file the link named, and recovery cut its torn tail there.
    path = tmp_path / "l"
    _ledger(path)
    active = active_segment(path)
    outside = _link_to_copy(active, tmp_path / "elsewhere.seg")
    with outside.open("ab") as f:
        f.write(b"\x07" * 10)  # a torn tail: opening for writing cuts one
    before = outside.read_bytes()
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger.open(path)
    _refused(refused, active)
    assert "the link's place (rm " in refused.value.detail  # how to put a copy there
    with pytest.raises(LedgerCorrupt) as refused, Ledger.open(path, readonly=True) as reader:
        list(reader.read())
    _refused(refused, active)
    with pytest.raises(LedgerCorrupt) as refused:
        inspect_tail(path)
    _refused(refused, active)
    assert outside.read_bytes() == before
    failed = invoke("verify", path)
    assert failed.exit_code == 3 and f"{active}: a segment file is a symbolic link" in failed.output
    # The way out the message gives: the file itself back in the link's place.
    active.unlink()
    shutil.copyfile(outside, active)
    with Ledger.open(path) as writer:
        assert [a.action for a in writer.recovery] == ["truncated_torn_tail"]
    assert_ledger_holds(path, _records(30))
    assert outside.read_bytes() == before


def test_a_sealed_segment_that_is_a_link_is_refused_by_readers_too(tmp_path: Path) -> None:
    path = tmp_path / "l"
    _ledger(path)
    sealed = list_segments(path / "segments")[1].sealed
    assert sealed is not None
    outside = _link_to_copy(sealed, tmp_path / "elsewhere.seg.zst")
    before = outside.read_bytes()
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt) as refused:
            list(reader.read())
        _refused(refused, sealed)
        with pytest.raises(LedgerCorrupt) as refused:
            reader.get(0)
        _refused(refused, sealed)
        report = reader.verify()
    assert not report.ok and report.problems[0].file == str(sealed)
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger.open(path)
    _refused(refused, sealed)
    assert outside.read_bytes() == before


@pytest.mark.parametrize("debris", ["segment", "sealed segment"])
def test_a_temporary_file_that_is_a_link_is_refused_before_recovery_changes_anything(
    tmp_path: Path, debris: str
) -> None:
    # Recovery removes the .tmp debris of an interrupted write. A link there is reported,
    # not cleaned up, and nothing else is repaired either.
    path = tmp_path / "l"
    _ledger(path)
    plain = active_segment(path)
    tmp_name = plain.name + (".tmp" if debris == "segment" else ".zst.tmp")
    link = path / "segments" / tmp_name
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"keep me\n")
    link.symlink_to(precious)
    (path / "segments" / "x.tmp").write_bytes(b"debris")  # what recovery would have removed
    before = tree_bytes(path)
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger.open(path)
    _refused(refused, link)
    assert "remove the link" in refused.value.detail
    assert tree_bytes(path) == before and precious.read_bytes() == b"keep me\n"


@pytest.mark.parametrize("which", ["new segment", "sealed segment"])
def test_a_rollover_never_writes_through_a_link_planted_under_a_name_it_is_about_to_write(
    tmp_path: Path, which: str
) -> None:
    # A rollover writes <next>.seg.tmp (the new segment) and the sealing thread
    # <old>.seg.zst.tmp (the sealed copy), each opened with O_TRUNC: through a link, either
    # truncated and overwrote the file it named.
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT, segment_bytes=1024).close()
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"keep me\n" * 100)
    with Ledger.open(path, fsync="always") as writer:
        old = writer._tip.active_path
        if which == "new segment":
            # The next segment starts at the seq of the append that fills this one: one of these.
            links = [path / "segments" / f"{n:020d}.seg.tmp" for n in range(1, 30)]
            for link in links:
                link.symlink_to(precious)
            with pytest.raises(LedgerCorrupt) as refused:
                for n in range(30):
                    writer.append(message(n, 80))
            assert refused.value.file in {str(link) for link in links}
            assert "temporary file of a new segment is a symbolic link" in refused.value.detail
            seq = writer._tip.next_seq
        else:
            link = old.with_name(old.name + ".zst.tmp")
            link.symlink_to(precious)
            seq = 0
            while writer._tip.active_path == old:
                writer.append(message(seq, 80))
                seq += 1
            writer._writer._join_sealer()  # the seal failed (logged): the old segment stays plain
            assert old.is_file() and not old.with_name(old.name + ".zst").exists()
    assert precious.read_bytes() == b"keep me\n" * 100
    if which == "sealed segment":
        with pytest.raises(LedgerCorrupt) as later:  # the next writer names it
            Ledger.open(path)
        _refused(later, link)
        link.unlink()
        assert_ledger_holds(path, _records(seq))


def test_a_header_that_is_a_link_is_refused_by_name(tmp_path: Path) -> None:
    # Opening read it wherever the link pointed (agent id, settings), and a format upgrade
    # replaced the link unnoticed.
    path = tmp_path / "l"
    _ledger(path, 5)
    header = path / HEADER_NAME
    doc = json.loads(header.read_text())
    doc["format_version"] = 1  # an older ledger: a writer upgrades its header before a seal
    header.write_text(json.dumps(doc))
    outside = _link_to_copy(header, tmp_path / "elsewhere.json")
    before = outside.read_bytes()
    for readonly in (False, True):
        with pytest.raises(LedgerCorrupt) as refused:
            Ledger.open(path, readonly=readonly)
        _refused(refused, header)
    shown = invoke("stats", path)
    assert shown.exit_code == 3 and f"the ledger header is a symbolic link (to {outside})" in shown.output
    assert outside.read_bytes() == before and header.is_symlink()


@pytest.mark.parametrize("directory", ["segments", "blobs", "fan-out"])
def test_a_ledger_directory_that_is_a_link_is_never_written_into(tmp_path: Path, directory: str) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, segment_bytes=1024, fsync="batch") as ledger:
        ledger.append_many(message(i, 80) for i in range(30))
        ledger.put_blob(b"stored before" * 400)
    data = b"a blob for the fan-out directory linked away" * 200
    fan = path / "blobs" / blake3.blake3(data).hexdigest()[:2]
    name = {"segments": path / "segments", "blobs": path / "blobs", "fan-out": fan}[directory]
    outside = tmp_path / "elsewhere"

    def plant() -> None:
        if directory == "fan-out":
            outside.mkdir()
            name.symlink_to(outside, target_is_directory=True)
        else:
            _link_to_copy(name, outside)

    if directory == "segments":
        plant()
        before = _snapshot(outside)
        with pytest.raises(LedgerCorrupt) as refused, Ledger.open(path, readonly=True) as reader:
            list(reader.read())
        _refused(refused, name)
    else:
        with Ledger.open(path) as writer:
            plant()  # while the writer runs
            before = _snapshot(outside)
            with pytest.raises(LedgerCorrupt) as refused:
                writer.put_blob(data)
            _refused(refused, name)
        (outside / "x.tmp").write_bytes(b"not holon's to remove")
        before = _snapshot(outside)
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger.open(path)  # appends into segments/, removes .tmp debris from blobs/
    _refused(refused, name)
    assert _snapshot(outside) == before
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert not report.ok
    assert any(p.file == str(name) and "symbolic link" in p.message for p in report.problems)


def test_a_temporary_blob_file_that_is_a_link_is_never_written_through(tmp_path: Path) -> None:
    # The put wrote the blob into the file the link named, then renamed the link itself
    # over the blob's name: the blob was then a link to a file outside the ledger.
    path = tmp_path / "l"
    Ledger.create(path, agent_id=AGENT).close()
    data = b"a blob whose temporary name is taken by a link" * 200
    digest = blake3.blake3(data).hexdigest()
    (path / "blobs" / digest[:2]).mkdir()
    link = path / "blobs" / digest[:2] / (digest + ".tmp")
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"keep me\n")
    link.symlink_to(precious)
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt) as refused:
            reader.blobs.put(data)
        _refused(refused, link)
    with pytest.raises(LedgerCorrupt) as refused:
        Ledger.open(path)  # the debris recovery removes
    _refused(refused, link)
    assert precious.read_bytes() == b"keep me\n"
    assert not (path / "blobs" / digest[:2] / digest).exists()


def test_a_cut_directory_that_is_a_link_is_refused_before_anything_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="batch") as ledger:
        ledger.append_many(message(i, 80) for i in range(12))
    seg = active_segment(path)
    at = frame_offsets(seg.read_bytes())[6]
    with seg.open("r+b") as f:  # a damaged frame with intact ones after it: a cut's case
        f.seek(at + 60)
        f.write(b"\xff")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (path / "cut").symlink_to(outside, target_is_directory=True)
    (path / "segments" / "x.tmp").write_bytes(b"debris")
    before = tree_bytes(path)
    with pytest.raises(LedgerCorrupt) as refused:
        cut_tail(path, at)
    _refused(refused, path / "cut")
    assert tree_bytes(path) == before and os.listdir(outside) == []


def test_an_atomic_write_of_a_ledger_file_refuses_a_link_under_either_name(tmp_path: Path) -> None:
    # The one primitive every ledger file is written through (header, segments, blobs, cuts).
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"keep me\n")
    target = tmp_path / "file"
    for link in (target, tmp_path / "file.tmp"):
        link.symlink_to(precious)
        with pytest.raises(LedgerCorrupt) as refused:
            write_atomic(target, b"new bytes", what="a file")
        _refused(refused, link)
        link.unlink()
    assert precious.read_bytes() == b"keep me\n" and sorted(os.listdir(tmp_path)) == ["precious.txt"]
    (tmp_path / "file.tmp").symlink_to(precious)
    with pytest.raises(OSError):  # an export's file: the caller checks the name, never the temporary one
        write_atomic(target, b"new bytes", outside_ledger=True)
    assert precious.read_bytes() == b"keep me\n"


# --------------------------------------------------------------------------- a blob that is a link or a pipe


@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_a_blob_that_is_a_symlink_or_a_pipe_is_corrupt_not_followed_or_waited_on(
    tmp_path: Path, planted: str
) -> None:
    # holon writes blobs as regular files. A symlink was followed (anywhere: /dev/zero never
    # ends), and a pipe under a blob's name blocked the read forever.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ref = ledger.put_blob(b"y" * 5000)
    blob = path / "blobs" / ref.hash[:2] / ref.hash
    if planted == "symlink":
        copy = tmp_path / "copy"
        copy.write_bytes(blob.read_bytes())  # even the right bytes, elsewhere
        blob.unlink()
        blob.symlink_to(copy)
    else:
        blob.unlink()
        os.mkfifo(blob)
    with pytest.raises(LedgerCorrupt, match="blob file cannot be read") as refused:
        Ledger.open(path, readonly=True).get_blob(ref.hash)
    assert refused.value.file == str(blob)
    assert not Ledger.open(path, readonly=True).verify().ok
    # Storing the same bytes again puts a regular file back in its place.
    with Ledger.open(path) as ledger:
        assert ledger.put_blob(b"y" * 5000) == ref
        assert ledger.get_blob(ref.hash) == b"y" * 5000
    assert not blob.is_symlink() and blob.is_file()
