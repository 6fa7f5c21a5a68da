"""OpenAI adapters, second review: blank system text, and the helpers an OpenAI daemon's loop uses.

The daemon itself (docs/daemon-guide.md, "A complete daemon with the OpenAI SDK") is run
against a fake ``openai`` module in tests/test_docs_snippets.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import holon.records as r
from holon.context import (
    Budget,
    ContextInputs,
    CurrentInput,
    InvalidToolArguments,
    Prompt,
    RenderConfig,
    build_context,
    openai_assistant_message,
    parse_tool_arguments,
    to_openai_chat,
    to_openai_responses,
)
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.projections import WorkingMemorySnapshot
from holon.runtime import Agent
from tests.test_adapters_review import check_openai_chat, check_openai_responses

BUDGET = Budget(context_window=8_000, output_reserve=500)
MEMORY = WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it")


def _prompt(policy: r.SystemPolicy, **fields: Any) -> Prompt:
    # In the RFC's layout working memory follows the policy in the system text: the case
    # of a policy text sent before (or instead of) it.
    current = CurrentInput(text="go", seq=9)
    inputs = ContextInputs(agent_id="a1", policy=policy, current_input=current, **fields)
    return build_context(inputs, BUDGET, RenderConfig(layout="rfc"))


def _system_texts(prompt: Prompt) -> list[str]:
    chat = to_openai_chat(prompt, model="gpt-5.5")
    responses = to_openai_responses(prompt, model="gpt-5.5")
    check_openai_chat(chat)
    check_openai_responses(responses)
    chat_system = [m["content"] for m in chat["messages"] if m["role"] == "system"]
    responses_system = [i["content"] for i in responses["input"] if i["role"] == "system"]
    assert chat_system == responses_system
    return chat_system


@pytest.mark.parametrize("text", [" ", "\n", "\n\n  \t"])
def test_a_blank_policy_text_sends_no_whitespace_system_text_to_openai(text: str) -> None:
    # A policy template that rendered empty was sent as a system message of whitespace
    # (alone), or as whitespace and a blank line before working memory: tokens and a
    # message the model cannot read. Anthropic's adapter already leaves such a block out.
    tools = (r.ToolDefinition(name="bash", parameters={"type": "object"}),)
    prompt = _prompt(r.SystemPolicy(text=text, tools=tools))
    assert prompt.section("system") is not None
    assert _system_texts(prompt) == []
    assert [t["function"]["name"] for t in to_openai_chat(prompt, model="m")["tools"]] == ["bash"]
    # With working memory after it, the system text is working memory alone.
    prompt = _prompt(r.SystemPolicy(text=text, tools=tools), snapshot=MEMORY)
    assert _system_texts(prompt) == [prompt.block_text("agent")]


def test_a_policy_text_is_sent_unchanged_before_working_memory() -> None:
    prompt = _prompt(r.SystemPolicy(text="  Be careful.\n"), snapshot=MEMORY)
    [system] = _system_texts(prompt)
    assert system == "  Be careful.\n" + "\n\n" + prompt.block_text("agent")


# --------------------------------------------------------------------------- the model's tool calls


def test_tool_arguments_parse_to_the_dict_turn_tool_records() -> None:
    assert parse_tool_arguments("bash", '{"command": "ls -l", "timeout": 30}') == {
        "command": "ls -l",
        "timeout": 30,
    }
    # A call without arguments: OpenAI sends "{}", some compatible servers "" or nothing.
    assert parse_tool_arguments("holon_search", "{}") == {}
    assert parse_tool_arguments("holon_search", "") == {}
    assert parse_tool_arguments("holon_search", None) == {}
    # An already decoded object (Anthropic's tool_use input) is checked the same way.
    assert parse_tool_arguments("bash", {"command": "ls"}) == {"command": "ls"}
    big = 2**64 - 1  # the largest integer the ledger stores
    assert parse_tool_arguments("x", f'{{"n": {big}, "m": {-(2**63)}}}') == {"n": big, "m": -(2**63)}


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        (
            '{"command": "ls" "-l"}',
            "are not valid JSON (Expecting ',' delimiter: line 1 column 18 (char 17))",
        ),
        ('{"command": "cat /etc/hos', "are not valid JSON (Unterminated string starting at"),  # cut off
        ('["ls"]', "are an array, not a JSON object"),
        ('"ls"', "are a string, not a JSON object"),
        ("42", "are a number, not a JSON object"),
        ("null", "are null, not a JSON object"),
        ('{"timeout": NaN}', "are not valid JSON (NaN is not a JSON value)"),
        ('{"timeout": -Infinity}', "are not valid JSON (-Infinity is not a JSON value)"),
        ('{"timeout": 1e999}', "hold a number too large for JSON (inf) at `timeout`: send it as a string"),
        (
            '{"ids": [1, 18446744073709551616]}',
            "hold an integer beyond 64 bits at `ids[1]`: send it as a string",
        ),
        (
            '{"path": "a\\ud800b"}',
            "hold text that is not valid UTF-8 (a lone surrogate escape such as \\ud800)",
        ),
        ("[" * 100_000, "are nested too deeply to decode"),
    ],
)
def test_arguments_the_ledger_cannot_take_are_an_answer_for_the_model(arguments: str, problem: str) -> None:
    # Before: a daemon's json.loads raised out of its loop (the turn failed over the model's
    # typo), or passed NaN, a 65-bit integer or a lone surrogate to turn.tool, which raised
    # InvalidRecord. Now one error says what was wrong, that nothing ran and what to send.
    with pytest.raises(InvalidToolArguments) as caught:
        parse_tool_arguments("bash", arguments)
    exc = caught.value
    assert isinstance(exc, ValueError) and exc.tool == "bash" and exc.arguments == arguments
    text = str(exc)
    assert text.startswith(f"bash: the arguments {problem}")
    assert "nothing was run. Call bash again with its arguments as one JSON object. You sent: " in text
    assert text.endswith(arguments if len(arguments) <= 300 else f"… ({len(arguments):,} characters)")
    # What the call is recorded with: the model's text, storable as given.
    recorded = exc.recorded_args
    assert list(recorded) == ["unrecordable_arguments"]
    assert recorded["unrecordable_arguments"] == arguments.encode("utf-8", "backslashreplace").decode()


def test_a_call_with_invalid_arguments_is_recorded_and_answered_without_running(tmp_path: Path) -> None:
    # The way docs/daemon-guide.md records it: the intent holds the model's text, the
    # result is the error the model is sent, and the ledger verifies.
    with Agent.open(tmp_path / "l", agent_id="a") as agent, agent.turn(input="go") as turn:
        turn.context()
        try:
            parse_tool_arguments("bash", '{"command": "ls" "-l"}')
        except InvalidToolArguments as exc:
            call = turn.tool(exc.tool, exc.recorded_args)
            call.finish(str(exc), status="error")
        assert call.result is not None and call.result.status == "error"
        assert call.args == {"unrecordable_arguments": '{"command": "ls" "-l"}'}
        assert turn.messages()[-1]["content"].startswith("bash: the arguments are not valid JSON")
    with Ledger.open(tmp_path / "l", readonly=True) as ledger:
        assert ledger.verify().ok


def test_parse_tool_arguments_refuses_what_no_provider_returns() -> None:
    with pytest.raises(
        UsageError, match=r"must be the JSON text the provider returned \(a str\), a dict or None"
    ):
        parse_tool_arguments("bash", 42)  # type: ignore[arg-type]


def _call(call_id: str, name: str, arguments: str) -> SimpleNamespace:
    return SimpleNamespace(
        id=call_id, type="function", function=SimpleNamespace(name=name, arguments=arguments)
    )


def test_the_assistant_message_holds_what_chat_completions_accepts() -> None:
    # The SDK's message carries fields a request does not take (annotations, audio, a null
    # function_call); the helper sends role, content, refusal and the tool calls only.
    message = SimpleNamespace(
        role="assistant",
        content="Looking.",
        refusal=None,
        annotations=[],
        audio=None,
        function_call=None,
        tool_calls=[_call("call_1", "bash", '{"command": "ls"}'), _call("call_2", "holon_search", "")],
    )
    assert openai_assistant_message(message) == {
        "role": "assistant",
        "content": "Looking.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"command": "ls"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "holon_search", "arguments": ""}},
        ],
    }
    # A dict works the same; content stays null beside tool calls, "" without any.
    as_dict = {"content": None, "tool_calls": [{"id": "c", "function": {"name": "bash", "arguments": "{}"}}]}
    assert openai_assistant_message(as_dict)["content"] is None
    assert openai_assistant_message(as_dict)["tool_calls"][0]["type"] == "function"
    assert openai_assistant_message({"content": None, "tool_calls": None}) == {
        "role": "assistant",
        "content": "",
    }
    refused = openai_assistant_message(
        SimpleNamespace(content=None, refusal="I can't help.", tool_calls=None)
    )
    assert refused == {"role": "assistant", "content": "", "refusal": "I can't help."}


def test_invalid_arguments_go_back_to_the_model_as_an_empty_object() -> None:
    # OpenAI-compatible servers (vLLM, llama.cpp, SGLang) parse the history's arguments:
    # one malformed call echoed back made every later request of the turn a 400.
    message = SimpleNamespace(
        content=None,
        tool_calls=[_call("call_1", "bash", '{"command": "ls" "-l"}'), _call("call_2", "bash", '{"n": NaN}')],
    )
    sent = openai_assistant_message(message)
    assert [c["function"]["arguments"] for c in sent["tool_calls"]] == ["{}", "{}"]
    request = {"model": "m", "messages": [{"role": "user", "content": "go"}, sent]}
    request["messages"] += [
        {"role": "tool", "tool_call_id": c["id"], "content": "error"} for c in sent["tool_calls"]
    ]
    check_openai_chat(request)
    for call in sent["tool_calls"]:
        json.loads(call["function"]["arguments"])
