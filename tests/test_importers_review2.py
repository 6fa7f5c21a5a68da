"""Importer edge cases found in the second review: shapes real tools write that the samples lack."""

from __future__ import annotations

import json
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.records import ToolIntent, ToolResult
from tests.importers_support import USER, claude_jsonl, message_texts, parse_as


def test_a_claude_code_message_written_twice_is_imported_once() -> None:
    # Claude Code writes some messages twice with the same uuid (with `--input-format
    # stream-json` the whole history again after every prompt; a first prompt echoed). Each
    # copy became another turn and another tool call, and the copied result answered nothing.
    events = [
        {"type": "user", "message": USER},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}]}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": "done"}]}},
    ]
    once = claude_jsonl(*events)
    lines = once.splitlines(keepends=True)
    second = [{"type": "user", "message": {"role": "user", "content": "and now?"}, "uuid": "u9",
               "timestamp": "2025-03-01T10:00:09Z", "sessionId": "s1"}]
    twice = once + b"".join(lines) + json.dumps(second[0]).encode() + b"\n"
    report = parse_as("claude-code", twice)
    assert message_texts(report) == ["fix it", "done", "and now?"]
    assert report.turns == 2 and report.tool_calls == 1
    assert [rec.body.call_id for rec in report.records if isinstance(rec.body, ToolResult)] == ["t1"]
    assert report.skipped == {"duplicate event": 4}
    assert [rec.body for rec in report.records if isinstance(rec.body, ToolIntent)] == [
        ToolIntent(call_id="t1", tool="Bash", args={"command": "ls"})
    ]


NOT_UTF8: dict[str, bytes] = {
    "claude-code": claude_jsonl({"type": "user", "message": USER}).replace(b"fix it", b"caf\xe9 fix it"),
    "openai-chat": json.dumps([USER]).encode().replace(b"fix it", b"caf\xe9 fix it"),
    "swe-agent": json.dumps({"history": [USER]}).encode().replace(b"fix it", b"caf\xe9 fix it"),
    "openhands": json.dumps(
        [{"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    ).encode().replace(b"fix it", b"caf\xe9 fix it"),
    "jsonl": b'{"seq": 0, "ts": 1, "turn": null, "kind": "message", "v": 1, '
    b'"body": {"role": "user", "text": "caf\xe9 fix it"}}\n',
}


@pytest.mark.parametrize("fmt", sorted(NOT_UTF8))
def test_a_file_that_is_not_utf8_names_the_byte_where_it_is_and_what_to_do(fmt: str) -> None:
    # A transcript re-saved by a Windows tool as Latin-1: the error said "at byte 1" or so (the
    # offset inside the JSON string holding the byte, not in the file or line) and nothing
    # about what to do, wrapped in "not a JSON document (...)".
    data = NOT_UTF8[fmt]
    with pytest.raises(InvalidRecord) as caught:
        parse_as(fmt, data)
    offset = data.splitlines()[0].index(b"\xe9")
    message = str(caught.value)
    assert f"not UTF-8 text (byte 0xe9 at byte {offset}: " in message, message
    assert "save it as UTF-8" in message and "not a JSON" not in message


def _openhands_run(observation_extras: dict[str, Any]) -> bytes:
    return json.dumps([
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "agent", "action": "run", "args": {"command": "git status", "thought": ""}},
        {"id": 3, "source": "agent", "cause": 2, "observation": "run",
         "content": "fatal: not a git repository", "extras": observation_extras},
    ]).encode()


@pytest.mark.parametrize(("code", "status"), [(128, "error"), (0, "ok"), (-1, "interrupted")])
def test_an_older_openhands_run_keeps_its_exit_code_on_extras(code: int, status: str) -> None:
    # OpenDevin and early OpenHands wrote `extras: {"command_id", "command", "exit_code"}` (no
    # `metadata`): a failed command was imported as `ok` with no exit code.
    old = {"command_id": -1, "command": "git status", "exit_code": code}
    report = parse_as("openhands", _openhands_run(old))
    results = [rec.body for rec in report.records if isinstance(rec.body, ToolResult)]
    assert [(r.status, r.exit_code) for r in results] == [(status, code)]
    # The current shape still wins where both are present.
    current = {"exit_code": 7, "metadata": {"exit_code": code}}
    results = [rec.body for rec in parse_as("openhands", _openhands_run(current)).records
               if isinstance(rec.body, ToolResult)]
    assert [(r.status, r.exit_code) for r in results] == [(status, code)]


def test_an_openai_custom_tool_call_is_a_call_with_its_text_input() -> None:
    # Chat completions with custom (free-form) tools write `{"type": "custom", "custom": {"name",
    # "input"}}` and no `function`: the whole file was refused ("missing `function`").
    chat = json.dumps([
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}},
            {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "Done!"},
        {"role": "tool", "tool_call_id": "c2", "content": "a.py"},
    ]).encode()
    bodies = [rec.body for rec in parse_as("openai-chat", chat).records]
    assert [body for body in bodies if isinstance(body, ToolIntent)] == [
        ToolIntent(call_id="c1", tool="apply_patch", args={"input": "*** Begin Patch"}),
        ToolIntent(call_id="c2", tool="ls", args={}),
    ]
    results = [(body.call_id, body.tool, body.output) for body in bodies if isinstance(body, ToolResult)]
    assert results == [("c1", "apply_patch", "Done!"), ("c2", "ls", "a.py")]


