"""Canonical JSONL: lossless export/import, blobs beside the file, all-or-nothing import."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from holon.errors import InvalidRecord, UsageError
from holon.ledger import (
    Ledger,
    blobs_dir_for,
    export_jsonl,
    frames,
    import_jsonl,
    index,
    jsonl,
    reader,
    writer,
)
from holon.records import Record, decode_json_record
from holon.testing import with_real_blobs
from tests.cli_support import invoke
from tests.ledger_support import (
    AGENT,
    assert_ledger_holds,
    message,
    scratch_dir,
    tool_output,
)
from tests.strategies import ledger_records


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ledger_records(max_size=20))
def test_export_then_import_reproduces_every_record_and_the_head(recs: list[Record]) -> None:
    with (
        scratch_dir() as root,
        Ledger.create(root / "a", agent_id=AGENT, fsync="never", segment_bytes=2048) as source,
    ):
        source.append_many(with_real_blobs(source, r) for r in recs)
        source.append(tool_output(99, 9000))
        assert export_jsonl(source, root / "x.jsonl") == len(recs) + 1
        with Ledger.create(root / "b", agent_id=AGENT, fsync="never") as target:
            assert list(import_jsonl(root / "x.jsonl", target)) == list(range(len(recs) + 1))
            assert list(target.read()) == list(source.read())
            assert target.head() == source.head()
            assert target.verify().ok
            # And back again: the text form is byte-identical.
            export_jsonl(target, root / "y.jsonl")
            assert (root / "x.jsonl").read_bytes() == (root / "y.jsonl").read_bytes()


def test_blobs_are_written_beside_the_jsonl(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as ledger:
        ledger.append(tool_output(0, 9000))
        export_jsonl(ledger, tmp_path / "x.jsonl")
        (stored,) = ledger.read()
    line = decode_json_record((tmp_path / "x.jsonl").read_bytes().strip())
    assert line == stored
    blob = stored.body.blob  # type: ignore[union-attr]
    assert blob is not None
    blob_file = blobs_dir_for(tmp_path / "x.jsonl") / blob.hash
    assert blob_file.read_bytes().decode() == tool_output(0, 9000).body.output  # type: ignore[union-attr]


def _exported(tmp_path: Path, n: int = 5) -> Path:
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as ledger:
        ledger.append_many(message(i) for i in range(n))
        ledger.append(tool_output(n, 9000))
        export_jsonl(ledger, tmp_path / "x.jsonl")
    return tmp_path / "x.jsonl"


@pytest.mark.parametrize(
    ("edit", "line", "pattern"),
    [
        (lambda lines: lines.__setitem__(2, b'{"seq": 2, "oops"'), 3, "malformed|truncated|invalid"),
        (lambda lines: lines.__setitem__(3, lines[3].replace(b'"assistant"', b'"robot"')), 4, "role"),
        (lambda lines: lines.__setitem__(1, b""), 2, "empty line"),
        (lambda lines: lines.pop(2), 3, "seq 3 follows seq 1"),
        (
            lambda lines: lines.__setitem__(4, lines[4].replace(b'"kind":"message"', b'"kind":"nope"')),
            5,
            "kind",
        ),
    ],
)
def test_an_invalid_line_appends_nothing_and_is_named(
    tmp_path: Path, edit: object, line: int, pattern: str
) -> None:
    path = _exported(tmp_path)
    lines = path.read_bytes().split(b"\n")
    edit(lines)  # type: ignore[operator]
    path.write_bytes(b"\n".join(lines))
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        with pytest.raises(InvalidRecord, match=pattern) as info:
            import_jsonl(path, target)
        assert f"line {line} of {path}" in str(info.value)
        assert target.head()[0] == -1


def test_missing_or_wrong_blob_file_is_named_and_appends_nothing(tmp_path: Path) -> None:
    path = _exported(tmp_path)
    (blob_file,) = blobs_dir_for(path).iterdir()
    blob_file.write_bytes(b"tampered")
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        with pytest.raises(InvalidRecord, match=r"line 6 of .*hashing to") as info:
            import_jsonl(path, target)
        assert info.value.field == "body.blob"
        blob_file.unlink()
        with pytest.raises(InvalidRecord, match=r"line 6 of .*does not exist"):
            import_jsonl(path, target)
        assert target.head()[0] == -1


def test_import_into_a_non_empty_ledger_appends_after_its_head(tmp_path: Path) -> None:
    path = _exported(tmp_path, n=3)
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        target.append_many(message(i) for i in range(10))
        assert list(import_jsonl(path, target)) == [10, 11, 12, 13]
        imported = list(target.read(10))
        assert [r.seq for r in imported] == [10, 11, 12, 13]
        assert [msgspec.structs.replace(r, seq=-1) for r in imported[:3]] == [message(i) for i in range(3)]
        assert target.verify().ok


def test_import_reports_progress_in_bytes_over_both_reads(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as source:
        source.append_many(message(i) for i in range(5))
        export_jsonl(source, tmp_path / "x.jsonl")
    lines = (tmp_path / "x.jsonl").read_bytes().splitlines(keepends=True)
    total = 2 * sum(map(len, lines))
    calls: list[tuple[int, int]] = []
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        import_jsonl(tmp_path / "x.jsonl", target, progress=lambda *call: calls.append(call))
    # Each line as it is checked (the first read), then the append (the second) to the end.
    checked = [(sum(map(len, lines[:n])), total) for n in range(1, 6)]
    assert calls == [*checked, (total, total)]


def test_import_of_a_record_over_the_payload_limit_appends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: import framed it, and the target ledger read as corrupt from then on.
    with Ledger.create(tmp_path / "a", agent_id=AGENT, fsync="never", blob_threshold=1024) as source:
        source.append_many([tool_output(0, 3000), message(1, 5000), message(2)])
        export_jsonl(source, tmp_path / "x.jsonl")
    # The limit, lowered for writer and reader alike, stands for 256 MiB.
    for module in (frames, writer, reader, index, jsonl):
        monkeypatch.setattr(module, "MAX_PAYLOAD", 4096)
    path = tmp_path / "b"
    with Ledger.create(path, agent_id=AGENT, fsync="never") as target:
        with pytest.raises(
            InvalidRecord, match=r"line 2 of .*x\.jsonl: record is 5,\d+ bytes encoded; .* at most 4,096"
        ):
            import_jsonl(tmp_path / "x.jsonl", target)
        assert target.head()[0] == -1
    # Nothing was stored, not even the blob of the line before (it was, after the line check).
    assert not any((path / "blobs").iterdir())
    with Ledger.open(path) as ledger:
        assert ledger.append(message(0)) == 0
        assert ledger.verify().ok
        assert list(ledger.read()) == [msgspec.structs.replace(message(0), seq=0)]


def test_a_copy_whose_first_lines_were_cut_is_refused(tmp_path: Path) -> None:
    # Consecutive seqs catch a cut in the middle; a file that lost its head starts at a seq
    # other than 0, and a copy of it would silently be a different ledger.
    with Ledger.create(tmp_path / "src", agent_id=AGENT, fsync="never") as source:
        source.append_many([message(i) for i in range(6)])
        export_jsonl(source, tmp_path / "x.jsonl")
    lines = (tmp_path / "x.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "cut.jsonl").write_bytes(b"".join(lines[3:]))
    with Ledger.create(tmp_path / "copy", agent_id=AGENT, fsync="never") as target:
        with pytest.raises(InvalidRecord, match="lost its first 3 record") as refused:
            import_jsonl(tmp_path / "cut.jsonl", target, require_empty=True)
        assert refused.value.where == f"line 1 of {tmp_path / 'cut.jsonl'}" and refused.value.field == "seq"
        assert target.head()[0] == -1
        # Evidence added to a ledger (not a copy) is re-sequenced from wherever it starts.
        assert list(import_jsonl(tmp_path / "cut.jsonl", target)) == [0, 1, 2]


def _exported_with_blob(tmp_path: Path) -> tuple[Path, Path]:
    """An export holding one blob: (the JSONL file, the blob's file beside it)."""
    src = tmp_path / "src"
    with Ledger.create(src, agent_id=AGENT) as ledger:
        ledger.append(tool_output(0, 20_000))
        out = tmp_path / "x.jsonl"
        export_jsonl(ledger, out)
    (blob,) = blobs_dir_for(out).iterdir()
    return out, blob


@pytest.mark.parametrize("what", ["fifo", "directory", "endless"])
def test_a_blob_file_that_is_not_a_regular_file_is_named_not_read(tmp_path: Path, what: str) -> None:
    # A pipe under a blob's name would block the import for ever; /dev/zero would fill memory.
    out, blob = _exported_with_blob(tmp_path)
    blob.unlink()
    if what == "fifo":
        os.mkfifo(blob)
    elif what == "directory":
        blob.mkdir()
    else:
        blob.symlink_to("/dev/zero")
    with Ledger.create(tmp_path / "dst", agent_id=AGENT) as ledger:
        with pytest.raises(InvalidRecord, match=f"blob file {blob} cannot be read") as refused:
            import_jsonl(out, ledger)
        assert refused.value.where == f"line 1 of {out}"
        assert ledger.head()[0] == -1


def test_a_blob_file_longer_than_stated_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    out, blob = _exported_with_blob(tmp_path)
    size = len(blob.read_bytes())
    with open(blob, "ab") as f:
        f.write(b"x" * 1000)
    with Ledger.create(tmp_path / "dst", agent_id=AGENT) as ledger:
        with pytest.raises(InvalidRecord, match=r"holds more than 20,?000 bytes"):
            import_jsonl(out, ledger)
        assert ledger.head()[0] == -1
    assert blob.stat().st_size == size + 1000


def test_a_symlinked_blob_file_with_the_right_bytes_imports(tmp_path: Path) -> None:
    out, blob = _exported_with_blob(tmp_path)
    elsewhere = tmp_path / "shared-blob"
    blob.rename(elsewhere)
    blob.symlink_to(elsewhere)
    with Ledger.create(tmp_path / "dst", agent_id=AGENT) as ledger:
        assert list(import_jsonl(out, ledger)) == [0]
        (record,) = ledger.read()
        assert record.body.blob is not None
        assert ledger.get_blob(record.body.blob.hash) == elsewhere.read_bytes()


# ------------------------------------------------------------------- integers and directories an import meets


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param(lambda line: line.replace(b'"ts":1002', b'"ts":100000000000000000000000'), id="ts"),
        pytest.param(lambda line: line.replace(b'"turn":0', b'"turn":-100000000000000000000000'), id="turn"),
    ],
)
def test_import_of_an_integer_msgpack_cannot_hold_names_the_line_and_stores_no_blob(
    tmp_path: Path, edit: object
) -> None:
    # JSON holds integers of any size; the ledger's msgpack frames hold 64 bits. The line
    # decoded, the blobs were stored, and append_many then refused "invalid record at seq 2"
    # (no line, no file), leaving the blob behind in a ledger the import did not change.
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as source:
        source.append_many([message(0), tool_output(1, 9000), message(2)])
        export_jsonl(source, tmp_path / "x.jsonl")
    lines = (tmp_path / "x.jsonl").read_bytes().split(b"\n")
    edited = edit(lines[2])  # type: ignore[operator]
    assert edited != lines[2]
    lines[2] = edited
    (tmp_path / "x.jsonl").write_bytes(b"\n".join(lines))
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        with pytest.raises(InvalidRecord, match=r"line 3 of .*x\.jsonl.*cannot be stored"):
            import_jsonl(tmp_path / "x.jsonl", target)
        assert target.head()[0] == -1
    assert list((tmp_path / "b" / "blobs").rglob("*")) == []


