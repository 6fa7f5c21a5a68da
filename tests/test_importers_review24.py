"""Importers against what today's agent tools write: Claude Code stream-json, OpenHands V1 conversations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from holon.importers import read_transcript
from holon.records import (
    ExecutionEnvironment,
    Message,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
)
from tests.importers_support import parse_as

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

# ---------------------------------------------------------------- claude-code: stream-json output


def _stream(*events: dict[str, Any]) -> bytes:
    return "".join(json.dumps(event) + "\n" for event in events).encode()


def _assistant(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    message = {"role": "assistant", "model": "claude-sonnet-4-5", "content": list(blocks)}
    return {"type": "assistant", "message": message, "parent_tool_use_id": parent, "session_id": "s"}


def _user(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    message = {"role": "user", "content": list(blocks)}
    return {"type": "user", "message": message, "parent_tool_use_id": parent, "session_id": "s"}


def test_stream_json_subagent_messages_are_not_the_main_agents() -> None:
    report = read_transcript(FIXTURES / "claude-code" / "stream_json_subagent.jsonl", "claude-code")
    bodies = [record.body for record in report.records]
    # The subagent's prompt opened an operator turn, and its Bash call and text read as the main agent's.
    assert not any(isinstance(b, TurnStarted) and b.trigger == "user_message" for b in bodies)
    assert [b.tool for b in bodies if isinstance(b, ToolIntent)] == ["Task"]
    assert [b.text for b in bodies if isinstance(b, Message)] == [
        "I'll ask a subagent to find the config.",
        "Found it: app.toml.",
    ]
    # The Task call and its result (the subagent's report) stay in one turn.
    task = [r for r in report.records if isinstance(r.body, ToolIntent | ToolResult)]
    assert {r.turn for r in task} == {0}
    assert report.turns == 1
    assert report.skipped == {"subagent event": 4}


def test_stream_json_init_records_the_working_directory() -> None:
    report = read_transcript(FIXTURES / "claude-code" / "stream_json_subagent.jsonl", "claude-code")
    first = report.records[0]
    assert first.turn is None
    assert first.body == ExecutionEnvironment(cwd="/work/app", extra={"session_id": "s-1"})


def test_stream_json_error_result_ends_the_turn_failed() -> None:
    data = _stream(
        _assistant({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}),
        _user({"type": "tool_result", "tool_use_id": "toolu_1", "content": "building"}),
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 2, "session_id": "s"},
    )
    ended = [r.body for r in parse_as("claude-code", data).records if isinstance(r.body, TurnEnded)]
    assert ended == [TurnEnded(outcome="failed", error="error_max_turns")]


def test_stream_json_api_error_result_names_its_text() -> None:
    data = _stream(
        _assistant({"type": "text", "text": "Looking."}),
        {"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 529 Overloaded"},
        _user({"type": "text", "text": "try again"}),
        _assistant({"type": "text", "text": "Done."}),
        {"type": "result", "subtype": "success", "is_error": False, "result": "Done."},
    )
    report = parse_as("claude-code", data)
    ended = [r.body for r in report.records if isinstance(r.body, TurnEnded)]
    assert ended == [
        TurnEnded(outcome="failed", error="API Error: 529 Overloaded"),
        TurnEnded(outcome="completed"),
    ]
    # The success result repeats the last assistant text; it is not a second message.
    assert [r.body.text for r in report.records if isinstance(r.body, Message)].count("Done.") == 1


def test_stream_json_tool_use_result_marks_an_interrupted_call() -> None:
    result = _user({"type": "tool_result", "tool_use_id": "toolu_1", "content": "stopped", "is_error": True})
    result["tool_use_result"] = {"stdout": "", "stderr": "", "interrupted": True}
    data = _stream(
        _assistant({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "sleep 99"}}),
        result,
    )
    results = [r.body for r in parse_as("claude-code", data).records if isinstance(r.body, ToolResult)]
    assert [r.status for r in results] == ["interrupted"]
