"""Request bodies the providers accept: a checker of their documented rules.

A daemon passes the adapters' output straight to the provider, so each body must pass
the request validation of the Anthropic Messages API and of OpenAI Chat Completions /
Responses. :func:`check_anthropic`, :func:`check_openai_chat` and
:func:`check_openai_responses` encode the rules a body can break (the roles and their
order, non-blank text blocks, at most four ``cache_control`` breakpoints, tool names and
schemas, the length of the routing fields, tool calls answered by their results);
:func:`check_all` runs all three on one prompt. No tests here: tests/test_context_adapters.py
drives them over the fixture ledgers, generated sessions and runs, and edge cases, and
the rendering properties call them on every prompt they draw.
"""

from __future__ import annotations

import json
import re
from typing import Any

from holon.context import Prompt, cache_last_block, to_anthropic_messages, to_openai_chat, to_openai_responses

#: Tool names both providers accept (Anthropic's and OpenAI's function-name pattern).
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: Anthropic's pattern for a tool_use id; OpenAI's longest Chat Completions tool call id.
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
OPENAI_CALL_ID_MAX = 40
#: Anthropic's limit on ``metadata.user_id``; OpenAI's on ``prompt_cache_key``.
ANTHROPIC_USER_ID_MAX = 256
OPENAI_CACHE_KEY_MAX = 64


def _nonblank_text(where: str, text: object) -> None:
    assert isinstance(text, str), f"{where}: text is {type(text).__name__}"
    # Anthropic: "text content blocks must contain non-whitespace text".
    assert text.strip(), f"{where}: empty or whitespace-only text block {text!r}"


def _check_schema(where: str, schema: object) -> None:
    assert isinstance(schema, dict), f"{where}: schema is not an object"
    # Both providers require a tool's input schema to be of type object.
    assert schema.get("type") == "object", f"{where}: schema type is {schema.get('type')!r}, not 'object'"


def check_anthropic(request: dict[str, Any]) -> None:
    """Assert that ``request`` passes the Anthropic Messages API's validation."""
    json.dumps(request)
    assert isinstance(request.get("model"), str) and request["model"]
    assert isinstance(request.get("max_tokens"), int) and request["max_tokens"] >= 1
    marks = 0
    names = []
    for i, tool in enumerate(request.get("tools", [])):
        assert TOOL_NAME.match(tool["name"]), f"tools.{i}.name {tool['name']!r}"
        names.append(tool["name"])
        _check_schema(f"tools.{i}.input_schema", tool["input_schema"])
        marks += "cache_control" in tool
    assert len(names) == len(set(names)), f"tool names are not unique: {names}"
    system = request.get("system")
    if isinstance(system, str):
        _nonblank_text("system", system)
    elif system is not None:
        assert isinstance(system, list) and system, "system must be a string or a non-empty list"
        for i, block in enumerate(system):
            assert block["type"] == "text", f"system.{i} is a {block['type']} block"
            _nonblank_text(f"system.{i}", block["text"])
            marks += "cache_control" in block
    messages = request["messages"]
    assert messages, "at least one message is required"
    assert messages[0]["role"] == "user", "the first message must be the user's"
    pending: set[str] = set()  # tool_use ids the next user message must answer
    used: set[str] = set()
    for i, msg in enumerate(messages):
        role, content = msg["role"], msg["content"]
        assert role in ("user", "assistant"), f"messages.{i}.role {role!r}"
        if i:
            assert role != messages[i - 1]["role"], f"messages.{i}: roles must alternate"
        final_assistant = role == "assistant" and i == len(messages) - 1
        if isinstance(content, str):
            if final_assistant and not content:
                continue  # "except for the optional final assistant message"
            _nonblank_text(f"messages.{i}.content", content)
            content = [{"type": "text", "text": content}]
        assert content or final_assistant, f"messages.{i}: content must not be empty"
        answered: set[str] = set()
        seen_other = False
        for j, block in enumerate(content):
            where = f"messages.{i}.content.{j}"
            marks += "cache_control" in block
            kind = block["type"]
            if kind == "text":
                _nonblank_text(where, block["text"])
                seen_other = True
            elif kind == "tool_use":
                assert role == "assistant", f"{where}: tool_use outside an assistant message"
                assert TOOL_USE_ID.match(block["id"]), f"{where}.id {block['id']!r}"
                assert block["id"] not in used, f"{where}.id {block['id']!r} is used twice"
                assert isinstance(block["input"], dict), f"{where}.input is not an object"
                assert names, f"{where}: a tool_use block in a request that defines no tools"
                used.add(block["id"])
                pending.add(block["id"])
            elif kind == "tool_result":
                assert role == "user", f"{where}: tool_result outside a user message"
                assert not seen_other, f"{where}: tool_result blocks must come first"
                assert block["tool_use_id"] in pending, f"{where}: answers no tool_use of the message before"
                answered.add(block["tool_use_id"])
            else:
                seen_other = True
        if role == "user" and i:
            assert answered == pending, f"messages.{i}: tool_use ids {sorted(pending - answered)} unanswered"
            pending = set()
    assert messages[-1]["role"] == "assistant" or not pending
    assert marks <= 4, f"{marks} cache_control breakpoints; Anthropic accepts at most 4"
    metadata = request.get("metadata")
    if metadata is not None:
        user_id = metadata["user_id"]
        assert isinstance(user_id, str) and len(user_id) <= ANTHROPIC_USER_ID_MAX, (
            f"metadata.user_id has {len(user_id)} characters; at most {ANTHROPIC_USER_ID_MAX}"
        )


