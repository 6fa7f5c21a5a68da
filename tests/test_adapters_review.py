"""Request bodies the providers accept: a checker of their documented rules, driven over many prompts.

A daemon passes the adapters' output straight to the provider, so each body must pass
the request validation of the Anthropic Messages API and of OpenAI Chat Completions /
Responses. :func:`check_anthropic` and :func:`check_openai_chat` encode the rules a body
can break (the roles and their order, non-blank text blocks, at most four
``cache_control`` breakpoints, tool names and schemas, the length of the routing
fields, tool calls answered by their results); the tests run them over the fixture
ledgers, generated sessions (with an exact BPE estimator too), generated agent runs at
budgets from roomy to below the pinned minimum, and hand-made edge cases.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import holon.records as r
from holon.context import (
    AssemblyPlan,
    Budget,
    CacheIdentity,
    ContextInputs,
    CurrentInput,
    Prompt,
    PromptSection,
    RenderConfig,
    build_context,
    cache_last_block,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from holon.context.budget import Stability
from holon.context.sections import SECTION_ORDER
from holon.errors import BudgetExceeded, UsageError
from holon.projections import WorkingMemorySnapshot, apply, initial_state
from tests.cli_support import CLI_BUDGET, CLI_RENDER, fixture_names, live_records
from tests.context_inputs import message
from tests.context_session import run_session
from tests.strategies import AgentRun, agent_runs

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


# --------------------------------------------------------------------------- driven prompts


@pytest.mark.parametrize("name", fixture_names())
def test_every_prompt_of_the_fixture_ledgers_is_a_valid_request(name: str) -> None:
    state = None
    checked = 0
    records = live_records(name)
    for record in records:
        state = apply(state if state is not None else initial_state(), record)
        if isinstance(record.body, (r.PromptRendered, r.TurnStarted, r.ToolResult)):
            check_all(build_context(state, CLI_BUDGET, CLI_RENDER, agent_id=name))
            checked += 1
    assert checked


@pytest.mark.parametrize("estimator", ["holon-heuristic", "o200k_base"])
@pytest.mark.parametrize("window", [2_500, 12_000])
def test_every_prompt_of_a_generated_session_is_a_valid_request(estimator: str, window: int) -> None:
    seen: list[int] = []

    def check(turn: int, prompt: Prompt, session: object) -> None:
        check_all(prompt)
        seen.append(turn)

    run_session(
        40,
        Budget(context_window=window, output_reserve=window // 10),
        RenderConfig(prompt_cache_key="migration", estimator=estimator),
        on_prompt=check,
    )
    assert len(seen) >= 40


tool_names = st.from_regex(r"[a-zA-Z0-9_-]{1,64}", fullmatch=True)
schemas = st.sampled_from(
    [
        {},
        {"type": "object"},
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        {"properties": {"path": {"type": "string"}}},
    ]
)
tool_lists = st.lists(
    st.builds(r.ToolDefinition, name=tool_names, description=st.text(max_size=30), parameters=schemas),
    max_size=4,
    unique_by=lambda t: t.name,
)
policies = st.none() | st.builds(
    r.SystemPolicy,
    text=st.sampled_from(["You are a careful engineer.", "", " ", "\n\n", "Be brief.\n"])
    | st.text(max_size=20),
    tools=tool_lists.map(tuple),
)
agent_ids = st.sampled_from(["a-7", "0b6f1c52-8a4e-4a4f-9d1e-3c2f0e7a9b11"]) | st.text(
    st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=1, max_size=256
)
cache_keys = st.sampled_from(["default", "support-bot", "tenant-42/project-7/agent-pool-east"]) | st.text(
    st.characters(codec="ascii", categories=["L", "N", "P"]), min_size=1, max_size=80
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    run=agent_runs(max_turns=8, long_texts=True, open_turn=True),
    window=st.integers(len(SECTION_ORDER) + 1, 400) | st.integers(400, 40_000),
    estimator=st.sampled_from(["holon-heuristic", "o200k_base"]),
    keep=st.sampled_from([0, 1, 4]),
    policy=policies,
    agent_id=agent_ids,
    cache_key=cache_keys,
)
def test_generated_runs_render_to_valid_requests(
    *,
    run: AgentRun,
    window: int,
    estimator: str,
    keep: int,
    policy: r.SystemPolicy | None,
    agent_id: str,
    cache_key: str,
) -> None:
    state = initial_state(run.config)
    for record in run.records:
        state = apply(state, record)
    if policy is not None:
        state = apply(state, r.Record(body=policy, ts=10**12))
    config = RenderConfig(
        estimator=estimator, keep_tool_results=keep, message_max_tokens=40, prompt_cache_key=cache_key
    )
    budget = Budget(context_window=window, output_reserve=0)
    try:
        prompt = build_context(state, budget, config, agent_id=agent_id)
    except BudgetExceeded:
        event("BudgetExceeded")
        return
    event("history shown" if prompt.section("history") else "history evicted")
    check_all(prompt)


# --------------------------------------------------------------------------- edge cases


def _inputs(**fields: Any) -> ContextInputs:
    base: dict[str, Any] = {"agent_id": "a1"}
    base.update(fields)
    return ContextInputs(**base)


BUDGET = Budget(context_window=8_000, output_reserve=500)


@pytest.mark.parametrize(
    "inputs",
    [
        _inputs(),
        _inputs(snapshot=WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="x")),
        _inputs(current_input=CurrentInput(text="", seq=3)),
        _inputs(current_input=CurrentInput(text=" \n\t", seq=3)),
        _inputs(messages=(message(5, "q"), message(6, "", role="assistant"))),
        _inputs(messages=(message(5, "  "),), current_input=CurrentInput(text="x", seq=9)),
        _inputs(policy=r.SystemPolicy(text="Be brief."), current_input=CurrentInput(text="x", seq=9)),
    ],
    ids=["bare", "active work", "empty input", "blank input", "empty message", "blank message", "policy"],
)
def test_edge_prompts_are_valid_requests(inputs: ContextInputs) -> None:
    check_all(build_context(inputs, BUDGET))


# --------------------------------------------------------------------------- the fixes


def _policy_prompt(policy: r.SystemPolicy, **fields: Any) -> Prompt:
    # In the RFC's layout working memory is the AgentScoped block right after the policy:
    # the block a blank policy text hands its place and breakpoint to.
    return build_context(
        _inputs(policy=policy, current_input=CurrentInput(text="go", seq=9), **fields),
        BUDGET,
        RenderConfig(layout="rfc"),
    )


def test_a_tool_schema_without_a_type_is_sent_as_an_object_schema() -> None:
    # `{"properties": …}` describes an object, but Anthropic rejects an input_schema
    # without "type" (400 input_schema.type: Field required) and OpenAI a function whose
    # parameters are not of type object: the daemon's first model call would fail.
    properties = {"path": {"type": "string"}}
    tools = (
        r.ToolDefinition(name="read_file", description="Read a file.", parameters={"properties": properties}),
        r.ToolDefinition(name="noop"),
        r.ToolDefinition(name="bash", parameters={"type": "object", "required": ["command"]}),
    )
    prompt = _policy_prompt(r.SystemPolicy(text="Be careful.", tools=tools))
    anthropic = to_anthropic_messages(prompt, model="m", max_tokens=10)
    chat = to_openai_chat(prompt, model="m")
    responses = to_openai_responses(prompt, model="m")
    expected = [
        {"type": "object", "properties": properties},
        {"type": "object"},
        {"type": "object", "required": ["command"]},
    ]
    assert [t["input_schema"] for t in anthropic["tools"]] == expected
    assert [t["function"]["parameters"] for t in chat["tools"]] == expected
    assert [t["parameters"] for t in responses["tools"]] == expected
    check_all(prompt)


def test_a_long_routing_key_is_sent_as_a_hash_that_fits_the_providers_limits() -> None:
    # A UUID agent id and a descriptive cache key make a routing key of 67 characters;
    # OpenAI rejects a prompt_cache_key over 64 (400 string_above_max_length), Anthropic a
    # metadata.user_id over 256 (an agent id may have 256 characters).
    agent = "0b6f1c52-8a4e-4a4f-9d1e-3c2f0e7a9b11"
    config = RenderConfig(prompt_cache_key="tenant-42/support-bot-eu")
    inputs = _inputs(agent_id=agent, current_input=CurrentInput(text="go", seq=9))
    prompt = build_context(inputs, BUDGET, config)
    assert len(prompt.identity.routing_key) == 67
    key = to_openai_chat(prompt, model="m")["prompt_cache_key"]
    assert len(key) <= OPENAI_CACHE_KEY_MAX and key.startswith("holon:")
    assert to_openai_responses(prompt, model="m")["prompt_cache_key"] == key
    # Stable: the next turn's prompt routes to the same cache; another agent does not.
    again = build_context(
        _inputs(agent_id=agent, current_input=CurrentInput(text="more", seq=12)), BUDGET, config
    )
    assert to_openai_chat(again, model="m")["prompt_cache_key"] == key
    other = build_context(_inputs(agent_id=agent[:-1] + "2"), BUDGET, config)
    assert to_openai_chat(other, model="m")["prompt_cache_key"] != key
    # Anthropic's limit is longer: this key goes as it is, a 256-character agent's is hashed.
    assert to_anthropic_messages(prompt, model="m", max_tokens=10)["metadata"]["user_id"] == (
        prompt.identity.routing_key
    )
    long = build_context(_inputs(agent_id="a" * 256), BUDGET, config)
    user_id = to_anthropic_messages(long, model="m", max_tokens=10)["metadata"]["user_id"]
    assert len(user_id) <= ANTHROPIC_USER_ID_MAX and user_id.startswith("holon:")
    check_all(prompt)
    check_all(long)


def test_a_routing_key_within_the_limits_is_sent_unchanged() -> None:
    prompt = build_context(_inputs(agent_id="agent-7"), BUDGET, RenderConfig(prompt_cache_key="support-bot"))
    assert to_openai_chat(prompt, model="m")["prompt_cache_key"] == "holon:agent-7:support-bot"
    assert to_anthropic_messages(prompt, model="m", max_tokens=1)["metadata"]["user_id"] == (
        "holon:agent-7:support-bot"
    )


@pytest.mark.parametrize("text", [" ", "\n", "\n\n  \t"])
def test_a_blank_policy_text_is_no_system_block_and_its_breakpoint_moves_to_the_tools(text: str) -> None:
    # A policy text of whitespace (a template that rendered empty) became a system block
    # of whitespace, which Anthropic rejects: "text content blocks must contain
    # non-whitespace text". It is left out; the breakpoint it carried, which covers the
    # tool definitions, goes to the last tool, so the tools are still cached.
    tools = (
        r.ToolDefinition(name="bash", parameters={"type": "object"}),
        r.ToolDefinition(name="read_file", parameters={"type": "object"}),
    )
    prompt = _policy_prompt(r.SystemPolicy(text=text, tools=tools))
    assert prompt.section("system") is not None
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    check_anthropic(request)
    assert "system" not in request
    assert [("cache_control" in t) for t in request["tools"]] == [False, True]
    assert "".join(b["text"] for b in request["messages"][0]["content"]) == prompt.block_text("turn")
    # With working memory after it: no system block comes before it, so the tools take it.
    memory = WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it")
    prompt = _policy_prompt(r.SystemPolicy(text=text, tools=tools), snapshot=memory)
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    check_anthropic(request)
    assert [b["text"] for b in request["system"]] == [prompt.block_text("agent")]
    assert "cache_control" in request["tools"][-1] and "cache_control" in request["system"][0]
    # Without tools the breakpoint has nothing to cover and is dropped.
    prompt = _policy_prompt(r.SystemPolicy(text=text), snapshot=memory)
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    check_anthropic(request)
    assert [b["text"] for b in request["system"]] == [prompt.block_text("agent")]


def test_a_blank_system_block_hands_its_breakpoint_to_the_block_before_it() -> None:
    def section(name: str, stability: Stability, text: str, mark: bool = False) -> PromptSection:
        return PromptSection(name=name, stability=stability, text=text, tokens=1, breakpoint=mark)

    prompt = Prompt(
        sections=(
            section("system", "stable", "Be careful.", mark=True),
            section("working_memory", "agent", "## Working memory\nnothing yet"),
            section("episodes", "agent", "  \n", mark=True),
            section("current_input", "turn", "## Current input\ngo", mark=True),
        ),
        identity=CacheIdentity(
            agent_id="a1",
            prompt_cache_key="k",
            working_memory_revision=1,
            compression_epoch=0,
            block_hashes={},
        ),
        plan=AssemblyPlan(budget=100, available=100, total_tokens=10, sections=(), omitted=()),
        estimator="holon-heuristic",
        render_config={},
    )
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    check_anthropic(request)
    assert [(b["text"], "cache_control" in b) for b in request["system"]] == [
        ("Be careful.", True),
        ("## Working memory\nnothing yet", True),
    ]


def test_cache_last_block_never_marks_a_block_anthropic_refuses_a_breakpoint_on() -> None:
    # The request may end with an empty assistant message (Anthropic allows an empty final
    # assistant content). It became an empty text block with cache_control — a 400 ("text
    # content blocks must be non-empty", "cache_control cannot be set for empty text blocks")
    # for a request that was valid before the call.
    prompt = _policy_prompt(r.SystemPolicy(text="Be careful."))
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    messages = request["messages"]
    end = messages[0]["content"][-1]
    messages.append({"role": "assistant", "content": ""})
    cache_last_block(messages)
    assert messages[-1] == {"role": "assistant", "content": ""}
    assert end["cache_control"] == {"type": "ephemeral"}  # the previous end stays marked
    check_anthropic(request)
    # Calling it again (the next call of the turn) changes nothing either.
    cache_last_block(messages)
    assert messages[-1] == {"role": "assistant", "content": ""}
    check_anthropic(request)


@pytest.mark.parametrize("name", ["run tests", "", "x" * 65, "bash.exec", "größe"])
def test_a_tool_name_the_providers_refuse_is_a_usage_error_naming_it(name: str) -> None:
    # Both providers answer 400 for such a name; renaming it would break mapping the
    # model's calls back, so the adapter says which name and what to do instead.
    tool = r.ToolDefinition(name=name, description="d", parameters={})
    prompt = _policy_prompt(r.SystemPolicy(text="Be careful.", tools=(tool,)))
    for adapt in (
        lambda p: to_anthropic_messages(p, model="m", max_tokens=100),
        lambda p: to_openai_chat(p, model="m"),
        lambda p: to_openai_responses(p, model="m"),
    ):
        with pytest.raises(UsageError, match=re.escape(repr(name))):
            adapt(prompt)


def test_a_tool_defined_twice_is_a_usage_error() -> None:
    twice = tuple(r.ToolDefinition(name="bash", description=d, parameters={}) for d in ("a", "b"))
    with pytest.raises(UsageError, match="defined twice"):
        to_openai_chat(_policy_prompt(r.SystemPolicy(text="Be careful.", tools=twice)), model="m")


@pytest.mark.parametrize("max_tokens", [0, -1, True])
def test_max_tokens_below_one_is_a_usage_error(max_tokens: int) -> None:
    prompt = _policy_prompt(r.SystemPolicy(text="Be careful."))
    with pytest.raises(UsageError, match="max_tokens must be a positive integer"):
        to_anthropic_messages(prompt, model="m", max_tokens=max_tokens)
