"""Bugs found in a fourth review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from holon.cli import EXIT_CORRUPT, EXIT_OK, EXIT_SYSTEM, EXIT_USAGE
from holon.ledger import Ledger
from tests.cli_support import invoke, tree_bytes
from tests.ledger_support import AGENT, active_segment, flip_byte, frame_offsets, message, tool_output

# --------------------------------------------------------------------------- export and import


def test_an_empty_ledger_round_trips_through_export_and_import(tmp_path: Path) -> None:
    # The export of an empty ledger is an empty file, which import refused as "empty".
    source, copy = tmp_path / "E", tmp_path / "C"
    assert invoke("init", source, "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("export", source, tmp_path / "e.jsonl").exit_code == EXIT_OK
    assert invoke("init", copy, "--agent-id", "a").exit_code == EXIT_OK
    before = tree_bytes(copy)
    text = invoke("import", copy, tmp_path / "e.jsonl", "--from", "jsonl")
    assert text.exit_code == EXIT_OK, text.stderr
    assert "0 records" in text.stdout
    as_json = invoke("import", copy, tmp_path / "e.jsonl", "--from", "jsonl", "--json")
    assert as_json.exit_code == EXIT_OK, as_json.stderr
    assert json.loads(as_json.stdout)["appended"] == 0
    assert tree_bytes(copy) == before
    with Ledger.open(source, readonly=True) as a, Ledger.open(copy, readonly=True) as b:
        assert a.head() == b.head()


def test_an_empty_file_into_a_ledger_with_records_is_still_refused(tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    with Ledger.create(ledger, agent_id=AGENT) as held:
        held.append(message(0))
    (tmp_path / "e.jsonl").write_bytes(b"")
    before = tree_bytes(ledger)
    result = invoke("import", ledger, tmp_path / "e.jsonl", "--from", "jsonl")
    assert result.exit_code == EXIT_USAGE
    assert "is empty" in result.stderr
    assert tree_bytes(ledger) == before


def test_export_into_another_ledger_is_refused(tmp_path: Path) -> None:
    source, other = tmp_path / "L", tmp_path / "O"
    assert invoke("init", source, "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("init", other, "--agent-id", "b").exit_code == EXIT_OK
    before = tree_bytes(other)
    result = invoke("export", source, other / "segments" / "x.jsonl")
    assert result.exit_code == EXIT_USAGE
    assert f"inside the ledger {other}" in result.stderr
    assert tree_bytes(other) == before


def test_a_parquet_export_into_another_ledger_is_refused(tmp_path: Path) -> None:
    source, other = tmp_path / "L", tmp_path / "O"
    assert invoke("init", source, "--agent-id", "a").exit_code == EXIT_OK
    assert invoke("init", other, "--agent-id", "b").exit_code == EXIT_OK
    before = tree_bytes(other)
    for out in (other, other / "tables"):
        result = invoke("export", source, out, "--format", "parquet")
        assert result.exit_code == EXIT_USAGE, result.stderr
        assert f"inside the ledger {other}" in result.stderr
    assert tree_bytes(other) == before


# --------------------------------------------------------------------------- --memory-limit


@pytest.mark.parametrize("value", ["-5GB", "0", "0GB", "0%", "garbage", "", "2", "GB", "1.2.3GB", "120%"])
def test_a_memory_limit_that_is_not_a_positive_size_is_a_usage_error(tmp_path: Path, value: str) -> None:
    # -5GB was taken by DuckDB as no limit at all; garbage was refused only after the load,
    # in DuckDB's words.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    for args in (
        ("audit", ledger, "--memory-limit", value),
        ("export", ledger, tmp_path / "pq", "--format", "parquet", "--memory-limit", value),
    ):
        result = invoke(*args)
        assert result.exit_code == EXIT_USAGE, result.output
        (line,) = result.stderr.strip().splitlines()
        assert line.startswith("holon: usage error: Invalid value for '--memory-limit'")
        assert "e.g. 2GB" in line
    assert not (tmp_path / "pq").exists()


@pytest.mark.parametrize("value", ["2GB", "500MB", "1.5GB", "2 GB", "750mib", "1TB", "50%"])
def test_a_memory_limit_duckdb_understands_is_accepted(tmp_path: Path, value: str) -> None:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    result = invoke("audit", ledger, "--memory-limit", value, "--sql", "SELECT 1 AS one")
    assert result.exit_code == EXIT_OK, result.stderr


# --------------------------------------------------------------------------- verify


def test_verify_names_the_head_of_what_verified_in_text_and_json(tmp_path: Path) -> None:
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT) as ledger:
        for i in range(10):
            ledger.append(message(i))
        head4 = ledger.get(4)
        assert head4.seq == 4
    seg = active_segment(path)
    flip_byte(seg, frame_offsets(seg.read_bytes())[5] + 60)
    with Ledger.open(path, readonly=True) as ledger:
        expected = ledger.verify().head
    assert expected[0] == 4
    text = invoke("verify", path)
    assert text.exit_code == EXIT_CORRUPT
    assert f"verified          seqs 0-4 (head {expected[1][:16]}…)" in text.stdout
    as_json = invoke("verify", path, "--json")
    storage = json.loads(as_json.stdout)["storage"]
    assert (storage["head_seq"], storage["head_hash"]) == (4, expected[1])


def test_verify_of_a_ledger_with_finder_files_passes_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "L"
    with Ledger.create(path, agent_id=AGENT, blob_threshold=16) as ledger:
        ledger.append(tool_output(0, 300))
    (path / "blobs" / ".DS_Store").write_bytes(b"Bud1")
    result = invoke("verify", path, "--json")
    assert result.exit_code == EXIT_OK, result.stdout
    findings = json.loads(result.stdout)["findings"]
    assert [(f["severity"], f["kind"], f["file"]) for f in findings] == [
        ("warning", "ignored_file", str(path / "blobs" / ".DS_Store"))
    ]


# --------------------------------------------------------------------------- a short active segment


def test_repair_offers_and_makes_the_repair_of_an_empty_active_segment(tmp_path: Path) -> None:
    path = tmp_path / "L"
    assert invoke("init", path, "--agent-id", "a").exit_code == EXIT_OK
    active_segment(path).write_bytes(b"")
    append = invoke("append", path, os.devnull)
    assert append.exit_code == EXIT_CORRUPT
    assert "holon repair" in append.stderr
    shown = invoke("repair", path)
    assert shown.exit_code == EXIT_CORRUPT
    assert "no record (a segment's records follow its header)" in shown.stdout
    assert "--cut-at 0" in shown.stdout
    assert "the genesis hash" in shown.stdout
    cut = invoke("repair", path, "--cut-at", "0")
    assert cut.exit_code == EXIT_OK, cut.stderr
    assert cut.stdout.startswith("new header ")
    assert invoke("verify", path).exit_code == EXIT_OK


# --------------------------------------------------------------------------- the system refuses a write


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device: free some space"),
        (errno.EDQUOT, "disk quota"),
        (errno.EROFS, "read-only file system"),
        (errno.EACCES, "permission denied"),
        (errno.EPERM, "permission denied"),
    ],
)
def test_a_write_the_system_refuses_says_why_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    ledger = tmp_path / "L"
    real_open = os.open

    def refusing_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if str(path).endswith(".tmp"):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing_open)
    result = invoke("init", ledger, "--agent-id", "a")
    monkeypatch.undo()
    assert result.exit_code == (EXIT_USAGE if code in (errno.EACCES, errno.EPERM) else EXIT_SYSTEM)
    (line,) = result.stderr.strip().splitlines()
    assert words in line
    # the file meant, not the temporary name it is written under
    assert f"({ledger / 'segments' / '00000000000000000000.seg'})" in line
    assert ".tmp" not in line


def test_a_write_refused_without_a_file_name_still_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.write reports a full disk without naming the file.
    with Ledger.create(tmp_path / "L", agent_id=AGENT) as ledger:
        ledger.append(message(0))
    (tmp_path / "r.jsonl").write_bytes(b"")
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if len(data) > 0 and os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    result = invoke("export", tmp_path / "L", tmp_path / "x.jsonl", "--json")
    monkeypatch.undo()
    assert result.exit_code == EXIT_SYSTEM
    error = json.loads(result.stderr)["error"]
    assert error["type"] == "OSError"
    assert error["message"].startswith("no space left on the device: free some space")
    assert not (tmp_path / "x.jsonl.tmp").exists()
