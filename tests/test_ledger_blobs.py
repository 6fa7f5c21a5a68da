"""The blob store: round-trip, automatic moving of large outputs, rejection of bad refs."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon.errors import InvalidRecord, InvalidRef, LedgerCorrupt, RefNotFound
from holon.ledger import Ledger, blobs
from holon.ledger.compression import compress
from holon.records import BlobRef, Record, TaskResult, ToolResult
from tests.ledger_support import AGENT, blob_ref, ledger_with_a_blob, message, scratch_dir, tool_output


@settings(max_examples=30, deadline=None)
@given(st.binary(max_size=20000))
def test_blob_round_trip(data: bytes) -> None:
    with scratch_dir() as root, Ledger.create(root / "l", agent_id=AGENT, fsync="never") as ledger:
        ref = ledger.put_blob(data)
        assert ref == blob_ref(data)
        assert ledger.get_blob(ref.hash) == data
        assert ledger.put_blob(data).hash == ref.hash  # stored once


def test_large_tool_output_moves_to_the_blob_store(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT, blob_threshold=4096) as ledger:
        big = tool_output(0, 10_000)
        small = tool_output(1, 4096)
        ledger.append_many([big, small])
        stored_big, stored_small = ledger.read()
        assert isinstance(big.body, ToolResult) and isinstance(stored_big.body, ToolResult)
        assert stored_big.body.output == ""
        assert stored_big.body.blob is not None
        assert stored_big.body.blob.size == 10_000
        assert stored_big.body.blob.preview == big.body.output[:200]
        assert ledger.get_blob(stored_big.body.blob.hash).decode() == big.body.output
        assert stored_small.body == small.body  # at the threshold: stays inline
        task = Record(body=TaskResult(id="t", status="ok", summary="s", output="é" * 3000), ts=1)
        ledger.append(task)  # 3000 characters but 6000 UTF-8 bytes
        stored_task = ledger.get(2).body
        assert isinstance(stored_task, TaskResult) and stored_task.blob is not None
        assert ledger.get_blob(stored_task.blob.hash).decode() == "é" * 3000
        assert ledger.verify().blobs_checked == 2


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "A" * 64,
        "../" + "a" * 61,
        "a" * 63 + "/",
        "a" * 32 + "/" + "a" * 31,
        "..",
        "a" * 65,
        "g" * 64,
        "a" * 63 + "\n",
        5,
        None,
    ],
)
def test_malformed_blob_hashes_are_invalid_refs(tmp_path: Path, bad: object) -> None:
    with (
        Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger,
        pytest.raises(InvalidRef, match="malformed"),
    ):
        ledger.get_blob(bad)  # type: ignore[arg-type]


def test_unknown_blob_is_ref_not_found(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger, pytest.raises(RefNotFound, match="not in"):
        ledger.get_blob("0" * 64)


def test_corrupted_blob_names_its_file(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        ref = ledger.put_blob(b"hello blob" * 100)
        path = tmp_path / "l" / "blobs" / ref.hash[:2] / ref.hash
        path.write_bytes(b"not zstd at all")
        with pytest.raises(LedgerCorrupt, match="does not decompress") as info:
            ledger.get_blob(ref.hash)
        assert info.value.file == str(path)
        # A damaged frame header that declares an impossible size: an error, not an allocation.
        stored = ledger.put_blob(b"another blob" * 100)
        stored_path = path.parent.parent / stored.hash[:2] / stored.hash
        compressed = stored_path.read_bytes()
        stored_path.write_bytes(compressed[:4] + b"\xc0" + compressed[4:])
        with pytest.raises(LedgerCorrupt, match=r"does not decompress.*declares") as info:
            ledger.get_blob(stored.hash)
        assert (info.value.file, info.value.offset) == (str(stored_path), 0)
        stored_path.write_bytes(compressed)
        # Valid zstd, wrong content: the hash check catches it.
        other = ledger.put_blob(b"other bytes")
        path.write_bytes((path.parent.parent / other.hash[:2] / other.hash).read_bytes())
        with pytest.raises(LedgerCorrupt, match="hashes to") as info:
            ledger.get_blob(ref.hash)
        assert info.value.file == str(path)
        report = ledger.verify()
        assert not report.ok
        assert [p.file for p in report.problems] == [str(path)]


def test_append_refuses_a_reference_to_a_blob_it_does_not_hold(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        body = ToolResult(call_id="c", tool="t", status="ok", blob=BlobRef(hash="0" * 64, size=3))
        with pytest.raises(InvalidRecord, match="put_blob") as info:
            ledger.append(Record(body=body, ts=0))
        assert info.value.field == "body.blob.hash"
        bad = ToolResult(call_id="c", tool="t", status="ok", blob=BlobRef(hash="../x", size=3))
        with pytest.raises(InvalidRecord):
            ledger.append(Record(body=bad, ts=0))
        assert ledger.head()[0] == -1


def test_verify_problems_say_what_and_where_once(tmp_path: Path) -> None:
    # The report is the full report: its problems do not send the reader to `holon verify`.
    with Ledger.create(tmp_path / "l", agent_id=AGENT) as ledger:
        ref = ledger.put_blob(b"hello blob" * 100)
        path = tmp_path / "l" / "blobs" / ref.hash[:2] / ref.hash
        path.write_bytes(b"not zstd at all")
        (problem,) = ledger.verify().problems
    assert problem.file == str(path)
    assert problem.message.startswith("blob does not decompress")
    assert "holon verify" not in problem.message and str(path) not in problem.message
    assert str(problem) == f"{path} at byte 0: {problem.message}"


# --------------------------------------------------------------------------- what is not a blob file


def test_a_directory_under_a_blob_name_is_reported_not_an_oserror(tmp_path: Path) -> None:
    # verify() and get_blob() raised IsADirectoryError.
    path = tmp_path / "l"
    blob_hash = ledger_with_a_blob(path)
    blob_file = path / "blobs" / blob_hash[:2] / blob_hash
    blob_file.unlink()
    blob_file.mkdir()
    with Ledger.open(path, readonly=True) as reader:
        with pytest.raises(LedgerCorrupt, match="blob file cannot be read") as info:
            reader.get_blob(blob_hash)
        assert info.value.file == str(blob_file)
        report = reader.verify()
    assert not report.ok
    assert [(p.file, p.message.split(" (")[0]) for p in report.problems] == [
        (str(blob_file), "blob file cannot be read")
    ]


def test_a_blob_in_the_wrong_fan_out_directory_or_the_store_root_is_a_stray_file(tmp_path: Path) -> None:
    # verify() checked the file at the right place under the misplaced file's name, so a copy
    # in blobs/zz/ counted as a second good blob, and files in blobs/ itself went unseen.
    path = tmp_path / "l"
    blob_hash = ledger_with_a_blob(path)
    (path / "blobs" / "zz").mkdir()
    misplaced = path / "blobs" / "zz" / blob_hash
    shutil.copy(path / "blobs" / blob_hash[:2] / blob_hash, misplaced)
    (path / "blobs" / "notes.txt").write_text("hi")
    with Ledger.open(path, readonly=True) as reader:
        report = reader.verify()
    assert report.blobs_checked == 1
    assert [p.file for p in report.problems] == [str(path / "blobs" / "notes.txt"), str(misplaced)]
    assert all(p.message.startswith("stray file in the blob store") for p in report.problems)
    assert str(path / "blobs" / blob_hash[:2] / blob_hash) in report.problems[1].message


def test_a_ledger_without_a_blobs_directory_stores_its_first_blob(tmp_path: Path) -> None:
    # A ledger kept in git (or unpacked from an archive that skips empty directories) has no
    # blobs/ until its first blob; appending a large tool output raised FileNotFoundError.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        ledger.append(message(0))
    (path / "blobs").rmdir()
    with Ledger.open(path) as ledger:
        ledger.append(tool_output(1, 9000))
        ref = ledger.put_blob(b"more bytes")
        assert ledger.get_blob(ref.hash) == b"more bytes"
        assert ledger.verify().ok
    with Ledger.open(path, readonly=True) as reader:
        body = reader.get(1).body
        assert isinstance(body, ToolResult) and body.blob is not None
        assert reader.get_blob(body.blob.hash).decode() == tool_output(1, 9000).body.output  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "damage", [b"", b"\x28\xb5\x2f\xfd half a frame", "other bytes"], ids=["empty", "partial", "other"]
)
def test_storing_bytes_whose_blob_file_is_damaged_repairs_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: bytes | str
) -> None:
    # A blob name that existed was taken as the blob: after a crash under fsync="never" left
    # an empty file behind a durable rename, the same output appended again was acknowledged
    # with a reference to a blob that could never be read (get_blob: LedgerCorrupt).
    path = tmp_path / "l"
    blob_hash = ledger_with_a_blob(path)
    blob_file = path / "blobs" / blob_hash[:2] / blob_hash
    blob_file.write_bytes(compress(b"other bytes", level=3) if damage == "other bytes" else damage)
    output = tool_output(0, 9000).body.output  # type: ignore[union-attr]
    with caplog.at_level(logging.WARNING, logger="holon.ledger"), Ledger.open(path, fsync="never") as ledger:
        assert not ledger.verify().ok
        seq = ledger.append(tool_output(0, 9000))
        body = ledger.get(seq).body
        assert isinstance(body, ToolResult) and body.blob is not None and body.blob.hash == blob_hash
        assert ledger.get_blob(blob_hash).decode() == output
        assert ledger.verify().ok
    assert f"replacing damaged blob file {blob_file}" in caplog.text


def test_a_blob_ref_stating_the_wrong_size_is_refused_on_append_and_reported_by_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The size is what audit reports as a tool output's bytes: a hand-built BlobRef with
    # the right hash and a wrong size was acknowledged, and verify() said nothing.
    path = tmp_path / "l"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as ledger:
        ref = ledger.put_blob(b"x" * 5000)
        wrong = BlobRef(hash=ref.hash, size=10, preview="")
        before = ledger.head()
        with pytest.raises(InvalidRecord, match="holds 5,000") as refused:
            ledger.append(Record(body=ToolResult(call_id="c", tool="t", status="ok", blob=wrong), ts=1))
        assert refused.value.field == "body.blob.size" and ledger.head() == before
        ledger.append(Record(body=ToolResult(call_id="c", tool="t", status="ok", blob=ref), ts=1))
        # A ledger written before the check (or by other code) can still hold one.
        monkeypatch.setattr(blobs.BlobStore, "size", lambda self, blob_hash: 10)
        ledger.append(Record(body=ToolResult(call_id="d", tool="t", status="ok", blob=wrong), ts=2))
    report = Ledger.open(path, readonly=True).verify()
    assert [p.message for p in report.problems] == ["seq 1 says this blob holds 10 bytes, it holds 5,000"]
