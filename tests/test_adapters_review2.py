"""OpenAI adapters, second review: blank system text, and the helpers an OpenAI daemon's loop uses.

The daemon itself (docs/daemon-guide.md, "A complete daemon with the OpenAI SDK") is run
against a fake ``openai`` module in tests/test_docs_snippets.py.
"""

from __future__ import annotations

from typing import Any

import pytest

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
from holon.projections import WorkingMemorySnapshot
from tests.test_adapters_review import check_openai_chat, check_openai_responses

BUDGET = Budget(context_window=8_000, output_reserve=500)
MEMORY = WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it")


def _prompt(policy: r.SystemPolicy, **fields: Any) -> Prompt:
    current = CurrentInput(text="go", seq=9)
    return build_context(ContextInputs(agent_id="a1", policy=policy, current_input=current, **fields), BUDGET)


def _system_texts(prompt: Prompt) -> list[str]:
    chat = to_openai_chat(prompt, model="gpt-4.1")
    responses = to_openai_responses(prompt, model="gpt-4.1")
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
