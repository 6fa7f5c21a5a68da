"""Canonical JSONL importer: lossless decode with seq reset, errors naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from holon.errors import InvalidRecord
from holon.importers import parse_jsonl, read_transcript
from holon.records import Message, Record, ToolResult, encode_json_record

FIXTURES = Path(__file__).parent.parent / "fixtures" / "importers" / "jsonl"


def test_records_keep_everything_but_seq() -> None:
    records = read_transcript(FIXTURES / "ledger.jsonl", "jsonl").records
    assert [(r.seq, r.ts, r.turn, r.kind) for r in records] == [
        (-1, 1000, None, "system_policy"),
        (-1, 2000, 0, "turn_started"),
        (-1, 2000, 0, "message"),
        (-1, 3000, 0, "tool_intent"),
        (-1, 4000, 0, "tool_result"),
        (-1, 5000, 0, "turn_ended"),
    ]
    assert records[4].body == ToolResult(
        call_id="c1", tool="bash", status="error", output="1 failed", exit_code=1
    )


def test_export_then_import_round_trips() -> None:
    original = [
        Record(body=Message(role="user", text="héllo\nworld"), ts=5, turn=0, seq=0),
        Record(
            body=ToolResult(call_id="c", tool="t", status="ok", touched_files=("a.py",)), ts=6, turn=0, seq=1
        ),
    ]
    data = b"\n".join(encode_json_record(r) for r in original) + b"\n"
    imported = parse_jsonl(data, source="export.jsonl").records
    assert [encode_json_record(r) for r in imported] == [
        encode_json_record(Record(body=r.body, ts=r.ts, turn=r.turn)) for r in original
    ]


def test_invalid_line_names_line_and_field() -> None:
    with pytest.raises(InvalidRecord) as info:
        read_transcript(FIXTURES / "malformed.jsonl", "jsonl")
    assert info.value.where is not None and info.value.where.startswith("line 3 of ")
    assert info.value.field == "body.status"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"seq": 0, "ts": 1, "turn": null, "kind": "message", "v": 1, '
            b'"body": {"role": "user", "text": "\xff"}}',
            "not UTF-8",
        ),
        (
            b'{"seq": 0, "ts": 1, "turn": null, "kind": "message", "v": 1, "body": ' + b"[" * 100_000,
            "nested too deeply",
        ),
    ],
)
def test_undecodable_bytes_raise_invalid_record(line: bytes, message: str) -> None:
    with pytest.raises(InvalidRecord, match=message):
        parse_jsonl(b"\n" + line, source="bad.jsonl")


def test_other_format_is_refused() -> None:
    claude = Path(__file__).parent.parent / "fixtures" / "importers" / "claude-code" / "session.jsonl"
    with pytest.raises(InvalidRecord, match=r"line 1 of .*session\.jsonl.*unknown field `type`"):
        read_transcript(claude, "jsonl")
