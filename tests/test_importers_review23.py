"""Importers against what users feed them: fine-tuning JSON Lines, torn Claude Code sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.records import (
    ExecutionEnvironment,
    SystemPolicy,
    ToolDefinition,
    ToolIntent,
    ToolResult,
    TurnStarted,
    encode_json_record,
)
from tests.cli_support import invoke
from tests.importers_support import claude_jsonl, parse_as

# ---------------------------------------------------------------- openai-chat: fine-tuning JSON Lines

_WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def _example(question: str, city: str) -> dict[str, Any]:
    """A fine-tuning example: a question, a call (always id `call_1`), its result, the answer."""
    return {
        "messages": [
            {"role": "user", "content": question},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": json.dumps({"city": city})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": f"sunny in {city}"},
            {"role": "assistant", "content": f"It is sunny in {city}.", "weight": 1},
        ],
        "tools": [_WEATHER],
        "parallel_tool_calls": False,
    }


def _lines(*objects: dict[str, Any]) -> bytes:
    return ("\n".join(json.dumps(o) for o in objects) + "\n").encode()


def test_a_fine_tuning_file_imports_one_conversation_per_line() -> None:
    # OpenAI's fine-tuning files (and most chat datasets) are JSON Lines, one {"messages", "tools"}
    # conversation per line. They were refused: "not a JSON document (trailing characters)".
    report = parse_as("openai-chat", _lines(_example("Paris?", "Paris"), _example("Rome?", "Rome")))
    assert report.turns == 2 and report.tool_calls == 2 and report.unmatched_intents == 0
    assert report.skipped == {}
    intents = [r.body for r in report.records if isinstance(r.body, ToolIntent)]
    results = [r.body for r in report.records if isinstance(r.body, ToolResult)]
    # Each line is a run of its own: line 2's result answers line 2's call, not line 1's.
    assert [(i.call_id, i.args["city"]) for i in intents] == [("call_1", "Paris"), ("call_1#2", "Rome")]
    assert [(r.call_id, r.output) for r in results] == [
        ("call_1", "sunny in Paris"),
        ("call_1#2", "sunny in Rome"),
    ]
    starts = [r.body.input for r in report.records if isinstance(r.body, TurnStarted)]
    assert starts == ["Paris?", "Rome?"]


def test_a_fine_tuning_file_imports_through_the_cli_the_same_every_time(tmp_path: Path) -> None:
    data = _lines(_example("Paris?", "Paris"), _example("Rome?", "Rome"))
    first = [encode_json_record(r) for r in parse_as("openai-chat", data).records]
    assert first == [encode_json_record(r) for r in parse_as("openai-chat", data).records]
    file = tmp_path / "train.jsonl"
    file.write_bytes(data)
    assert invoke("init", tmp_path / "L", "--agent-id", "a1").exit_code == 0
    result = invoke("import", tmp_path / "L", file, "--from", "openai-chat")
    assert result.exit_code == 0, result.stderr
    assert "2 turns, 2 tool calls (0 without a result)" in result.stdout


def test_tools_without_a_system_message_are_a_policy_before_the_conversation() -> None:
    # The tools-only policy was emitted after the conversation's last message, inside its last
    # turn: a prompt rendered at any earlier point had no tools, though they were offered from the start.
    report = parse_as("openai-chat", json.dumps(_example("Paris?", "Paris")).encode())
    session, first = report.records[:2]
    assert (session.body, session.turn) == (ExecutionEnvironment(extra={"session_id": "run 1"}), None)
    assert first.turn is None
    assert first.body == SystemPolicy(
        text="", tools=(ToolDefinition(name="get_weather", description="", parameters={"type": "object"}),)
    )
    assert sum(isinstance(r.body, SystemPolicy) for r in report.records) == 1


def test_legacy_functions_are_the_conversations_tools() -> None:
    # The legacy fine-tuning form lists the tools as `functions`; they were dropped without a word.
    legacy = {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
        "functions": [{"name": "get_weather", "description": "Weather.", "parameters": {"type": "object"}}],
    }
    records = parse_as("openai-chat", _lines(legacy, legacy)).records
    policies = [r.body for r in records if isinstance(r.body, SystemPolicy)]
    assert [tool.name for policy in policies for tool in policy.tools] == ["get_weather", "get_weather"]


def test_a_line_that_is_one_message_is_refused_saying_how_to_write_it() -> None:
    data = _lines({"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"})
    with pytest.raises(InvalidRecord) as info:
        parse_as("openai-chat", data)
    assert str(info.value).startswith("invalid record at line 1 of t: not an OpenAI chat conversation")
    expected = "this line is one chat message, and a conversation's messages go in one JSON array"
    assert expected in str(info.value)


def test_another_tools_json_lines_are_refused_at_their_first_line_with_the_hint() -> None:
    claude = _lines({"type": "user", "message": {"role": "user", "content": "hi"}}, {"type": "x"})
    refused = r"at line 1 of t: not an OpenAI chat conversation.*--from openai-chat"
    with pytest.raises(InvalidRecord, match=refused):
        parse_as("openai-chat", claude)


def test_a_fine_tuning_file_cut_mid_line_says_so() -> None:
    data = _lines(_example("Paris?", "Paris"))[:-1] + b'\n{"messages": [{"role": "us'
    with pytest.raises(InvalidRecord) as info:
        parse_as("openai-chat", data)
    message = str(info.value)
    assert message.startswith("invalid record at line 2 of t:")
    assert "ends in the middle of its last line" in message
    assert "--from" not in message


@pytest.mark.parametrize(
    "data",
    [
        b'[\n  {"role": "user", "content": "Hello"},\n  {"role": "assistant", "content": "Hi"\n',
        b'[{"role": "user", "content": "Hello"}',
    ],
)
def test_a_cut_off_document_is_still_reported_as_one(data: bytes) -> None:
    cut = r"^invalid record at t: not a JSON document .*ends in the middle of it"
    with pytest.raises(InvalidRecord, match=cut):
        parse_as("openai-chat", data)


# ---------------------------------------------------------------- claude-code: a session a crash tore

_EVENTS: tuple[dict[str, Any], ...] = (
    {"type": "user", "message": {"role": "user", "content": "list the files"}},
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
        },
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
        },
    },
    {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "a.py"}]}},
)


def _claude_lines(torn: bytes, *, at: int) -> bytes:
    """The session of _EVENTS (uuids, timestamps) with the line ``torn`` put before line ``at`` (1-based)."""
    lines = claude_jsonl(*_EVENTS).split(b"\n")
    return b"\n".join([*lines[: at - 1], torn, *lines[at - 1 :]])


@pytest.mark.parametrize(
    "torn",
    [
        # A write cut short, and the next event appended right after it on the same line.
        b'{"type":"file-history-snapshot","messageId":"m1","snapsh{"type":"pr-link","sessionId":"s1"}',
        b"\x00" * 300,  # the NUL bytes a crashed append leaves on ext4
        b'{"type":"progress","data":{"out',  # cut short, with the session's later events after it
    ],
)
def test_a_line_a_crash_tore_is_counted_and_the_session_imported(tmp_path: Path, torn: bytes) -> None:
    # Claude Code skips such a line when it resumes the session (v2.1.121). The import refused the
    # whole file ("line 3: not a JSON value (...); is this really a Claude Code transcript?").
    data = _claude_lines(torn, at=3)
    report = parse_as("claude-code", data)
    assert report.skipped == {"unreadable line": 1}
    assert report.turns == 1 and report.tool_calls == 1 and report.unmatched_intents == 0
    assert [encode_json_record(r) for r in report.records] == [
        encode_json_record(r) for r in parse_as("claude-code", claude_jsonl(*_EVENTS)).records
    ]
    file = tmp_path / "s.jsonl"
    file.write_bytes(data)
    assert invoke("init", tmp_path / "L", "--agent-id", "a1").exit_code == 0
    result = invoke("import", tmp_path / "L", file, "--from", "claude-code")
    assert result.exit_code == 0, result.stderr
    assert "skipped: unreadable line 1" in result.stdout


def test_a_first_line_that_is_not_json_still_questions_the_format() -> None:
    # The first line decides the format: a pretty-printed document given as a session is refused.
    data = json.dumps({"history": [], "trajectory": []}, indent=2).encode()
    with pytest.raises(InvalidRecord, match=r"at line 1 of t: not a JSON value .*--from claude-code"):
        parse_as("claude-code", data)
    with pytest.raises(InvalidRecord, match=r"at line 1 of t: not a JSON value .*--from claude-code"):
        parse_as("claude-code", _claude_lines(b"{\x01", at=1))


def test_a_last_line_cut_off_and_a_line_not_utf8_are_still_refused() -> None:
    whole = claude_jsonl(*_EVENTS)
    with pytest.raises(InvalidRecord, match=r"at line 5 of t: .*ends in the middle of its last line"):
        parse_as("claude-code", whole + b'{"type":"user","message":{"ro')
    with pytest.raises(InvalidRecord, match=r"at line 3 of t: not UTF-8 text \(byte 0xe9"):
        parse_as("claude-code", _claude_lines(b'{"type":"x","t":"caf\xe9"}', at=3))


def test_a_damaged_line_with_nothing_read_after_it_is_still_refused() -> None:
    # Nothing shows the session went on past it: it is refused, naming it, as before.
    whole = claude_jsonl(*_EVENTS)
    with pytest.raises(InvalidRecord, match=r"at line 5 of t: not a JSON value"):
        parse_as("claude-code", whole + b'{"type": "progr\n{"type": "us\n\n')


@pytest.mark.parametrize("tail", [b"\x00" * 40 + b"\n", b"\x00" * 4096, b"\n" + b"\x00" * 10 + b"\n\x00\x00"])
def test_only_nul_bytes_after_the_last_event_are_passed_over(tail: bytes) -> None:
    # A power loss leaves a file whose size reached the disk and whose data did not: zeros after
    # the last event. No writer still at work writes them, so they are counted, not refused; the
    # import said "not a JSON value ...; is this really a Claude Code transcript?" after 97 good lines.
    whole = claude_jsonl(*_EVENTS)
    report = parse_as("claude-code", whole + tail)
    assert sum(report.skipped.values()) == report.skipped["unreadable line"] >= 1
    assert report.records == parse_as("claude-code", whole).records