def test_an_opendevin_history_of_action_observation_pairs_imports() -> None:
    # OpenDevin and early OpenHands evaluation outputs store `history` as [action, observation]
    # pairs whose events have no `id` or `cause`: the whole file was refused ("expected an
    # object"). The pair says which action an observation answers.
    run = {"instance_id": "x", "history": [
        [{"source": "user", "action": "message", "args": {"content": "fix it"}},
         {"source": "user", "observation": "null", "content": "", "extras": {}}],
        [{"source": "agent", "action": "run", "args": {"command": "git status", "thought": "Look."}},
         {"source": "agent", "observation": "run", "content": "fatal: not a git repository",
          "extras": {"command_id": -1, "command": "git status", "exit_code": 128}}],
        [{"source": "agent", "action": "run", "args": {"command": "ls", "thought": ""}},
         {"source": "agent", "observation": "run", "content": "a.py",
          "extras": {"command_id": -1, "command": "ls", "exit_code": 0}}],
        [{"source": "agent", "action": "finish", "args": {"outputs": {}, "thought": ""}},
         {"source": "agent", "observation": "null", "content": "", "extras": {}}],
    ]}
    report = parse_as("openhands", json.dumps(run).encode())
    bodies = [rec.body for rec in report.records]
    assert message_texts(report) == ["fix it", "Look."]
    assert [(b.call_id, b.args) for b in bodies if isinstance(b, ToolIntent)] == [
        ("pair-1", {"command": "git status"}), ("pair-2", {"command": "ls"})
    ]
    results = [(b.call_id, b.status, b.exit_code, b.output) for b in bodies if isinstance(b, ToolResult)]
    assert results == [
        ("pair-1", "error", 128, "fatal: not a git repository"), ("pair-2", "ok", 0, "a.py")
    ]
    assert report.turns == 1 and report.skipped == {"observation:null": 2}
    with pytest.raises(InvalidRecord, match=r"field `history\[0\]`: not an OpenHands event pair"):
        parse_as("openhands", json.dumps({"history": [[run["history"][0][0]]]}).encode())


def test_the_offset_of_a_byte_that_is_not_utf8_counts_a_byte_order_mark() -> None:
    # Windows tools start files with a BOM; the offset must still be the byte's in the file.
    data = b"\xef\xbb\xbf" + json.dumps({"messages": [{"role": "user", "content": "cafX"}]}).encode()
    data = data.replace(b"X", b"\xe9")
    offset = data.index(b"\xe9")
    with pytest.raises(InvalidRecord, match=f"byte 0xe9 at byte {offset}: "):
        parse_as("openai-chat", data)


def test_a_timestamp_before_1970_is_named_where_the_transcript_holds_it() -> None:
    # It was refused only at append time, as "record N mapped from F", with no line.
    line = {"type": "user", "uuid": "u1", "timestamp": "1969-12-31T23:59:59Z",
            "message": {"role": "user", "content": "hi"}}
    data = (json.dumps(line) + "\n").encode()
    with pytest.raises(InvalidRecord, match="before 1970") as caught:
        parse_as("claude-code", data)
    assert "line 1" in str(caught.value)
