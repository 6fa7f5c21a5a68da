"""Canonical JSONL importer: lossless decode with seq reset, errors naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holon.errors import InvalidRecord
from holon.importers import parse_jsonl, read_transcript
from holon.ledger import Ledger
from holon.projections import fold
from holon.records import Message, Record, ToolResult, encode_json_record
from tests.cli_support import invoke
from tests.importers_support import parse_as

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


# ---------------------------------------------------------------- holon JSONL


def test_holon_jsonl_with_a_byte_order_mark_appends(tmp_path: Path) -> None:
    # Every other format ignores a leading BOM (a file re-saved by a Windows tool); holon's own
    # JSONL refused it as "JSON is malformed: invalid character (byte 0)", in `holon append` too.
    records = [
        {
            "seq": 0,
            "ts": 1,
            "turn": 0,
            "kind": "turn_started",
            "v": 1,
            "body": {"trigger": "user_message", "input": "fix it"},
        },
        {"seq": 1, "ts": 1, "turn": 0, "kind": "message", "v": 1, "body": {"role": "user", "text": "fix it"}},
        {"seq": 2, "ts": 2, "turn": 0, "kind": "turn_ended", "v": 1, "body": {"outcome": "completed"}},
    ]
    data = b"\xef\xbb\xbf" + "\r\n".join(json.dumps(record) for record in records).encode() + b"\r\n"
    assert [r.kind for r in parse_as("jsonl", data).records] == ["turn_started", "message", "turn_ended"]
    ledger, file = tmp_path / "L", tmp_path / "r.jsonl"
    file.write_bytes(data)
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    result = invoke("append", ledger, file)
    assert result.exit_code == 0, result.stderr
    assert invoke("verify", ledger).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        messages = fold(opened.read()).runtime.messages
    assert [(entry.turn, entry.message.text) for entry in messages] == [(0, "fix it")]
