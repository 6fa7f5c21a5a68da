"""Third ledger review: canonical JSONL imports as they arrive, interrupted imports, failed writes."""

from __future__ import annotations

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


