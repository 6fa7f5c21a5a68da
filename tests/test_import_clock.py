"""`holon import` says when a transcript had no timestamps and its clock is invented.

An imported tau-bench run (OpenAI chat messages carry no times) had its records 1 s apart
on a synthetic clock; nothing said so, and `holon audit` showed every tool call taking
1,000 ms as if it had been measured.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holon.errors import InvalidRecord
from holon.ledger import Ledger
from tests.cli_support import invoke, tree_bytes
from tests.importers_support import USER, claude_jsonl, parse_as

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"


def _import(tmp_path: Path, fmt: str, name: str, *extra: str) -> str:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    result = invoke("import", ledger, FIXTURES / fmt / name, "--from", fmt, *extra)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_an_untimestamped_transcript_is_said_to_run_on_a_synthetic_clock(tmp_path: Path) -> None:
    out = _import(tmp_path, "openai-chat", "conversation.json")
    assert "the transcript has no timestamps: its records are 1,000 ms apart on a synthetic clock" in out
    assert "durations (holon stats, holon audit) are not real" in out


def test_a_timestamped_transcript_says_nothing_of_its_clock(tmp_path: Path) -> None:
    out = _import(tmp_path, "claude-code", "session.jsonl")
    assert "synthetic clock" not in out


def test_json_output_states_the_clock(tmp_path: Path) -> None:
    untimed = json.loads(_import(tmp_path / "a", "openai-chat", "conversation.json", "--json"))
    timed = json.loads(_import(tmp_path / "b", "claude-code", "session.jsonl", "--json"))
    assert untimed["synthetic_clock"] is True and timed["synthetic_clock"] is False


# ---------------------------------------------------------------- timestamps named where they are


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("openai-chat", "conversation.json"), ("swe-agent", "function-calling.traj")],
)
def test_a_transcript_without_timestamps_imports_into_a_ledger_that_has_records(
    fmt: str, name: str, tmp_path: Path
) -> None:
    # The synthetic clock starts at 0; a ledger's timestamps never go backwards, so without
    # care a second untimestamped transcript (or one after a Claude Code session) is refused.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    session = FIXTURES / "claude-code" / "session.jsonl"
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    for _ in range(2):
        result = invoke("import", ledger, FIXTURES / fmt / name, "--from", fmt)
        assert result.exit_code == 0, result.stderr
    assert invoke("verify", ledger).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        stamps = [rec.ts for rec in opened.read()]
    assert stamps == sorted(stamps)


def test_a_transcript_older_than_the_ledger_is_refused_naming_the_file(tmp_path: Path) -> None:
    # The refusal came from append_evidence as "input record 1": no file, no line. It must
    # name the transcript, and leave the ledger as it was.
    ledger = tmp_path / "L"
    session = FIXTURES / "claude-code" / "session.jsonl"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    before = tree_bytes(ledger)
    # Another session, from the middle of the first one's time (the same one again is imported
    # already: exit 0, nothing appended; tests/test_cli_import.py).
    older = tmp_path / "older.jsonl"
    older.write_bytes(claude_jsonl({"type": "user", "message": USER}))
    again = invoke("import", ledger, older, "--from", "claude-code")
    assert again.exit_code == 2 and "Traceback" not in again.stderr
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "older.jsonl" in lines[0] and "time order" in lines[0]
    assert tree_bytes(ledger) == before


def test_a_timestamp_before_1970_is_named_where_the_transcript_holds_it() -> None:
    # It was refused only at append time, as "record N mapped from F", with no line.
    line = {
        "type": "user",
        "uuid": "u1",
        "timestamp": "1969-12-31T23:59:59Z",
        "message": {"role": "user", "content": "hi"},
    }
    data = (json.dumps(line) + "\n").encode()
    with pytest.raises(InvalidRecord, match="before 1970") as caught:
        parse_as("claude-code", data)
    assert "line 1" in str(caught.value)


def test_a_timestamp_past_the_ledgers_range_is_named_where_the_transcript_holds_it() -> None:
    # Python dates reach the year 9999, the ledger's ts only 5138: the ledger refused it at
    # append, naming a record of the batch instead of the transcript's line.
    line = {
        "type": "user",
        "uuid": "u1",
        "timestamp": "6000-01-01T00:00:00Z",
        "message": {"role": "user", "content": "hi"},
    }
    data = (json.dumps(line) + "\n").encode()
    with pytest.raises(InvalidRecord, match="past the year 5138") as caught:
        parse_as("claude-code", data)
    assert "line 1" in str(caught.value)
