"""`holon verify` on damaged storage: a torn tail is a warning (exit 0), a bad blob an error (exit 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_CORRUPT, EXIT_OK
from holon.ledger import Ledger
from holon.replay import append_evidence
from tests.cli_support import build_ledger, divergent_ledger, invoke, live_records, tree_bytes
from tests.ledger_support import (
    AGENT,
    active_segment,
    flip_byte,
    frame_offsets,
    message,
    tool_output,
    without_ts_check,
)
from tests.test_audit_support import write_ledger


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


# --------------------------------------------------------------------------- what a divergence means


def test_verify_says_what_a_divergence_means_as_replay_check_does(tmp_path: Path) -> None:
    # verify's error line read "derived records diverge at seq N (mismatch) (or derived under a
    # non-default ProjectionConfig ...)": an "or" to nothing, without the two likely causes
    # that `replay --check` names for the same ledger.
    ledger, seq = divergent_ledger(tmp_path / "D")
    verified = invoke("verify", ledger)
    replayed = invoke("replay", ledger, "--check")
    assert verified.exit_code == replayed.exit_code == EXIT_CHECK_FAILED
    line = verified.stderr.strip().splitlines()[-1]
    assert f"derived records diverge at seq {seq} (mismatch); " in line
    assert "the ledger was written by different projection code, or edited" in line
    assert line == replayed.stderr.strip().splitlines()[-1]


# --------------------------------------------------------------------------- the verified head, Finder files


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


# --------------------------------------------------------------------------- derivations up to the head


def _turn(turn: int) -> list[r.Record]:
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="go"), ts=10 * turn, turn=turn),
        r.Record(body=r.Message(role="user", text=f"go {turn}"), ts=10 * turn + 1, turn=turn),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=10 * turn + 2, turn=turn),
    ]


def test_verify_checks_derivations_up_to_the_head_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent appends while `holon verify` runs: the derivation check read on past the head
    # whose frames, chain and blobs were verified, so the report mixed two ledgers (its
    # refreshes counted a turn the storage figures do not hold).
    ledger = tmp_path / "L"
    with Ledger.create(ledger, agent_id=AGENT) as held:
        append_evidence(held, _turn(1))
    original = Ledger.verify

    def verify_then_a_turn_is_appended(self: Ledger, **kwargs: Any) -> Any:
        report = original(self, **kwargs)
        with Ledger.open(ledger) as writer:
            append_evidence(writer, _turn(2))
        return report

    monkeypatch.setattr(Ledger, "verify", verify_then_a_turn_is_appended)
    result = invoke("verify", ledger, "--json")
    assert result.exit_code == EXIT_OK, result.stderr
    report = json.loads(result.stdout)
    with Ledger.open(ledger, readonly=True) as held:
        appended_after = held.head()[0] - report["storage"]["head_seq"]
    assert appended_after > 0
    assert report["derivations"]["refreshes"] == 1


# --------------------------------------------------------------------------- holon verify --json


def _scenario(name: str, path: Path) -> int:
    """Build a ledger with one kind of finding; returns the exit code `holon verify` owes it."""
    if name == "torn_tail":
        build_ledger(path, "boundary_turn_cap")
        segment = sorted((path / "segments").glob("*.seg"))[-1]
        with segment.open("ab") as handle:
            handle.write(b"\x10\x00\x00")
        return 0
    if name == "ts_out_of_range":
        records = [
            r.Record(body=r.Message(role="user", text=f"m{i}"), ts=ts) for i, ts in enumerate([-5, 1, 2**62])
        ]
        with without_ts_check():
            write_ledger(path, "a", records)
        return 0
    if name == "storage":
        with Ledger.create(path, agent_id="a") as ledger:
            ledger.append(
                r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", output="x" * 10_000), ts=1)
            )
            ((_, blob),) = list(ledger.blobs.hashes())
        blob.write_bytes(b"not zstd")
        return EXIT_CORRUPT
    assert name == "derivation"
    divergent_ledger(path)
    return EXIT_CHECK_FAILED


@pytest.mark.parametrize("name", ["torn_tail", "ts_out_of_range", "storage", "derivation"])
def test_every_verify_finding_is_in_the_json_in_one_shape(tmp_path: Path, name: str) -> None:
    # The out-of-range ts was only a sentence in storage.warnings: no seq a script could act
    # on, and no kind to tell it from the torn tail's sentence beside it.
    code = _scenario(name, tmp_path / "l")
    text = invoke("verify", tmp_path / "l")
    as_json = invoke("verify", tmp_path / "l", "--json")
    assert text.exit_code == as_json.exit_code == code, text.output
    doc = json.loads(as_json.stdout)
    (finding,) = doc["findings"]
    assert set(finding) == {"severity", "kind", "file", "offset", "decompressed", "seq", "message"}
    assert finding["kind"] == name
    assert finding["severity"] == ("warning" if code == 0 else "error")
    assert doc["ok"] is (code == 0)
    # The same finding, in the same words, is in the text report (stdout or its stderr warning).
    assert finding["message"] in text.stdout + text.stderr.replace("\n", " ")
    if finding["offset"] is not None:
        assert f"byte {finding['offset']}" in text.stdout
    if finding["seq"] is not None:
        assert f"seq {finding['seq']}" in text.stdout


def test_out_of_range_ts_in_json_and_in_the_text_report(tmp_path: Path) -> None:
    _scenario("ts_out_of_range", tmp_path / "l")
    doc = json.loads(invoke("verify", tmp_path / "l", "--json").stdout)
    assert doc["storage"]["ts_out_of_range"] == {
        "count": 2,
        "examples": [{"seq": 0, "ts": -5}, {"seq": 2, "ts": 2**62}],
    }
    (finding,) = doc["findings"]
    assert (finding["kind"], finding["seq"]) == ("ts_out_of_range", 0)
    text = invoke("verify", tmp_path / "l")
    # Not only on stderr: `holon verify L > report.txt` kept no trace of them.
    assert (
        "record times      2 record(s) hold a ts outside 0..99999999999999, the first at seq 0" in text.stdout
    )
    clean = json.loads(invoke("verify", build_ledger(tmp_path / "c", "boundary_turn_cap"), "--json").stdout)
    assert clean["findings"] == [] and clean["storage"]["ts_out_of_range"] is None


def test_verify_says_when_the_last_refresh_is_still_to_be_appended(tmp_path: Path) -> None:
    # --json said pending_refresh: true; the text report said nothing of it.
    records = live_records("boundary_turn_cap")
    derived = (r.WorkingMemoryDelta, r.ContextEpisodeRecord)
    end = next(
        i
        for i, rec in enumerate(records)
        if isinstance(rec.body, r.TurnEnded) and isinstance(records[i + 1].body, derived)
    )
    with Ledger.create(tmp_path / "l", agent_id="a", fsync="never") as ledger:
        ledger.append_many(records[: end + 1])  # the writer died before the refresh's records
    result = invoke("verify", tmp_path / "l")
    assert result.exit_code == 0, result.output
    assert json.loads(invoke("verify", tmp_path / "l", "--json").stdout)["derivations"]["pending_refresh"]
    assert "derived records equal · the last turn's refresh is still to be appended" in result.stdout
