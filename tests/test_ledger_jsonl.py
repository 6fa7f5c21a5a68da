"""Canonical JSONL: lossless export/import, blobs beside the file, all-or-nothing import."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings

from holon.errors import InvalidRecord
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
from tests.ledger_support import AGENT, message, scratch_dir, tool_output, with_real_blobs
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
