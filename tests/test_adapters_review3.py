"""Provider adapters, third review: the tool definitions as sent, and the cache identity covering them.

- Responses reads a function tool without ``strict`` as strict where it can (Chat
  Completions as not strict), so the same SystemPolicy meant different tools there.
"""

from __future__ import annotations

import holon.records as r
from holon.context import (
    Budget,
    ContextInputs,
    CurrentInput,
    Prompt,
    build_context,
    to_openai_chat,
    to_openai_responses,
)
from tests.test_adapters_review import check_all, check_openai_responses

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
    request = to_openai_responses(prompt, model="gpt-4.1")
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
    assert all("strict" not in t["function"] for t in to_openai_chat(prompt, model="gpt-4.1")["tools"])
    check_all(prompt)