def _check_openai_tools(tools: list[dict[str, Any]], *, nested: bool) -> None:
    names = []
    for i, tool in enumerate(tools):
        assert tool["type"] == "function"
        fn = tool["function"] if nested else tool
        assert TOOL_NAME.match(fn["name"]), f"tools.{i}.name {fn['name']!r}"
        names.append(fn["name"])
        _check_schema(f"tools.{i}.parameters", fn["parameters"])
    assert len(names) == len(set(names)), f"tool names are not unique: {names}"


def _check_cache_key(request: dict[str, Any]) -> None:
    key = request.get("prompt_cache_key")
    if key is not None:
        assert isinstance(key, str) and len(key) <= OPENAI_CACHE_KEY_MAX, (
            f"prompt_cache_key has {len(key)} characters; OpenAI accepts at most {OPENAI_CACHE_KEY_MAX}"
        )


def check_openai_chat(request: dict[str, Any]) -> None:
    """Assert that ``request`` passes OpenAI Chat Completions' validation."""
    json.dumps(request)
    assert isinstance(request.get("model"), str) and request["model"]
    messages = request["messages"]
    assert messages
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        role = msg["role"]
        assert role in ("system", "developer", "user", "assistant", "tool"), f"messages.{i}.role {role!r}"
        if role == "tool":
            assert msg["tool_call_id"] in pending, f"messages.{i}: answers no pending tool call"
            assert isinstance(msg["content"], str), f"messages.{i}.content is not text"
            pending.discard(msg["tool_call_id"])
            continue
        assert not pending, f"messages.{i}: tool calls {sorted(pending)} have no tool message"
        if role in ("system", "developer", "user"):
            assert isinstance(msg.get("content"), str | list), f"messages.{i}.content is null"
        if role == "assistant":
            pending = {call["id"] for call in msg.get("tool_calls", [])}
            for call in msg.get("tool_calls", []):
                assert 0 < len(call["id"]) <= OPENAI_CALL_ID_MAX, f"messages.{i}: tool call id {call['id']!r}"
                assert call["type"] == "function"
                assert isinstance(json.loads(call["function"]["arguments"]), dict)
            assert msg.get("content") is not None or pending
    assert not pending, f"tool calls {sorted(pending)} have no tool message"
    _check_openai_tools(request.get("tools", []), nested=True)
    _check_cache_key(request)


