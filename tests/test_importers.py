"""Importer registry and cross-format properties: only InvalidRecord escapes, records are valid,
output does not depend on the process (hash seed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon.errors import InvalidRecord, UsageError
from holon.importers import FORMATS, IMPORTERS, ImportReport, _shape, import_transcript, read_transcript
from holon.records import Message, Record, decode_json_record, encode_json_record
from tests.msgspec_styles import STYLES, use_style

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "fixtures" / "importers"
#: Fixtures each importer must accept (the malformed and wrong-shape ones must be refused).
GOOD = {
    "jsonl": ["ledger.jsonl"],
    "claude-code": ["session.jsonl"],
    "openai-chat": ["conversation.json", "tau-bench-runs.json"],
    "swe-agent": ["function-calling.traj", "thought-action.traj"],
    "openhands": ["runs.jsonl", "events.json"],
}
JSONL_FORMATS = ("jsonl", "claude-code", "openhands")


def _assert_valid(report: ImportReport) -> None:
    """Every record survives the canonical codec unchanged, so it can be appended and exported."""
    for record in report.records:
        assert record.seq == -1
        assert decode_json_record(encode_json_record(record)) == msgspec.structs.replace(record, seq=-1)


def test_registry_lists_every_format_in_order() -> None:
    assert FORMATS == ("jsonl", "claude-code", "openai-chat", "swe-agent", "openhands")
    assert all(IMPORTERS[name].name == name and IMPORTERS[name].description for name in FORMATS)


@pytest.mark.parametrize(("fmt", "name"), [(fmt, name) for fmt, names in GOOD.items() for name in names])
def test_fixture_records_are_valid_and_ts_never_go_backwards(fmt: str, name: str) -> None:
    report = read_transcript(FIXTURES / fmt / name, fmt)
    assert report.records
    _assert_valid(report)
    stamps = [r.ts for r in report.records]
    assert stamps == sorted(stamps)
    assert import_transcript(FIXTURES / fmt / name, fmt) == list(report.records)


@pytest.mark.parametrize(("fmt", "name"), [(fmt, name) for fmt, names in GOOD.items() for name in names])
def test_turns_are_numbered_from_zero_and_closed(fmt: str, name: str) -> None:
    records = read_transcript(FIXTURES / fmt / name, fmt).records
    opened = [r.turn for r in records if r.kind == "turn_started"]
    closed = [r.turn for r in records if r.kind == "turn_ended"]
    assert opened == list(range(len(opened))) == closed


def test_unknown_format_and_missing_file_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown import format 'csv'; expected one of: jsonl, claude-code"):
        read_transcript(FIXTURES / "jsonl" / "ledger.jsonl", "csv")
    with pytest.raises(UsageError, match=r"cannot read .*nope\.jsonl"):
        read_transcript(tmp_path / "nope.jsonl", "jsonl")


def test_output_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "import sys\n"
        "from holon.importers import read_transcript\n"
        "from holon.records import encode_json_record\n"
        "for fmt, path in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    for r in read_transcript(path, fmt).records:\n"
        "        sys.stdout.buffer.write(encode_json_record(r) + b'\\n')\n"
    )
    args = [str(x) for fmt, names in GOOD.items() for name in names for x in (fmt, FIXTURES / fmt / name)]
    expected = b"".join(
        encode_json_record(r) + b"\n"
        for fmt, names in GOOD.items()
        for name in names
        for r in read_transcript(FIXTURES / fmt / name, fmt).records
    )
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, *args], env=env, capture_output=True, check=True, cwd=ROOT
        )
        assert out.stdout == expected


# --------------------------------------------------------------------------- robustness

# Keys and string values the formats use, so random documents reach deep into each mapping.
_KEYS = [
    "type",
    "role",
    "content",
    "message",
    "text",
    "tool_use",
    "tool_result",
    "tool_use_id",
    "is_error",
    "input",
    "id",
    "name",
    "uuid",
    "timestamp",
    "summary",
    "leafUuid",
    "isMeta",
    "isSidechain",
    "isCompactSummary",
    "cwd",
    "gitBranch",
    "sessionId",
    "toolUseResult",
    "interrupted",
    "subtype",
    "todos",
    "status",
    "tool_calls",
    "function",
    "arguments",
    "tool_call_id",
    "tool_call_ids",
    "traj",
    "messages",
    "tools",
    "parameters",
    "description",
    "function_call",
    "history",
    "trajectory",
    "state",
    "working_dir",
    "open_file",
    "execution_time",
    "action",
    "info",
    "exit_status",
    "submission",
    "is_demo",
    "observation",
    "cause",
    "args",
    "extras",
    "metadata",
    "exit_code",
    "success",
    "source",
    "thought",
    "final_thought",
    "task_completed",
    "tool_call_metadata",
    "function_name",
    "path",
    "command",
    "error",
    "seq",
    "ts",
    "turn",
    "kind",
    "v",
    "body",
    "filename",
]
_WORDS = [
    "user",
    "assistant",
    "system",
    "tool",
    "developer",
    "function",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "summary",
    "TodoWrite",
    "Edit",
    "Write",
    "Bash",
    "bash",
    "edit",
    "create",
    "run",
    "read",
    "message",
    "finish",
    "think",
    "recall",
    "agent",
    "completed",
    "pending",
    "in_progress",
    "submitted",
    "2025-03-01T10:00:00Z",
    "2025-04-30T16:00:00",
    "not-a-date",
    "Error:_x",
    "ERROR:",
    "t1",
    "call_1",
    "1",
    "str_replace",
    "/a/b.py",
    "rel.py",
]
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(_WORDS)
    | st.text(max_size=5)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6),
    max_leaves=30,
)


def _document(value: Any, fmt: str) -> bytes:
    if fmt in JSONL_FORMATS and isinstance(value, list):
        return b"\n".join(msgspec.json.encode(item) for item in value)
    return msgspec.json.encode(value)


def _parse_or_refuse(fmt: str, data: bytes) -> None:
    try:
        report = IMPORTERS[fmt].parse_bytes(data, source="fuzz")
    except InvalidRecord as exc:
        assert str(exc).startswith("invalid record")
        return
    _assert_valid(report)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_invalid_record(fmt: str, data: bytes) -> None:
    _parse_or_refuse(fmt, data)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_random_json_raises_only_invalid_record(fmt: str, value: Any) -> None:
    _parse_or_refuse(fmt, _document(value, fmt))


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_damaged_fixtures_raise_only_invalid_record(fmt: str, data: st.DataObject) -> None:
    original = (FIXTURES / fmt / GOOD[fmt][0]).read_bytes()
    start = data.draw(st.integers(0, len(original)))
    length = data.draw(st.integers(0, 20))
    junk = data.draw(st.binary(max_size=8))
    _parse_or_refuse(fmt, original[:start] + junk + original[start + length :])


def test_records_type_is_a_tuple_of_records() -> None:
    report = read_transcript(FIXTURES / "jsonl" / "ledger.jsonl", "jsonl")
    assert isinstance(report.records, tuple) and all(isinstance(r, Record) for r in report.records)


# --------------------------------------------------------------------------- whatever msgspec says
#
# What an import refuses, passes over or repairs follows the transcript's bytes: msgspec 0.23
# raises a DecodeError worded its own way for text that is not UTF-8 where 0.22 raised
# UnicodeDecodeError, and a Claude Code line that is not UTF-8 was passed over as a torn
# write under 0.23 instead of refused (tests/msgspec_styles.py).

_USER = {"role": "user", "content": "fix it"}


def _session(*inserted: bytes) -> bytes:
    """A Claude Code session of two prompts with ``inserted`` lines between them."""
    first, second = (
        json.dumps(
            {"uuid": f"u{i}", "timestamp": f"2025-03-01T10:00:0{i}Z", "type": "user", "message": _USER}
        ).encode()
        for i in (1, 2)
    )
    return b"\n".join([first, *inserted, second]) + b"\n"


@pytest.mark.parametrize("style", STYLES)
def test_an_import_refuses_passes_over_or_repairs_by_the_bytes_whatever_msgspec_raises(
    monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    use_style(monkeypatch, style)
    claude, chat = IMPORTERS["claude-code"], IMPORTERS["openai-chat"]
    latin = b'{"type":"x","t":"caf\xe9"}'
    with pytest.raises(InvalidRecord) as info:  # refused, not passed over as a torn write
        claude.parse_bytes(_session(latin), source="t")
    assert str(info.value).startswith("invalid record at line 2 of t: not UTF-8 text (byte 0xe9 at byte 20: ")
    assert claude.parse_bytes(_session(b'{"type":"progress","da'), source="t").skipped == {
        "unreadable line": 1
    }
    for cut in (b'{"type":"user","message":{"ro', b'{"type":"user","t":"caf\xc3'):
        with pytest.raises(InvalidRecord, match=r"at line 3 of t: .*ends in the middle of its last line"):
            claude.parse_bytes(_session() + cut, source="t")
    document = b"\xef\xbb\xbf" + json.dumps([_USER]).encode()
    with pytest.raises(
        InvalidRecord, match=rf"not UTF-8 text \(byte 0xe9 at byte {document.index(b'fix')}: "
    ):
        chat.parse_bytes(document.replace(b"fix", b"\xe9ix"), source="t")  # the byte order mark counted
    with pytest.raises(InvalidRecord, match="the file ends in the middle of it"):
        chat.parse_bytes(document[:-2], source="t")
    for repaired, text in [(rb"fix \ud83d", "fix \ufffd"), (b'fix", "cost": NaN, "x": "', "fix")]:
        report = chat.parse_bytes(document.replace(b"fix it", repaired), source="t")
        assert [rec.body.text for rec in report.records if isinstance(rec.body, Message)] == [text]


_SURROGATE_PIECES = st.sampled_from(["\\", "ud83d", "ude00", "\ud83d", "\ude00", "x", "😀"])


@given(st.lists(_SURROGATE_PIECES, max_size=10).map("".join))
def test_each_lone_surrogate_escape_and_nothing_else_becomes_u_fffd(text: str) -> None:
    escaped = json.dumps(text).encode()  # each surrogate as its escape; a backslash as `\\`
    expected = "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in json.loads(escaped))
    assert json.loads(_shape._without_lone_surrogates(escaped)) == expected