def test_import_with_a_directory_in_place_of_a_blob_file_names_the_line(tmp_path: Path) -> None:
    # It raised IsADirectoryError, naming neither the line nor what to do.
    with Ledger.create(tmp_path / "a", agent_id=AGENT) as source:
        source.append_many([message(0), tool_output(1, 9000)])
        export_jsonl(source, tmp_path / "x.jsonl")
    (blob_file,) = (tmp_path / "x.jsonl.blobs").iterdir()
    blob_file.unlink()
    blob_file.mkdir()
    with Ledger.create(tmp_path / "b", agent_id=AGENT) as target:
        with pytest.raises(InvalidRecord, match=r"line 2 of .*cannot be read") as info:
            import_jsonl(tmp_path / "x.jsonl", target)
        assert info.value.field == "body.blob.hash"
        assert target.head()[0] == -1


def _export(tmp_path: Path, records: list[Record], **settings: int) -> tuple[Path, tuple[int, str]]:
    """Export a ledger holding ``records``; returns the JSONL path and the source's head."""
    with Ledger.create(tmp_path / "src", agent_id=AGENT, fsync="never", **settings) as source:
        source.append_many(records)
        export_jsonl(source, tmp_path / "x.jsonl")
        return tmp_path / "x.jsonl", source.head()


