"""Third ledger review: canonical JSONL imports as they arrive, interrupted imports, failed writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from holon.errors import InvalidRecord
from holon.ledger import Ledger, export_jsonl, import_jsonl
from holon.records import Record
from tests.ledger_support import AGENT, message, tool_output


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
        assert import_jsonl(edited, copy, require_empty=True) == list(range(5))
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
        assert import_jsonl(edited, copy, require_empty=True) == list(range(5))
        assert copy.verify().ok


