"""OpenAI chat importer: system policy with tools, joined tool calls, error results, tau-bench runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from holon.errors import InvalidRecord
from holon.importers import parse_openai_chat, read_transcript
from holon.records import (
    ExecutionEnvironment,
    Message,
    Record,
    SystemPolicy,
    ToolDefinition,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    encode_json_record,
)
from tests.importers_support import declared

FIXTURES = Path(__file__).parent.parent / "fixtures" / "importers" / "openai-chat"


def _records(name: str) -> list[Record]:
    return list(read_transcript(FIXTURES / name, "openai-chat").records)


def test_conversation_maps_to_exact_records() -> None:
    ask = "Cancel order A17, please."
    tools = (
        ToolDefinition(
            name="get_order",
            description="Look up an order.",
            parameters={
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        ),
        ToolDefinition(
            name="cancel_order",
            description="Cancel an order.",
            parameters={"type": "object", "properties": {"order_id": {"type": "string"}}},
        ),
    )
    bodies = [
        # The conversation names no run: it is the file's first.
        ExecutionEnvironment(extra={"session_id": "run 1"}),
        # refund_order is called but not among the conversation's tools: declared by name.
        SystemPolicy(
            text="You are a support agent. Confirm before cancelling.",
            tools=(*tools, *declared("refund_order")),
        ),
        TurnStarted(trigger="user_message", input=ask),
        Message(role="user", text=ask),
        Message(role="assistant", text="Let me look that up."),
        ToolIntent(call_id="call_1", tool="get_order", args={"order_id": "A17"}),
        # Unparseable arguments are kept whole rather than dropped.
        ToolIntent(call_id="call_2", tool="cancel_order", args={"arguments": '{"order_id": "A17"'}),
        ToolResult(
            call_id="call_1", tool="get_order", status="ok", output='{"id": "A17", "status": "shipped"}'
        ),
        ToolResult(
            call_id="call_2",
            tool="cancel_order",
            status="error",
            output="Error: order A17 has already shipped",
        ),
        Message(role="assistant", text="Order A17 has shipped, so it cannot be cancelled."),
        TurnEnded(outcome="completed"),
        TurnStarted(trigger="user_message", input="Then refund it."),
        Message(role="user", text="Then refund it."),
        ToolIntent(call_id="call_3", tool="refund_order", args={"order_id": "A17"}),
        TurnEnded(outcome="completed"),
    ]
    turns = [None, None, *[0] * 9, *[1] * 4]
    expected = [
        Record(body=b, ts=i * 1000, turn=t) for i, (b, t) in enumerate(zip(bodies, turns, strict=True))
    ]
    assert _records("conversation.json") == expected


def test_conversation_counts_and_skips() -> None:
    report = read_transcript(FIXTURES / "conversation.json", "openai-chat")
    assert (report.turns, report.tool_calls, report.unmatched_intents) == (2, 3, 1)
    assert report.skipped == {"content part:image_url": 1}


def test_tau_bench_runs_are_imported_in_order_with_unique_call_ids() -> None:
    records = _records("tau-bench-runs.json")
    kinds = [(r.turn, r.kind) for r in records]
    assert kinds == [
        (None, "execution_environment"),
        (None, "system_policy"),
        (0, "turn_started"),
        (0, "message"),
        (0, "tool_intent"),
        (0, "tool_result"),
        (0, "message"),
        (0, "turn_ended"),
        (None, "execution_environment"),
        (None, "system_policy"),
        (1, "turn_started"),
        (1, "message"),
        (1, "tool_intent"),
        (1, "tool_result"),
        (1, "turn_ended"),
    ]
    # Each run starts with the environment that names it: its task and trial.
    sessions = [r.body for r in records if isinstance(r.body, ExecutionEnvironment)]
    assert sessions == [
        ExecutionEnvironment(extra={"session_id": "task 0 trial 0"}),
        ExecutionEnvironment(extra={"session_id": "task 1 trial 0"}),
    ]
    pairs = [(r.body.call_id, r.body.tool) for r in records if isinstance(r.body, ToolIntent | ToolResult)]
    # Both runs used call_1; the second run's pair is renamed, never joined across runs.
    assert pairs == [
        ("call_1", "get_reservation"),
        ("call_1", "get_reservation"),
        ("call_1#2", "search_flights"),
        ("call_1#2", "search_flights"),
    ]


def test_tau_bench_s_unknown_action_answer_is_an_error() -> None:
    """tau-bench answers a call of a tool it does not have ``Unknown action <name>``: the call failed."""

    def call(call_id: str, name: str) -> dict[str, object]:
        function = {"name": name, "arguments": "{}"}
        return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "function": function}]}

    messages = [
        {"role": "user", "content": "cancel my trip"},
        call("c1", "cancel_trip"),
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "cancel_trip",
            "content": "Unknown action cancel_trip",
        },
        call("c2", "think"),
        # A tool's own output that merely mentions another name is its output.
        {"role": "tool", "tool_call_id": "c2", "name": "think", "content": "Unknown action cancel_trip"},
    ]
    report = parse_openai_chat(json.dumps(messages).encode(), source="t")
    results = [r.body for r in report.records if isinstance(r.body, ToolResult)]
    assert [(r.tool, r.status) for r in results] == [("cancel_trip", "error"), ("think", "ok")]


def test_legacy_function_call_is_joined_by_name() -> None:
    data = (
        b'[{"role": "user", "content": "weather?"},'
        b' {"role": "assistant", "content": null,'
        b' "function_call": {"name": "weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}},'
        b' {"role": "function", "name": "weather", "content": "rain"}]'
    )
    bodies = [r.body for r in parse_openai_chat(data, source="m.json").records]
    assert ToolIntent(call_id="function_call-1", tool="weather", args={"city": "Oslo"}) in bodies
    assert ToolResult(call_id="function_call-1", tool="weather", status="ok", output="rain") in bodies


def test_same_bytes_give_byte_identical_records() -> None:
    assert [encode_json_record(r) for r in _records("conversation.json")] == [
        encode_json_record(r) for r in _records("conversation.json")
    ]


def test_malformed_document_is_named() -> None:
    with pytest.raises(InvalidRecord, match=r"malformed\.json: not a JSON document"):
        read_transcript(FIXTURES / "malformed.json", "openai-chat")


def test_wrong_shape_names_the_entry() -> None:
    with pytest.raises(InvalidRecord) as info:
        read_transcript(FIXTURES / "wrong-shape.json", "openai-chat")
    assert info.value.field == "[2].tool_call_id"
    assert "missing `tool_call_id`" in str(info.value)


def test_other_format_is_refused_with_a_hint() -> None:
    swe = Path(__file__).parent.parent / "fixtures" / "importers" / "swe-agent" / "function-calling.traj"
    with pytest.raises(InvalidRecord, match=r"not an OpenAI chat transcript.*--from openai-chat"):
        read_transcript(swe, "openai-chat")
