"""OpenAI chat importer: system policy with tools, joined tool calls, error results, tau-bench runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
from tests.cli_support import invoke
from tests.importers_support import (
    USER,
    declared,
    imported_tools,
    message_texts,
    parse_as,
    refused_import,
    tool_calls_of,
)

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


# ---------------------------------------------------------------- refusals, arguments, custom tools


@pytest.mark.parametrize("arguments", [5, [1, 2], True])
def test_openai_arguments_of_another_json_type_do_not_refuse_the_file(arguments: object) -> None:
    # `arguments` is a JSON string in the API; a runner that logged it decoded (or a model's
    # odd output) is still a call that happened, kept whole like an unparseable string.
    chat = json.dumps(
        [
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}},
                ],
            },
        ]
    ).encode()
    intents = [rec.body for rec in parse_as("openai-chat", chat).records if isinstance(rec.body, ToolIntent)]
    assert intents == [ToolIntent(call_id="c1", tool="f", args={"arguments": arguments})]


def test_an_openai_refusal_is_the_assistant_message() -> None:
    # A refusal is what the model said instead of content (`refusal` on the message, or a
    # `refusal` content part); dropping it lost the assistant's turn without a word.
    chat = json.dumps(
        [
            USER,
            {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            USER,
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "Nor that."}]},
        ]
    ).encode()
    report = parse_as("openai-chat", chat)
    assert message_texts(report) == ["fix it", "I can't help with that.", "fix it", "Nor that."]
    assert report.skipped == {}


def test_an_openai_custom_tool_call_is_a_call_with_its_text_input() -> None:
    # Chat completions with custom (free-form) tools write `{"type": "custom", "custom": {"name",
    # "input"}}` and no `function`: the whole file was refused ("missing `function`").
    chat = json.dumps(
        [
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": "*** Begin Patch"},
                    },
                    {"id": "c2", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Done!"},
            {"role": "tool", "tool_call_id": "c2", "content": "a.py"},
        ]
    ).encode()
    bodies = [rec.body for rec in parse_as("openai-chat", chat).records]
    assert [body for body in bodies if isinstance(body, ToolIntent)] == [
        ToolIntent(call_id="c1", tool="apply_patch", args={"input": "*** Begin Patch"}),
        ToolIntent(call_id="c2", tool="ls", args={}),
    ]
    results = [(body.call_id, body.tool, body.output) for body in bodies if isinstance(body, ToolResult)]
    assert results == [("c1", "apply_patch", "Done!"), ("c2", "ls", "a.py")]


# ---------------------------------------------------------------- messages the API allows

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


CALLED = {"role": "assistant", "content": None, "tool_calls": [CALL]}


@pytest.mark.parametrize(
    "chat",
    [
        [{"role": "user", "content": None}],
        [{"role": "user"}],
        [{"role": "system", "content": None}],
        [{"role": "developer"}],
        [USER, CALLED, {"role": "tool", "tool_call_id": "c1", "content": None}],
        [USER, {"role": "assistant", "content": None}],
        [USER, {"role": "assistant", "content": None, "tool_calls": []}],
    ],
)
def test_an_openai_message_without_content_is_refused_where_it_is(chat: list[dict[str, Any]]) -> None:
    # The chat API refuses these; imported, a user one opened a turn whose input was empty.
    index, role = len(chat) - 1, chat[-1]["role"]
    with pytest.raises(InvalidRecord, match=rf"field `\[{index}\]\.content`: an? `{role}` message needs"):
        parse_as("openai-chat", json.dumps(chat).encode())


@pytest.mark.parametrize(
    "standin",
    [
        {"tool_calls": [CALL]},
        {"function_call": {"name": "f", "arguments": "{}"}},
        {"refusal": "no"},
        {"audio": {"id": "audio_1"}},
    ],
)
def test_an_openai_assistant_message_may_say_something_else_than_content(standin: dict[str, Any]) -> None:
    chat = [USER, {"role": "assistant", "content": None} | standin]
    report = parse_as("openai-chat", json.dumps(chat).encode())
    assert report.records[0].body == ExecutionEnvironment(extra={"session_id": "run 1"})
    # A call's tool (CALL's, "f") that the chat never defined is declared before the turn.
    opening = [type(r.body).__name__ for r in report.records[1:3]]
    called = "tool_calls" in standin or "function_call" in standin
    assert opening == (["SystemPolicy", "TurnStarted"] if called else ["TurnStarted", "Message"])
    if "audio" in standin:
        assert report.skipped == {"audio": 1}


def test_an_openai_user_message_with_empty_text_still_opens_its_turn() -> None:
    # Empty text is content the API accepts: imported as it is, not refused like a null.
    report = parse_as("openai-chat", json.dumps([{"role": "user", "content": ""}]).encode())
    assert [type(r.body) for r in report.records][:3] == [ExecutionEnvironment, TurnStarted, Message]


# ---------------------------------------------------------------- fine-tuning JSON Lines

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


# ---------------------------------------------------------------- Responses API items


def _function_call(call_id: str | None, **extra: Any) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    } | extra


def _output(call_id: str, output: Any = "18C") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": output}


def test_responses_api_items_import_as_calls_and_results(tmp_path: Path) -> None:
    # What the Agents SDK's `to_input_list()` writes: messages with a `role`, and calls, outputs
    # and reasoning as items of their own. The whole file was refused at the first call item
    # ("not a chat message (no `role`)"), or, when it came first, read as a list of runs.
    items = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"id": "rs_1", "type": "reasoning", "summary": []},
        _function_call("call_1", id="fc_1", status="completed"),
        _output("call_1"),
        {"type": "custom_tool_call", "call_id": "call_2", "name": "apply_patch", "input": "*** Begin"},
        {
            "type": "custom_tool_call_output",
            "call_id": "call_2",
            "output": [{"type": "input_text", "text": "Done"}, {"type": "input_image", "image_url": "x"}],
        },
        {"id": "ws_1", "type": "web_search_call", "status": "completed"},
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "18C and sunny.", "annotations": []}],
        },
    ]
    data = json.dumps(items).encode()
    report = parse_as("openai-chat", data)
    bodies = [r.body for r in report.records]
    assert [b for b in bodies if isinstance(b, ToolIntent)] == [
        ToolIntent(call_id="call_1", tool="get_weather", args={"city": "Paris"}),
        ToolIntent(call_id="call_2", tool="apply_patch", args={"input": "*** Begin"}),
    ]
    assert [(b.call_id, b.output) for b in bodies if isinstance(b, ToolResult)] == [
        ("call_1", "18C"),
        ("call_2", "Done"),
    ]
    assert report.turns == 1 and report.skipped == {
        "content part:input_image": 1,
        "item:reasoning": 1,
        "item:web_search_call": 1,
    }
    assert imported_tools(tmp_path, "openai-chat", data) == [
        ("call_1", "get_weather", "ok"),
        ("call_2", "apply_patch", "ok"),
    ]
    # A list that starts with an item is still items, not runs.
    assert tool_calls_of(json.dumps(items[3:5]).encode(), "openai-chat") == [
        ("call_1", "get_weather", None),
        ("call_1", "get_weather", "18C"),
    ]


@pytest.mark.parametrize(
    ("item", "field", "message"),
    [
        (_function_call(None), "[1].call_id", "`function_call` item has no `call_id`"),
        (
            _output("call_1") | {"call_id": None},
            "[2].call_id",
            "`function_call_output` item has no `call_id`",
        ),
        (_function_call("call_1", name=""), "[1].name", "a `function_call` item has an empty `name`"),
        (_output("call_1", output=None), "[2].output", "missing `output`"),
        (_output("call_1", output=5), "[2].output", "expected an array, got a number"),
    ],
)
def test_a_malformed_responses_item_is_refused_naming_it(
    item: dict[str, Any], field: str, message: str, tmp_path: Path
) -> None:
    items: list[dict[str, Any]] = [USER, _function_call("call_1"), _output("call_1")]
    items[int(field[1])] = item
    data = json.dumps(items).encode()
    with pytest.raises(InvalidRecord, match=message) as caught:
        parse_as("openai-chat", data)
    assert caught.value.field == field
    refused_import(tmp_path, "openai-chat", data)


def test_responses_arguments_ids_and_unknown_outputs_follow_the_chat_rules() -> None:
    # `arguments` logged decoded is taken as it is, an unparseable string kept whole; a blank
    # call_id gets a derived id; an output for a call never made is an orphan (counted), and a
    # reused call_id is suffixed.
    items = [
        USER,
        _function_call("call_1", arguments={"city": "Paris"}),
        _function_call("", arguments="{not json"),
        _output("call_9"),
        _function_call("call_1"),
        _output("call_1", "first"),
        _output("", "blank"),
        _output("call_1", "second"),
    ]
    report = parse_as("openai-chat", json.dumps(items).encode())
    bodies = [r.body for r in report.records]
    assert [(b.call_id, b.args) for b in bodies if isinstance(b, ToolIntent)] == [
        ("call_1", {"city": "Paris"}),
        ("function_call-2", {"arguments": "{not json"}),
        ("call_1#2", {"city": "Paris"}),
    ]
    assert [(b.call_id, b.output) for b in bodies if isinstance(b, ToolResult)] == [
        ("call_1", "first"),
        ("function_call-2", "blank"),
        ("call_1#2", "second"),
    ]
    assert report.skipped == {"orphan tool result": 1}


def test_an_item_with_neither_role_nor_type_is_named() -> None:
    with pytest.raises(InvalidRecord, match=r"field `\[1\]`: not a chat message \(no `role`\) or Responses"):
        parse_as("openai-chat", json.dumps([USER, {"content": "x"}]).encode())


# ---------------------------------------------------------------- reasoning beside the content


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "reasoning_details"])
def test_openai_compatible_reasoning_is_counted_as_left_out(key: str) -> None:
    # DeepSeek, vLLM, OpenRouter and Ollama return the model's reasoning beside `content`; it
    # was dropped without a word, where Claude Code thinking is counted (`block:thinking`).
    value: object = [{"type": "reasoning.text", "text": "hmm"}] if key == "reasoning_details" else "hmm"
    chat = [USER, {"role": "assistant", "content": "Done.", key: value}]
    report = parse_as("openai-chat", json.dumps(chat).encode())
    assert report.skipped == {"reasoning": 1}
    assert [r.body.text for r in report.records if isinstance(r.body, Message)] == ["fix it", "Done."]


def test_an_empty_reasoning_field_is_nothing_left_out() -> None:
    chat = [USER, {"role": "assistant", "content": "Done.", "reasoning_content": None}]
    assert parse_as("openai-chat", json.dumps(chat).encode()).skipped == {}
