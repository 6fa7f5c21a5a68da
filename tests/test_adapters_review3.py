"""Provider adapters, third review: the tool definitions as sent, and the cache identity covering them.

- Responses reads a function tool without ``strict`` as strict where it can (Chat
  Completions as not strict), so the same SystemPolicy meant different tools there.
- The request's schemas were shallow copies of the folded state's SystemPolicy: a daemon
  adjusting them in place changed what every later prompt rendered.
- The tools section sorted the schemas' keys while the adapters send them as declared:
  two policies differing only in key order rendered one cache key for two prefixes.
- ``cache_last_block`` moved the end mark onto a thinking block, which Anthropic refuses.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import holon.records as r
from holon.context import (
    Budget,
    ContextInputs,
    CurrentInput,
    Prompt,
    build_context,
    cache_last_block,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from holon.projections import apply, initial_state
from tests.test_adapters_review import check_all, check_openai_responses

ROOT = Path(__file__).resolve().parent.parent
BUDGET = Budget(context_window=8_000, output_reserve=500)

#: A tool with an optional property: strict mode would make ``cwd`` required.
BASH = r.ToolDefinition(
    name="bash",
    description="Run a command.",
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "cwd": {"type": "string", "description": "where to run it (default: the workspace)"},
        },
        "required": ["command"],
    },
)


def _prompt(policy: r.SystemPolicy, agent_id: str = "a1") -> Prompt:
    inputs = ContextInputs(agent_id=agent_id, policy=policy, current_input=CurrentInput(text="go", seq=9))
    return build_context(inputs, BUDGET)


def test_responses_function_tools_say_they_are_not_strict() -> None:
    # Responses normalizes a function tool that omits `strict` into strict mode whenever
    # the schema allows it: `cwd` becomes required and the model sends "" for it where
    # it meant the default. Chat Completions reads the same omission as not strict.
    prompt = _prompt(r.SystemPolicy(text="Be careful.", tools=(BASH, r.ToolDefinition(name="noop"))))
    request = to_openai_responses(prompt, model="gpt-5.5")
    check_openai_responses(request)
    assert [t.get("strict") for t in request["tools"]] == [False, False]
    assert request["tools"][0] == {
        "type": "function",
        "name": "bash",
        "description": "Run a command.",
        "parameters": dict(BASH.parameters),
        "strict": False,
    }
    # Chat Completions' default already is non-strict: its body is unchanged.
    assert all("strict" not in t["function"] for t in to_openai_chat(prompt, model="gpt-5.5")["tools"])
    check_all(prompt)


def _tools_of(request: dict[str, Any]) -> list[dict[str, Any]]:
    tools = request.get("tools", [])
    # Anthropic's input_schema, Chat Completions' function.parameters, Responses' parameters.
    return [t["input_schema"] if "input_schema" in t else t.get("function", t)["parameters"] for t in tools]


@pytest.mark.parametrize(
    "adapt",
    [
        lambda p: to_anthropic_messages(p, model="m", max_tokens=10),
        lambda p: to_openai_chat(p, model="m"),
        lambda p: to_openai_responses(p, model="m"),
    ],
    ids=["anthropic", "chat", "responses"],
)
def test_adjusting_a_requests_schemas_leaves_the_policy_and_the_next_prompt_unchanged(
    adapt: Callable[[Prompt], dict[str, Any]],
) -> None:
    # A daemon preparing OpenAI strict mode sets additionalProperties: false on every
    # nested object of the request's schemas. The nested dicts were the folded state's
    # SystemPolicy: the next prompt rendered another tools section and cache key than the
    # ledger's records reproduce.
    policy = r.SystemPolicy(text="Be careful.", tools=(copy.deepcopy(BASH),))
    state = apply(initial_state(), r.Record(seq=0, body=policy, ts=1))
    state = apply(state, r.Record(seq=1, body=r.Message(role="user", text="go"), ts=2))
    first = build_context(state, BUDGET, agent_id="a1")
    request = adapt(first)
    for schema in _tools_of(request):
        schema["additionalProperties"] = False
        for prop in schema["properties"].values():
            prop["description"] = "changed"
        schema["required"].append("cwd")
    again = build_context(state, BUDGET, agent_id="a1")
    assert again.text == first.text
    assert again.cache_key == first.cache_key
    declared = state.runtime.policy
    assert declared is not None and declared.policy.tools == (BASH,)
    # And the request itself was built from the policy as it is.
    assert _tools_of(adapt(again)) == [dict(BASH.parameters)]


def test_a_schema_in_another_key_order_is_another_cache_key() -> None:
    # Anthropic caches the tool definitions as sent, in the declared key order; the tools
    # section (which the key hashes) sorted the keys, so these two policies rendered one
    # key for two prefixes, and an audit counted a hit the provider missed.
    reordered = r.ToolDefinition(
        name="bash",
        description="Run a command.",
        parameters={
            "required": ["command"],
            "properties": {
                "cwd": {"description": "where to run it (default: the workspace)", "type": "string"},
                "command": {"type": "string"},
            },
            "type": "object",
        },
    )
    assert reordered.parameters == BASH.parameters  # the same schema, other bytes
    one = _prompt(r.SystemPolicy(text="Be careful.", tools=(BASH,)))
    other = _prompt(r.SystemPolicy(text="Be careful.", tools=(reordered,)))
    sent = [json.dumps(to_anthropic_messages(p, model="m", max_tokens=10)["tools"]) for p in (one, other)]
    assert sent[0] != sent[1]
    assert one.cache_key != other.cache_key
    assert one.identity.prefix_hash != other.identity.prefix_hash
    # The section shows the parameters as declared, the line's own keys sorted as before.
    tools = other.section("tools")
    assert tools is not None
    line = json.loads(tools.text.splitlines()[1])
    assert list(line) == ["description", "name", "parameters"]
    assert list(line["parameters"]) == ["required", "properties", "type"]
    assert list(line["parameters"]["properties"]) == ["cwd", "command"]
    # The same policy again is the same key: nothing else moved it.
    assert _prompt(r.SystemPolicy(text="Be careful.", tools=(reordered,))).cache_key == other.cache_key


@pytest.mark.parametrize(
    "thinking",
    [
        {"type": "thinking", "thinking": "Let me check the tests first.", "signature": "sig"},
        {"type": "redacted_thinking", "data": "EmwKAhgB"},
    ],
    ids=["thinking", "redacted_thinking"],
)
def test_cache_last_block_never_marks_a_thinking_block(thinking: dict[str, Any]) -> None:
    # Anthropic: "Thinking blocks cannot be cached directly with cache_control". A request
    # ending with the model's thinking (a final assistant message cut off while it thought)
    # had the mark moved onto it: a 400 for a request that was valid before the call.
    request = to_anthropic_messages(_prompt(r.SystemPolicy(text="Be careful.")), model="m", max_tokens=10)
    messages = request["messages"]
    end = messages[0]["content"][-1]
    messages.append({"role": "assistant", "content": [thinking]})
    cache_last_block(messages)
    assert "cache_control" not in messages[-1]["content"][0]
    assert end["cache_control"] == {"type": "ephemeral"}  # the previous end keeps the mark
    # Beside a block that takes one, that block is marked instead.
    messages[-1]["content"].append({"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}})
    cache_last_block(messages)
    assert [("cache_control" in b) for b in messages[-1]["content"]] == [False, True]
    assert "cache_control" not in end


_PAYLOADS = """
import json
import blake3
import msgspec
import holon.records as r
from holon.context import Budget, RenderConfig, to_anthropic_messages, to_openai_chat, to_openai_responses
from tests.context_session import run_session
tool = r.ToolDefinition(name="grep", description="Søk \\u200b\\x1b[0m",
    parameters={"type": "object", "properties": {"z": {"type": "string"}, "a": {"enum": ["é", "\\x00"]}}})
policy = r.SystemPolicy(text="Be careful. 日本語 \\x07", tools=(tool,))
config = RenderConfig(prompt_cache_key="k" * 70)  # sent hashed
s = run_session(12, Budget(context_window=6000, output_reserve=500), config, seed=5)
h = blake3.blake3()
for t in sorted(s.prompts):
    p = msgspec.structs.replace(s.prompts[t], tools=policy.tools)
    for body in (to_anthropic_messages(p, model="m", max_tokens=9), to_openai_chat(p, model="m"),
                 to_openai_responses(p, model="m")):
        h.update(json.dumps(body, ensure_ascii=False).encode())
print(len(s.prompts), h.hexdigest())
"""


def test_request_bodies_are_byte_identical_across_processes() -> None:
    # The bodies are what the providers cache: another hash seed (dict and set order of
    # the process) must not move a byte, or every restarted daemon starts cold.
    outputs = []
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _PAYLOADS], cwd=ROOT, env=env, capture_output=True, text=True, check=True
        )
        outputs.append(done.stdout.split())
    assert outputs[0] == outputs[1] and int(outputs[0][0]) >= 12 and len(outputs[0][1]) == 64
