"""Importers against what today's agent tools write: Claude Code stream-json, OpenHands V1 conversations."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord, UsageError
from holon.importers import read_transcript
from holon.records import (
    ContextSummary,
    ExecutionEnvironment,
    Message,
    SystemPolicy,
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
    message = {"role": "assistant", "model": "claude-sonnet-5-5", "content": list(blocks)}
    return {"type": "assistant", "message": message, "parent_tool_use_id": parent, "session_id": "s"}


def _user(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    message = {"role": "user", "content": list(blocks)}
    return {"type": "user", "message": message, "parent_tool_use_id": parent, "session_id": "s"}


def test_stream_json_subagent_messages_are_not_the_main_agents() -> None:
    report = read_transcript(FIXTURES / "claude-code" / "stream_json_subagent.jsonl", "claude-code")
    bodies = [record.body for record in report.records]
    # The subagent's prompt opened an operator turn, and its Bash call and text read as the main agent's.
    assert not any(isinstance(b, TurnStarted) and b.trigger == "user_message" for b in bodies)
    own = [b for b in bodies if isinstance(b, Message | ToolIntent) and b.task_id is None]
    assert [b.tool for b in own if isinstance(b, ToolIntent)] == ["Task"]
    assert [b.text for b in own if isinstance(b, Message)] == [
        "I'll ask a subagent to find the config.",
        "Found it: app.toml.",
    ]
    # They are the Task call's task (its id), not the main agent's.
    theirs = [b for b in bodies if isinstance(b, Message | ToolIntent | ToolResult) and b.task_id is not None]
    assert {b.task_id for b in theirs} == {"toolu_task"}
    assert [type(b).__name__ for b in theirs] == ["Message", "ToolIntent", "ToolResult", "Message"]
    # The Task call and its result (the subagent's report) stay in one turn.
    task = [r for r in report.records if isinstance(r.body, ToolIntent | ToolResult)]
    assert {r.turn for r in task} == {0}
    assert report.turns == 1
    assert report.skipped == {}


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


# ---------------------------------------------------------------- openhands: V1 conversations

V1 = FIXTURES / "openhands" / "v1-conversation"


def _v1_events() -> list[dict[str, Any]]:
    return [json.loads(path.read_bytes()) for path in sorted((V1 / "events").iterdir())]


def test_v1_conversation_directory_imports() -> None:
    report = read_transcript(V1, "openhands")
    bodies = [record.body for record in report.records]
    assert bodies[0] == ExecutionEnvironment(extra={"session_id": "run 1"})
    assert isinstance(bodies[1], SystemPolicy)
    assert [t.name for t in bodies[1].tools] == ["terminal"]
    assert [b.input for b in bodies if isinstance(b, TurnStarted)] == ["List the files."]
    assert [(b.call_id, b.args) for b in bodies if isinstance(b, ToolIntent)] == [
        ("call_1", {"command": "ls"}),
        ("call_2", {"command": "rm -rf src"}),
    ]
    results = [(b.call_id, b.status, b.output) for b in bodies if isinstance(b, ToolResult)]
    assert results == [
        ("call_1", "ok", "README.md\nsrc"),
        ("call_2", "error", "Action rejected: Do not delete files"),
    ]
    assert [b.text for b in bodies if isinstance(b, Message) and b.role == "assistant"] == [
        "I'll run ls.",
        "The files are README.md and src.",
    ]
    assert report.skipped == {"event:ConversationStateUpdateEvent": 1}
    # The events directory itself reads the same.
    assert read_transcript(V1 / "events", "openhands").records == report.records


def test_v1_events_in_one_file_import_as_the_directory_does(tmp_path: Path) -> None:
    file = tmp_path / "events.json"
    file.write_text(json.dumps(_v1_events()))
    assert read_transcript(file, "openhands").records == read_transcript(V1, "openhands").records


def test_v1_condensation_summary_and_agent_error() -> None:
    events = [
        {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "go"}},
        {"kind": "Condensation", "source": "environment", "forgotten_event_ids": ["x"], "summary": "did A"},
        {"kind": "AgentErrorEvent", "tool_name": "x", "tool_call_id": "c9", "error": "bad"},
    ]
    bodies = [r.body for r in parse_as("openhands", json.dumps(events).encode()).records]
    assert ContextSummary(text="did A", source="openhands:condensation") in bodies
    assert Message(role="channel", channel="openhands:error", text="bad") in bodies


def test_v1_action_without_a_call_id_is_refused_naming_it() -> None:
    events = _v1_events()
    del events[2]["tool_call_id"]
    with pytest.raises(InvalidRecord, match=r"missing `tool_call_id`") as caught:
        parse_as("openhands", json.dumps(events).encode())
    assert caught.value.field == "[2].tool_call_id"


def test_v1_directory_with_a_missing_event_is_refused(tmp_path: Path) -> None:
    events = tmp_path / "conv" / "events"
    shutil.copytree(V1 / "events", events)
    next(events.glob("event-00003-*.json")).unlink()
    with pytest.raises(UsageError, match=r"has no event 00003 \(the next file is event-00004-"):
        read_transcript(tmp_path / "conv", "openhands")


def test_v1_directory_names_the_event_file_that_is_not_json(tmp_path: Path) -> None:
    events = tmp_path / "events"
    shutil.copytree(V1 / "events", events)
    bad = next(events.glob("event-00002-*.json"))
    bad.write_bytes(bad.read_bytes()[:40])
    with pytest.raises(InvalidRecord) as caught:
        read_transcript(events, "openhands")
    assert caught.value.where == str(bad)
