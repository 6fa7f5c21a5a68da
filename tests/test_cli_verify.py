"""`holon verify` on damaged storage: a torn tail is a warning (exit 0), a bad blob an error (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

from holon import records as r
from holon.cli import EXIT_CORRUPT
from holon.ledger import Ledger
from tests.cli_support import build_ledger, invoke, tree_bytes


def _torn(ledger: Path) -> tuple[Path, int]:
    """Append half a frame head to the active segment, as a crash mid-append would leave it."""
    segment = sorted((ledger / "segments").glob("*.seg"))[-1]
    size = segment.stat().st_size
    with segment.open("ab") as handle:
        handle.write(b"\x10\x00\x00")
    return segment, size


def test_a_torn_tail_is_a_warning_not_a_failure(tmp_path: Path) -> None:
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    segment, offset = _torn(ledger)
    before = tree_bytes(ledger)
    result = invoke("verify", ledger)
    assert result.exit_code == 0, result.output
    assert "frames and chain  ok" in result.stdout and "derivations       ok" in result.stdout
    row = f"torn tail         3 bytes after the last valid frame (byte {offset} of {segment})"
    assert row in result.stdout
    (warning,) = result.stderr.strip().splitlines()
    assert warning.startswith(f"holon: warning: torn tail: {segment} at byte {offset}: 3 bytes")
    assert "crash mid-append" in warning and "opening the ledger for writing will cut" in warning
    assert tree_bytes(ledger) == before  # verify names it; only a writer cuts it


def test_a_torn_tail_in_json(tmp_path: Path) -> None:
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    segment, offset = _torn(ledger)
    result = invoke("verify", ledger, "--json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["storage"]["ok"] is True
    tail = doc["storage"]["torn_tail"]
    assert tail["file"] == str(segment) and (tail["offset"], tail["bytes"]) == (offset, 3)
    assert tail["reason"] == "the data ends inside a frame head"
    (warning,) = doc["storage"]["warnings"]
    assert "crash mid-append" in warning
    assert result.stderr.startswith("holon: warning: torn tail:")
    # Once a writer has opened the ledger, the tail is gone and so is the warning.
    with Ledger.open(ledger) as writer:
        assert [a.action for a in writer.recovery] == ["truncated_torn_tail"]
    clean = invoke("verify", ledger, "--json")
    assert clean.stderr == ""
    storage = json.loads(clean.stdout)["storage"]
    assert storage["torn_tail"] is None and storage["warnings"] == []


def test_a_clean_ledger_has_no_torn_tail_line(tmp_path: Path) -> None:
    result = invoke("verify", build_ledger(tmp_path / "L", "boundary_turn_cap"))
    assert result.exit_code == 0 and "torn tail" not in result.stdout and result.stderr == ""


def test_a_corrupt_blob_is_named_without_sending_the_user_to_verify(tmp_path: Path) -> None:
    path = tmp_path / "L"
    with Ledger.create(path, agent_id="a") as ledger:
        ledger.append(
            r.Record(body=r.ToolResult(call_id="c", tool="bash", status="ok", output="x" * 10_000), ts=1)
        )
        ((blob_hash, blob),) = list(ledger.blobs.hashes())
    blob.write_bytes(b"not zstd")
    result = invoke("verify", path)
    assert result.exit_code == EXIT_CORRUPT
    assert f"{blob} at byte 0: blob does not decompress" in result.stdout
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"holon: error: ledger {path} is corrupt: 1 problem(s); first: {blob}")
    assert "holon verify" not in result.stdout + result.stderr
    assert blob_hash in str(blob)


def test_an_empty_ledger_verifies_as_empty_with_its_genesis(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id="a1") as ledger:
        genesis = ledger.head()[1]
        assert str(ledger.verify()).startswith(f"ledger ok: 0 records, 0 blobs, empty, genesis {genesis}")
    result = invoke("verify", tmp_path / "L")
    assert result.exit_code == 0
    first = result.stdout.splitlines()[0]
    assert first == f"frames and chain  ok · 0 records · empty (genesis {genesis[:16]}…)"
    assert "head seq -1" not in result.stdout
