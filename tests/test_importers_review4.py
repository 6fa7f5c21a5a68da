"""Fourth review of the transcript importers: blank call ids and tool names, Responses API items."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.ledger import Ledger
from holon.projections import fold
from holon.records import ToolIntent, ToolResult
from tests.cli_support import invoke, tree_bytes
from tests.importers_support import USER, claude_jsonl, parse_as

SUFFIX = {"claude-code": "jsonl", "openai-chat": "json", "swe-agent": "traj", "openhands": "json"}


def _calls(data: bytes, fmt: str) -> list[tuple[str, str, str | None]]:
    """(call id, tool, output or None for an intent) of every tool record ``fmt`` makes of ``data``."""
    out: list[tuple[str, str, str | None]] = []
    for record in parse_as(fmt, data).records:
        if isinstance(record.body, ToolIntent):
            out.append((record.body.call_id, record.body.tool, None))
        elif isinstance(record.body, ToolResult):
            out.append((record.body.call_id, record.body.tool, record.body.output))
    return out


def _imported(tmp_path: Path, fmt: str, data: bytes) -> list[tuple[str, str, str]]:
    """Import ``data`` through the CLI, verify the ledger, and fold it: (call id, tool, outcome)."""
    ledger, file = tmp_path / "L", tmp_path / f"t.{SUFFIX[fmt]}"
    file.write_bytes(data)
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    result = invoke("import", ledger, file, "--from", fmt)
    assert result.exit_code == 0, result.stderr
    assert invoke("verify", ledger).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        state = fold(opened.read())
    return [(ex.call_id, ex.tool, ex.outcome) for ex in state.runtime.tools]


def _refused(tmp_path: Path, fmt: str, data: bytes) -> str:
    """Import ``data`` into a ledger holding a session; assert it is refused with nothing written."""
    ledger, file = tmp_path / "L", tmp_path / f"t.{SUFFIX[fmt]}"
    file.write_bytes(data)
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    before = tree_bytes(ledger)
    result = invoke("import", ledger, file, "--from", fmt)
    assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
    assert tree_bytes(ledger) == before
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


# ---------------------------------------------------------------- blank ids and names


def _chat(call_id: str, name: str, answer_id: str | None = None) -> bytes:
    answer = call_id if answer_id is None else answer_id
    return json.dumps([
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": answer, "content": "a.py"},
    ]).encode()


def _claude(call_id: str, name: str, answer_id: str | None = None) -> bytes:
    answer = call_id if answer_id is None else answer_id
    return claude_jsonl(
        {"type": "user", "message": USER},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": {}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": answer, "content": "a.py"}]}},
    )


def _swe(call_id: str, name: str, answer_id: str | None = None) -> bytes:
    answer = call_id if answer_id is None else answer_id
    return json.dumps({"history": [
        USER,
        {"role": "assistant", "content": "Look.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "content": "a.py", "tool_call_ids": [answer]},
    ]}).encode()


def _openhands(call_id: str, name: str, action: str = "run") -> bytes:
    return json.dumps([
        {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 2, "source": "agent", "action": action, "args": {"command": "ls"},
         "tool_call_metadata": {"function_name": name, "tool_call_id": call_id}},
        {"id": 3, "cause": 2, "source": "agent", "observation": "run", "content": "a.py"},
    ]).encode()


BUILDERS = {"openai-chat": _chat, "claude-code": _claude, "swe-agent": _swe}
FIELDS = {
    "openai-chat": r"\[1\]\.tool_calls\[0\]\.function\.name",
    "claude-code": r"message\.content\[0\]\.name",
    "swe-agent": r"history\[1\]\.tool_calls\[0\]\.function\.name",
}


@pytest.mark.parametrize("name", ["", "  "])
@pytest.mark.parametrize("fmt", sorted(BUILDERS))
def test_a_tool_call_with_a_blank_name_is_refused_where_it_is(fmt: str, name: str, tmp_path: Path) -> None:
    # Imported as a call to tool "", rendered as `call c1  {}`: no format's API writes or accepts a
    # call to no tool. The refusal names the field, and asks nothing about --from: the format is right.
    data = BUILDERS[fmt]("c1", name)
    with pytest.raises(InvalidRecord, match=FIELDS[fmt]) as caught:
        parse_as(fmt, data)
    blank = "an empty" if not name else "a blank (whitespace-only)"
    assert f"has {blank} `name`" in str(caught.value) and "fix or remove the call" in str(caught.value)
    assert "--from" not in str(caught.value)
    assert "name" in _refused(tmp_path, fmt, data)


@pytest.mark.parametrize(
    ("field", "data"),
    [
        ("message.content[0].id", _claude("", "Bash", answer_id="t1")),
        ("message.content[0].id", _claude(" ", "Bash")),
        ("message.content[0].tool_use_id", _claude("t1", "Bash", answer_id="")),
    ],
)
def test_a_claude_code_blank_call_id_is_refused(field: str, data: bytes, tmp_path: Path) -> None:
    # The Messages API gives every tool_use an id (`toolu_...`) and refuses a blank one: such a
    # file was edited or written by something else, and a blank id joins nothing reliably.
    with pytest.raises(InvalidRecord, match="the Messages API gives every tool call an id") as caught:
        parse_as("claude-code", data)
    assert caught.value.field == field and "--from" not in str(caught.value)
    _refused(tmp_path, "claude-code", data)


@pytest.mark.parametrize("blank", ["", "   "])
@pytest.mark.parametrize(("fmt", "derived"), [("openai-chat", "tool_call-1.0"), ("swe-agent", "action-0.0")])
def test_an_openai_style_blank_call_id_gets_a_derived_one(
    fmt: str, derived: str, blank: str, tmp_path: Path
) -> None:
    # Gemini's OpenAI-compatible endpoint and LM Studio send `"id": ""`, and runners answer with
    # `"tool_call_id": ""`. Imported, the call got holon call id "" (a second one "#2"). It gets a
    # deterministic id from its place, and its blank-id result still answers it.
    data = BUILDERS[fmt](blank, "ls")
    assert _calls(data, fmt) == [(derived, "ls", None), (derived, "ls", "a.py")]
    assert _imported(tmp_path, fmt, data) == [(derived, "ls", "ok")]


def test_blank_call_ids_answer_in_order_and_never_a_call_that_has_an_id() -> None:
    chat = json.dumps([
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c9", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            {"id": "", "type": "function", "function": {"name": "c", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "", "content": "1"},
        {"role": "tool", "tool_call_id": " ", "content": "2"},
        {"role": "tool", "tool_call_id": "", "content": "3"},
    ]).encode()
    report = parse_as("openai-chat", chat)
    results = [(r.body.call_id, r.body.output) for r in report.records if isinstance(r.body, ToolResult)]
    # The third blank-id result has no id-less call left: an orphan, not an answer to c9.
    assert results == [("tool_call-1.0", "1"), ("tool_call-1.2", "2")]
    assert report.skipped == {"orphan tool result": 1} and report.unmatched_intents == 1


@pytest.mark.parametrize(("call_id", "name"), [("", "execute_bash"), ("  ", "execute_bash"), ("c1", " ")])
def test_openhands_blank_call_metadata_falls_back_to_the_action(
    call_id: str, name: str, tmp_path: Path
) -> None:
    # OpenHands joins an observation to its action by `cause`; the metadata only labels the call.
    # A blank tool_call_id already fell back to the event id, but a whitespace one was kept, and
    # a blank function_name made a call to tool "".
    data = _openhands(call_id, name)
    expected_id = call_id if call_id.strip() else "2"
    expected_tool = name if name.strip() else "run"
    assert _calls(data, "openhands") == [
        (expected_id, expected_tool, None), (expected_id, expected_tool, "a.py")
    ]
    assert _imported(tmp_path, "openhands", data) == [(expected_id, expected_tool, "ok")]


def test_an_openhands_action_with_no_name_is_refused(tmp_path: Path) -> None:
    data = _openhands("c1", "execute_bash", action=" ")
    with pytest.raises(InvalidRecord, match="an OpenHands action with no name") as caught:
        parse_as("openhands", data)
    assert caught.value.field == "[1].action"
    _refused(tmp_path, "openhands", data)


# ---------------------------------------------------------------- Responses API items


def _function_call(call_id: str | None, **extra: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "get_weather",
            "arguments": '{"city": "Paris"}'} | extra


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
        {"type": "custom_tool_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "Done"}, {"type": "input_image", "image_url": "x"}]},
        {"id": "ws_1", "type": "web_search_call", "status": "completed"},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "18C and sunny.", "annotations": []}]},
    ]
    data = json.dumps(items).encode()
    report = parse_as("openai-chat", data)
    bodies = [r.body for r in report.records]
    assert [b for b in bodies if isinstance(b, ToolIntent)] == [
        ToolIntent(call_id="call_1", tool="get_weather", args={"city": "Paris"}),
        ToolIntent(call_id="call_2", tool="apply_patch", args={"input": "*** Begin"}),
    ]
    assert [(b.call_id, b.output) for b in bodies if isinstance(b, ToolResult)] == [
        ("call_1", "18C"), ("call_2", "Done")
    ]
    assert report.turns == 1 and report.skipped == {
        "content part:input_image": 1, "item:reasoning": 1, "item:web_search_call": 1
    }
    assert _imported(tmp_path, "openai-chat", data) == [
        ("call_1", "get_weather", "ok"), ("call_2", "apply_patch", "ok")
    ]
    # A list that starts with an item is still items, not runs.
    assert _calls(json.dumps(items[3:5]).encode(), "openai-chat") == [
        ("call_1", "get_weather", None), ("call_1", "get_weather", "18C")
    ]


@pytest.mark.parametrize(
    ("item", "field", "message"),
    [
        (_function_call(None), "[1].call_id", "`function_call` item has no `call_id`"),
        (_output("call_1") | {"call_id": None},
         "[2].call_id", "`function_call_output` item has no `call_id`"),
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
    _refused(tmp_path, "openai-chat", data)


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
        ("call_1", "first"), ("function_call-2", "blank"), ("call_1#2", "second")
    ]
    assert report.skipped == {"orphan tool result": 1}


def test_an_item_with_neither_role_nor_type_is_named() -> None:
    with pytest.raises(InvalidRecord, match=r"field `\[1\]`: not a chat message \(no `role`\) or Responses"):
        parse_as("openai-chat", json.dumps([USER, {"content": "x"}]).encode())


# ---------------------------------------------------------------- cut-off files


OPENHANDS_EVENTS = [
    {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
    {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls", "thought": ""}},
    {"id": 3, "cause": 2, "source": "agent", "observation": "run", "content": "a.py"},
]


@pytest.mark.parametrize(
    "document", [OPENHANDS_EVENTS, {"instance_id": "x", "history": OPENHANDS_EVENTS}], ids=["events", "run"]
)
def test_a_pretty_printed_openhands_file_cut_off_says_so(document: object, tmp_path: Path) -> None:
    # A trajectory OpenHands writes with indent=2, copied while still being written: it was read as
    # JSON Lines and refused at "line 1" (a lone `[` or `{`) asking whether --from was right.
    data = json.dumps(document, indent=2).encode()
    assert _calls(data, "openhands") == [("2", "run", None), ("2", "run", "a.py")]
    cut = data[: len(data) * 2 // 3]
    with pytest.raises(InvalidRecord) as caught:
        parse_as("openhands", cut)
    message = str(caught.value)
    assert message.startswith("invalid record at t: ") and "ends in the middle of it" in message
    assert "--from" not in message and "line 1" not in message
    assert "copied while still being written" in _refused(tmp_path, "openhands", cut)
    # JSON Lines (one run per line) still names the line that was cut.
    lines = json.dumps({"history": OPENHANDS_EVENTS}).encode() + b"\n"
    with pytest.raises(InvalidRecord, match=r"at line 2 of t: .*ends in the middle of its last line"):
        parse_as("openhands", lines + lines[:-20])


# ---------------------------------------------------------------- holon JSONL


def test_holon_jsonl_with_a_byte_order_mark_appends(tmp_path: Path) -> None:
    # Every other format ignores a leading BOM (a file re-saved by a Windows tool); holon's own
    # JSONL refused it as "JSON is malformed: invalid character (byte 0)", in `holon append` too.
    records = [
        {"seq": 0, "ts": 1, "turn": 0, "kind": "turn_started", "v": 1,
         "body": {"trigger": "user_message", "input": "fix it"}},
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
