"""`holon import --from jsonl` given another tool's transcript names the format that reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

import holon.cli.writing
from holon.errors import InvalidRecord
from holon.records import decode_json_record
from tests.cli_support import invoke

SAMPLES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("swe-agent/function-calling.traj", "swe-agent"),
        ("claude-code/session.jsonl", "claude-code"),
        ("openai-chat/conversation.json", "openai-chat"),
        ("openhands/runs.jsonl", "openhands"),
    ],
)
def test_a_transcript_given_as_an_export_is_named_with_its_format(
    tmp_path: Path, name: str, fmt: str
) -> None:
    ledger = tmp_path / "l"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    transcript = SAMPLES / name
    result = invoke("import", ledger, transcript, "--from", "jsonl")
    assert result.exit_code == 2
    # It said "the record was cut off (a partly copied file?)" and nothing else.
    assert (
        f"is not a holon export, but it reads with --from {fmt}: import it with --from {fmt}" in result.stderr
    )
    assert invoke("import", ledger, transcript, "--from", fmt).exit_code == 0


def test_a_file_no_importer_reads_lists_the_formats(tmp_path: Path) -> None:
    ledger = tmp_path / "l"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\n")
    result = invoke("import", ledger, notes, "--from", "jsonl")
    assert result.exit_code == 2
    assert "is not a holon export: if it is another tool's transcript, import it with --from claude-code" in (
        result.stderr
    )
    assert invoke("stats", ledger, "--json").stdout.count('"records": 0') == 1


def test_a_file_over_the_limit_is_not_parsed_by_every_importer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A wrong --from on a file of gigabytes fails at once, listing the formats.
    monkeypatch.setattr(holon.cli.writing, "_TRY_IMPORTERS_MAX", 10)
    ledger = tmp_path / "l"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    result = invoke("import", ledger, SAMPLES / "swe-agent/function-calling.traj", "--from", "jsonl")
    assert result.exit_code == 2
    assert "reads with --from" not in result.stderr
    assert "if it is another tool's transcript, import it with --from claude-code" in result.stderr


def test_the_reason_is_quoted_whole_when_the_file_name_holds_a_colon(tmp_path: Path) -> None:
    # The reason was cut out of the error's text at its first ": ", the one in the file name.
    ledger = tmp_path / "l"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    notes = tmp_path / "notes: draft.txt"
    notes.write_text("just some notes\n")
    result = invoke("import", ledger, notes, "--from", "jsonl")
    assert result.exit_code == 2
    where = f"line 1 of {notes}"
    with pytest.raises(InvalidRecord) as read_alone:
        decode_json_record(b"just some notes", where=where)
    reason = str(read_alone.value).removeprefix(f"invalid record at {where}: ")
    assert f"at {where}: {reason}; {notes} is not a holon export" in result.stderr.replace("\n", " ")