def _blob_files(path: Path) -> list[str]:
    return sorted(p.name for p in (path / "blobs").rglob("*") if p.is_file())


# ---------------------------------------------------------------- an export edited on Windows


def test_an_export_a_windows_editor_saved_imports_to_the_same_head(tmp_path: Path) -> None:
    # Notepad and friends save with a byte order mark and CRLF line ends, often without a
    # final newline. `holon append` read a BOM; `holon import --from jsonl` refused the
    # whole export at line 1, byte 0.
    records = [message(i) for i in range(4)] + [tool_output(4, 3000)]
    out, head = _export(tmp_path, records, blob_threshold=1000)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(b"\xef\xbb\xbf" + out.read_bytes().replace(b"\n", b"\r\n").removesuffix(b"\r\n"))
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "edited.jsonl.blobs")
    with Ledger.create(tmp_path / "copy", agent_id=AGENT, blob_threshold=1000) as copy:
        assert import_jsonl(edited, copy, require_empty=True) == range(5)
        assert copy.head() == head
    # A byte order mark anywhere else is not one: the line is named.
    inner = tmp_path / "inner.jsonl"
    lines = out.read_bytes().splitlines(keepends=True)
    inner.write_bytes(lines[0] + b"\xef\xbb\xbf" + b"".join(lines[1:]))
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "inner.jsonl.blobs")
    with Ledger.create(tmp_path / "other", agent_id=AGENT) as other:
        with pytest.raises(InvalidRecord, match=f"line 2 of {inner}"):
            import_jsonl(inner, other)
        assert other.head()[0] == -1