def check_openai_responses(request: dict[str, Any]) -> None:
    """Assert that ``request`` passes OpenAI Responses' validation (the parts holon writes)."""
    json.dumps(request)
    assert isinstance(request.get("model"), str) and request["model"]
    assert request["input"]
    pending: set[str] = set()  # function calls whose output must come next
    for i, item in enumerate(request["input"]):
        kind = item.get("type", "message")
        if kind == "function_call":
            assert 0 < len(item["call_id"]) <= OPENAI_CALL_ID_MAX, f"input.{i}.call_id {item['call_id']!r}"
            assert isinstance(json.loads(item["arguments"]), dict), f"input.{i}.arguments"
            pending.add(item["call_id"])
            continue
        if kind == "function_call_output":
            assert item["call_id"] in pending, f"input.{i}: the output of no call before it"
            assert isinstance(item["output"], str), f"input.{i}.output is not text"
            pending.discard(item["call_id"])
            continue
        assert not pending, f"input.{i}: calls {sorted(pending)} have no output before it"
        assert item["role"] in ("system", "developer", "user", "assistant"), f"input.{i}.role"
        assert isinstance(item["content"], str | list), f"input.{i}.content is null"
    assert not pending, f"calls {sorted(pending)} have no output"
    _check_openai_tools(request.get("tools", []), nested=False)
    _check_cache_key(request)


def check_all(prompt: Prompt) -> None:
    """Every adapter's body for ``prompt`` passes its provider's checks, and reads the same text."""
    anthropic = to_anthropic_messages(prompt, model="claude-sonnet-5-5", max_tokens=1_000)
    check_anthropic(anthropic)
    # The rounds a daemon appends in a turn keep the body valid once the end mark moves.
    messages = json.loads(json.dumps(anthropic["messages"]))
    if "tools" in anthropic:
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}},
                ],
            }
        )
        messages.append(
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]}
        )
    else:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Looking."}]})
        messages.append({"role": "user", "content": "Go on."})
    check_anthropic({**anthropic, "messages": cache_last_block(messages)})
    chat = to_openai_chat(prompt, model="gpt-5.5")
    check_openai_chat(chat)
    responses = to_openai_responses(prompt, model="gpt-5.5")
    check_openai_responses(responses)
    # No adapter changes what the model reads: every line of the prompt is in a text or a
    # tool result, and the history's tool calls are native, with their arguments, in order.
    calls = [call for s in prompt.sections for call in s.calls]
    call_lines = {s.text[c.start : c.result - 1] for s in prompt.sections for c in s.calls}
    lines = [
        line for s in prompt.sections if s.name != "tools" for line in s.text.split("\n") if line.strip()
    ]
    native = bool(prompt.tools)
    blocks = [b for m in anthropic["messages"] for b in m["content"]]
    anthropic_text = "\n".join(
        [b["text"] for b in anthropic.get("system", [])]
        + [b.get("text") or b.get("content") or "" for b in blocks if b["type"] != "tool_use"]
    )
    uses = [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"]
    chat_text = "\n".join(m["content"] for m in chat["messages"] if m.get("content"))
    chat_uses = [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for m in chat["messages"]
        for c in m.get("tool_calls", [])
    ]
    items = responses["input"]
    responses_text = "\n".join(i.get("content") or i.get("output") or "" for i in items)
    responses_uses = [
        (i["name"], json.loads(i["arguments"])) for i in items if i.get("type") == "function_call"
    ]
    expected = [(c.tool, c.arguments) for c in calls] if native else []
    for text, used in ((anthropic_text, uses), (chat_text, chat_uses), (responses_text, responses_uses)):
        assert used == expected
        read = set(text.split("\n"))
        assert [line for line in lines if line not in read and not (native and line in call_lines)] == []