# ---------------------------------------------------------------- a blob the ledger already holds


def test_a_blob_the_ledger_holds_with_a_misstated_size_is_named_at_its_line_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    # A blob missing from .blobs/ but already in the ledger was taken without its size:
    # append_many then refused the record at "seq 3" (telling an importer to use put_blob),
    # after the import had stored the blob of line 5, which no record names.
    records = [message(i) for i in range(3)] + [tool_output(3, 3000), tool_output(4, 5000)]
    out, _head = _export(tmp_path, records, blob_threshold=1000)
    lines = out.read_text().splitlines()
    line = json.loads(lines[3])
    blob_hash = line["body"]["blob"]["hash"]
    line["body"]["blob"]["size"] += 1
    lines[3] = json.dumps(line, separators=(",", ":"))
    edited = tmp_path / "e.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "e.jsonl.blobs")
    held = (tmp_path / "e.jsonl.blobs" / blob_hash).read_bytes()
    (tmp_path / "e.jsonl.blobs" / blob_hash).unlink()
    with Ledger.create(tmp_path / "copy", agent_id=AGENT, blob_threshold=1000) as copy:
        copy.put_blob(held)
        before = _blob_files(tmp_path / "copy")
        with pytest.raises(InvalidRecord, match=r"says blob .* holds 3001 bytes, .* holds 3000") as refused:
            import_jsonl(edited, copy, require_empty=True)
        assert refused.value.where == f"line 4 of {edited}" and refused.value.field == "body.blob.size"
        assert copy.head()[0] == -1
        assert _blob_files(tmp_path / "copy") == before
    # With the size it has, the blob the ledger holds serves the import.
    lines[3] = json.dumps({**line, "body": {**line["body"], "blob": {**line["body"]["blob"], "size": 3000}}})
    edited.write_text("\n".join(lines) + "\n")
    with Ledger.open(tmp_path / "copy") as copy:
        assert import_jsonl(edited, copy, require_empty=True) == range(5)
        assert copy.verify().ok


# ---------------------------------------------------------------- an interrupted import


def _interrupt_at_rollover(monkeypatch: pytest.MonkeyPatch, nth: int) -> None:
    """Raise KeyboardInterrupt (Ctrl-C) when the writer starts its ``nth`` new segment."""
    real = writer.create_segment
    calls = 0

    def create(*args: object, **kwargs: object) -> Path:
        nonlocal calls
        calls += 1
        if calls == nth:
            raise KeyboardInterrupt
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "create_segment", create)


def _interrupted_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[Record]]:
    """A copy of an 80-record export whose import was interrupted at its third rollover."""
    # Outputs of 2500 bytes go to blobs; those of 500 stay inline (under the threshold).
    sizes = {4: 2500, 1: 500}
    records = [tool_output(i, sizes[i % 9]) if i % 9 in sizes else message(i, 200) for i in range(80)]
    out, _head = _export(tmp_path, records, segment_bytes=4096, blob_threshold=1000)
    target = tmp_path / "copy"
    ledger = Ledger.create(target, agent_id=AGENT, segment_bytes=4096, blob_threshold=1000)
    with monkeypatch.context() as patch:
        _interrupt_at_rollover(patch, 3)
        with pytest.raises(KeyboardInterrupt):
            import_jsonl(out, ledger, require_empty=True)
    ledger.close()
    return out, target, records


def test_an_import_interrupted_after_a_rollover_continues_when_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first segments of an interrupted import were synced by its rollovers: the
    # ledger held a part of the export, verified, and a second import was refused because
    # the ledger was not empty. Nothing but deleting the ledger got the rest in.
    out, target, _records = _interrupted_import(tmp_path, monkeypatch)
    with Ledger.open(target) as partial:
        held = partial.head()[0] + 1
        assert 0 < held < 80
        assert partial.verify().ok
    with Ledger.open(target) as ledger:
        assert import_jsonl(out, ledger, require_empty=True) == range(held, 80)
    with Ledger.open(tmp_path / "src", readonly=True) as source:
        expected = list(source.read())
    assert_ledger_holds(target, expected)
    with Ledger.open(target) as ledger:
        _refused_unchanged(out, ledger, match=r"already holds every record of .*x\.jsonl")


def test_only_a_ledger_holding_exactly_the_files_first_records_is_continued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, target, records = _interrupted_import(tmp_path, monkeypatch)
    with Ledger.open(target, readonly=True) as partial:
        held = partial.head()[0] + 1
    # The same records under a smaller blob threshold are stored differently (the 500-byte
    # output of seq 1 goes to a blob): not the file's.
    with Ledger.create(tmp_path / "small", agent_id=AGENT, blob_threshold=100) as small:
        small.append_many(records[:held])
        assert small.get(1).body.blob is not None  # type: ignore[union-attr]
        _refused_unchanged(out, small)
    # A record of the file's first ones edited: refused, the ledger unchanged.
    lines = out.read_bytes().splitlines(keepends=True)
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(lines[0].replace(b"record 0", b"record X") + b"".join(lines[1:]))
    shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "edited.jsonl.blobs")
    with Ledger.open(target) as ledger:
        _refused_unchanged(edited, ledger)
        # A file that does not start at seq 0 continues nothing either.
        cut = tmp_path / "cut.jsonl"
        cut.write_bytes(b"".join(lines[1:]))
        shutil.copytree(tmp_path / "x.jsonl.blobs", tmp_path / "cut.jsonl.blobs")
        _refused_unchanged(cut, ledger)


def _refused_unchanged(file: Path, ledger: Ledger, *, match: str = "is not empty") -> None:
    """A copy of ``file`` into ``ledger`` is refused (``match``), leaving the ledger as it was."""
    head = ledger.head()
    with pytest.raises(UsageError, match=match):
        import_jsonl(file, ledger, require_empty=True)
    assert ledger.head() == head


def test_holon_import_run_again_after_an_interruption_appends_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, target, _records = _interrupted_import(tmp_path, monkeypatch)
    with Ledger.open(target, readonly=True) as partial:
        held = partial.head()[0] + 1
    result = invoke("import", target, out, "--from", "jsonl")
    assert result.exit_code == 0, result.stderr
    assert f"the ledger held the first {held} records of {out}" in result.stdout
    assert f"seq {held}..79" in result.stdout
    assert invoke("verify", target).exit_code == 0
    again = invoke("import", target, out, "--from", "jsonl", "--json")
    assert again.exit_code == 2 and "already holds every record" in again.stderr


# --------------------------------------------------------------------------- export and import


def test_an_empty_ledger_exports_and_imports_back(tmp_path: Path) -> None:
    # An empty ledger exports to an empty file: the library reads it back as no records.
    with Ledger.create(tmp_path / "E", agent_id=AGENT) as source:
        assert export_jsonl(source, tmp_path / "e.jsonl") == 0
    assert (tmp_path / "e.jsonl").read_bytes() == b""
    assert not (tmp_path / "e.jsonl.blobs").exists()
    with Ledger.create(tmp_path / "C", agent_id=AGENT) as copy:
        assert list(import_jsonl(tmp_path / "e.jsonl", copy, require_empty=True)) == []
        assert copy.head() == source.head()


@pytest.mark.parametrize(
    "where",
    [
        "segments/x.jsonl",
        "x.jsonl",
        "blobs/ab/x.jsonl",
        "cut/a/b/c/d/x.jsonl",
    ],
)
def test_an_export_into_another_ledger_is_refused_and_writes_nothing(tmp_path: Path, where: str) -> None:
    # Only the ledger exported was checked: an export into another ledger's directory wrote
    # a file (and a .blobs directory) into that ledger's tree.
    with Ledger.create(tmp_path / "L", agent_id=AGENT, blob_threshold=16) as source:
        source.append(tool_output(0, 200))
    other = tmp_path / "O"
    Ledger.create(other, agent_id="other").close()
    target = other / where
    target.parent.mkdir(parents=True, exist_ok=True)
    before = sorted(p.relative_to(other) for p in other.rglob("*"))
    with Ledger.open(tmp_path / "L", readonly=True) as source, pytest.raises(UsageError) as err:
        export_jsonl(source, target)
    assert f"inside the ledger {other}" in str(err.value)
    assert sorted(p.relative_to(other) for p in other.rglob("*")) == before


def test_an_export_through_a_symlink_into_another_ledger_is_refused(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id=AGENT) as source:
        source.append(message(0))
    other = tmp_path / "O"
    Ledger.create(other, agent_id="other").close()
    (tmp_path / "link").symlink_to(other / "segments")
    with Ledger.open(tmp_path / "L", readonly=True) as source, pytest.raises(UsageError):
        export_jsonl(source, tmp_path / "link" / "x.jsonl")
    assert not (other / "segments" / "x.jsonl").exists()


def test_an_export_beside_a_ledger_is_written(tmp_path: Path) -> None:
    # A directory holding ledgers (runs/) is not a ledger: exports beside them are fine.
    with Ledger.create(tmp_path / "runs" / "L", agent_id=AGENT) as source:
        source.append(message(0))
        assert export_jsonl(source, tmp_path / "runs" / "L.jsonl") == 1


def _synced_paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the path of every file and directory fsynced from now on, in order."""
    synced: list[str] = []
    for name in ("fsync", "fdatasync"):
        real = getattr(os, name, None)
        if real is None:
            continue

        def spy(fd: int, real: object = real) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)  # type: ignore[operator]

        monkeypatch.setattr(os, name, spy)
    return synced


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name a file descriptor")
def test_an_export_syncs_its_blobs_before_its_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The JSONL file was synced, the blob files and the .blobs directory were not: after a
    # power loss the export could look complete and miss blobs.
    with Ledger.create(tmp_path / "L", agent_id=AGENT, blob_threshold=16) as source:
        for i in range(3):
            source.append(tool_output(i, 300))
    out = tmp_path / "out"
    out.mkdir()
    synced = _synced_paths(monkeypatch)
    with Ledger.open(tmp_path / "L", readonly=True) as source:
        export_jsonl(source, out / "x.jsonl")
    blob_dir = out / "x.jsonl.blobs"
    blobs = sorted(str(p) for p in blob_dir.iterdir())
    assert len(blobs) == 3
    jsonl_synced = synced.index(str(out / "x.jsonl.tmp"))
    for blob in blobs:
        # the file was written as <hash>.tmp, synced, then renamed
        assert synced.index(blob + ".tmp") < jsonl_synced
    assert synced.index(str(blob_dir)) < jsonl_synced
    # the new directory's own name, in the export's directory, before the file that needs it
    assert synced.index(str(out)) < jsonl_synced
