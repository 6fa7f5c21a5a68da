"""Provider adapters: plain request dicts with cache breakpoints (Anthropic) and cache keys (OpenAI)."""

from __future__ import annotations

import copy
import itertools
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
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
    InvalidToolArguments,
    Prompt,
    PromptSection,
    RenderConfig,
    build_context,
    cache_last_block,
    openai_assistant_message,
    parse_tool_arguments,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from holon.context.adapters import MAX_ANTHROPIC_BREAKPOINTS
from holon.context.budget import Stability
from holon.context.prompt import SEPARATOR
from holon.context.sections import LAYOUTS, SECTION_ORDER, Layout
from holon.errors import BudgetExceeded, UsageError
from holon.ledger import Ledger
from holon.projections import WorkingMemorySnapshot, apply, initial_state
from holon.runtime import Agent, AgentConfig
from holon.testing import run_session
from tests.cli_support import CLI_BUDGET, CLI_RENDER, fixture_names, live_records
from tests.context_inputs import message
from tests.provider_rules import (
    ANTHROPIC_USER_ID_MAX,
    OPENAI_CACHE_KEY_MAX,
    check_all,
    check_anthropic,
    check_openai_chat,
    check_openai_responses,
)
from tests.runtime_support import Tick
from tests.strategies import AgentRun, agent_runs

POLICY = r.SystemPolicy(
    text="Be careful.",
    tools=(r.ToolDefinition(name="bash", description="Run a command.", parameters={"type": "object"}),),
)


#: The RFC's layout: working memory in the system text, its own cache block. The tests of
#: where its blocks and breakpoints go use it; the recitation layout's are their own.
RFC = RenderConfig(layout="rfc")


def _prompt(config: RenderConfig = RFC) -> Prompt:
    inputs = ContextInputs(
        agent_id="a1",
        policy=POLICY,
        snapshot=WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it"),
        working_memory_revision=3,
        compression_epoch=1,
        current_input=CurrentInput(text="go on", seq=9),
    )
    return build_context(inputs, Budget(context_window=8_000, output_reserve=500), config)


def test_anthropic_request_marks_breakpoints_on_system_blocks() -> None:
    prompt = _prompt()
    request = to_anthropic_messages(prompt, model="m", max_tokens=100)
    json.dumps(request)  # plain data, no SDK objects
    assert request["tools"] == [
        {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}
    ]
    system = request["system"]
    assert [b["text"] for b in system] == [
        s.text for s in prompt.sections if s.stability != "turn" and s.name != "tools"
    ]
    marked = [b for b in system if "cache_control" in b]
    # One after the last Stable block (covers tools + system), one after the last AgentScoped block.
    assert len(marked) == 2
    assert marked[0]["text"] == "Be careful." and marked[1]["text"].startswith("## Working memory")
    (block,) = request["messages"][0]["content"]
    assert block["text"] == prompt.block_text("turn")
    assert "## Current input" in block["text"] and "go on" in block["text"]
    assert "## Working memory" not in block["text"]
    # The end of the prompt is a breakpoint too: the turn's next calls append after it.
    assert block["cache_control"] == {"type": "ephemeral"}


def test_anthropic_user_message_is_cut_after_the_history() -> None:
    # The next turn's prompt extends this history (its anchor holds), so everything up to
    # its end is a cache entry of its own; the current input follows in another block.
    inputs = ContextInputs(
        agent_id="a1",
        policy=POLICY,
        snapshot=WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it"),
        working_memory_revision=3,
        messages=(message(5, "earlier question"), message(6, "earlier answer", role="assistant")),
        current_input=CurrentInput(text="go on", seq=9),
    )
    prompt = build_context(inputs, Budget(context_window=8_000, output_reserve=500), RFC)
    request = to_anthropic_messages(prompt, model="m", max_tokens=100)
    blocks = request["messages"][0]["content"]
    # The two messages are of turns 5 and 6: the history is cut before each turn's units.
    assert [("cache_control" in b) for b in blocks] == [False, True, True]
    assert blocks[0]["text"].endswith("user: earlier question")
    assert blocks[1]["text"] == "\n[ledger:6] assistant: earlier answer"
    assert blocks[2]["text"].startswith("\n\n## Current input")
    assert "".join(b["text"] for b in blocks) == prompt.block_text("turn")
    marks = sum("cache_control" in b for b in request["system"]) + sum("cache_control" in b for b in blocks)
    assert marks == 4


def test_in_the_recitation_layout_working_memory_travels_after_the_history_in_the_messages() -> None:
    inputs = ContextInputs(
        agent_id="a1",
        policy=POLICY,
        snapshot=WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it"),
        working_memory_revision=3,
        messages=(message(5, "earlier question"), message(6, "earlier answer", role="assistant")),
        current_input=CurrentInput(text="go on", seq=9),
    )
    budget = Budget(context_window=8_000, output_reserve=500)
    prompt = build_context(inputs, budget, RenderConfig(layout="recitation"))
    request = to_anthropic_messages(prompt, model="m", max_tokens=100)
    # The system blocks are what changes only with the epoch: here the policy alone.
    assert [b["text"] for b in request["system"]] == ["Be careful."]
    blocks = request["messages"][0]["content"]
    assert "".join(b["text"] for b in blocks) == prompt.block_text("turn")
    # The history's blocks end at a breakpoint; working memory, the input and the rest follow.
    history_end = next(i for i, b in enumerate(blocks) if b["text"].endswith("assistant: earlier answer"))
    assert "cache_control" in blocks[history_end]
    tail = "".join(b["text"] for b in blocks[history_end + 1 :])
    assert tail.index("## Working memory") < tail.index("## Current input")
    marks = sum("cache_control" in b for b in request["system"]) + sum("cache_control" in b for b in blocks)
    assert marks <= MAX_ANTHROPIC_BREAKPOINTS
    chat = to_openai_chat(prompt, model="m")
    assert (
        chat["messages"][0]["content"] == "Be careful."
        and "## Working memory" in chat["messages"][1]["content"]
    )


def test_openai_requests_carry_prefix_first_and_a_cache_key() -> None:
    prompt = _prompt()
    chat = to_openai_chat(prompt, model="m")
    responses = to_openai_responses(prompt, model="m")
    json.dumps(chat), json.dumps(responses)
    assert chat["messages"][0]["role"] == "system" and chat["messages"][0]["content"].startswith(
        "Be careful."
    )
    assert chat["messages"][1]["role"] == "user"
    assert chat["tools"][0] == {
        "type": "function",
        "function": {"name": "bash", "description": "Run a command.", "parameters": {"type": "object"}},
    }
    assert responses["tools"][0]["name"] == "bash" and responses["input"] == chat["messages"]
    assert chat["prompt_cache_key"] == responses["prompt_cache_key"] == prompt.identity.routing_key


def test_routing_key_is_stable_across_revisions_but_cache_key_is_not() -> None:
    a = _prompt()
    inputs = ContextInputs(
        agent_id="a1",
        policy=POLICY,
        snapshot=WorkingMemorySnapshot(
            active_work_item_id="w1", work_state="active", objective="ship it now"
        ),
        working_memory_revision=4,
        compression_epoch=1,
        current_input=CurrentInput(text="go on", seq=9),
    )
    b = build_context(inputs, Budget(context_window=8_000, output_reserve=500), RFC)
    assert a.identity.routing_key == b.identity.routing_key
    assert a.cache_key != b.cache_key
    # In the recitation layout working memory is not in the prefix: the same policy, tools
    # and (no) episodes are the same prefix, and one key, at any revision and epoch.
    c, d = _prompt(RenderConfig()), build_context(inputs, Budget(context_window=8_000, output_reserve=500))
    assert c.identity.routing_key == d.identity.routing_key == a.identity.routing_key
    assert c.cache_key == d.cache_key


def test_at_most_four_anthropic_breakpoints() -> None:
    prompt = _prompt()
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    count = sum("cache_control" in b for b in request["system"])
    count += sum("cache_control" in c for m in request["messages"] for c in m["content"])
    assert count <= 4


def test_more_than_four_breakpoints_keep_the_earliest_four() -> None:
    def section(name: str, stability: Stability) -> PromptSection:
        return PromptSection(name=name, stability=stability, text=f"{name} text", tokens=2, breakpoint=True)

    sections = (
        section("system", "stable"),
        section("policy", "stable"),
        section("tools", "stable"),
        section("working_memory", "agent"),
        section("episodes", "agent"),
        section("context_summary", "agent"),
        section("current_input", "turn"),
    )
    prompt = Prompt(
        sections=sections,
        identity=CacheIdentity(
            agent_id="a1",
            prompt_cache_key="k",
            working_memory_revision=1,
            compression_epoch=0,
            block_hashes={},
        ),
        plan=AssemblyPlan(budget=1_000, available=1_000, total_tokens=20, sections=(), omitted=()),
        estimator="holon-heuristic",
        render_config={},
        tools=POLICY.tools,
    )
    request = to_anthropic_messages(prompt, model="m", max_tokens=10)
    system = request["system"]
    # Five system blocks ask for a breakpoint (tools travel in `tools`, not as a block).
    assert [b["text"] for b in system] == [
        f"{name} text" for name in ("system", "policy", "working_memory", "episodes", "context_summary")
    ]
    marked = ["cache_control" in b for b in system]
    assert sum(marked) == MAX_ANTHROPIC_BREAKPOINTS == 4
    # A breakpoint caches the prefix up to it: the earliest ones are kept, the last dropped.
    assert marked == [True, True, True, True, False]
    assert all("cache_control" not in c for m in request["messages"] for c in m["content"])


def test_rounds_appended_in_a_turn_move_the_end_breakpoint_to_the_newest_block() -> None:
    inputs = ContextInputs(
        agent_id="a1",
        policy=POLICY,
        snapshot=WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it"),
        working_memory_revision=3,
        messages=(message(5, "earlier question"),),
        current_input=CurrentInput(text="go on", seq=9),
    )
    request = to_anthropic_messages(
        build_context(inputs, Budget(context_window=8_000, output_reserve=500), RFC), model="m", max_tokens=10
    )
    messages = request["messages"]
    history_block, input_block = messages[0]["content"]
    messages.append(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "bash", "input": {}}]}
    )
    messages.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}
    )
    assert cache_last_block(messages) is messages
    marks = [b for m in messages for b in m["content"] if "cache_control" in b]
    marks += [b for b in request["system"] if "cache_control" in b]
    assert len(marks) == 4  # never more than Anthropic's four
    assert "cache_control" in history_block and "cache_control" not in input_block
    assert messages[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    # A string content becomes a block; calling it again on the same request changes nothing.
    messages.append({"role": "assistant", "content": "done"})
    cache_last_block(messages)
    assert messages[-1]["content"] == [
        {"type": "text", "text": "done", "cache_control": {"type": "ephemeral"}}
    ]
    before = json.dumps(messages)
    cache_last_block(messages)
    assert json.dumps(messages) == before
    assert sum("cache_control" in b for m in messages for b in m["content"]) == 2


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_next_turns_request_repeats_this_ones_blocks_up_to_its_history_end(
    tmp_path: Path, layout: Layout
) -> None:
    # Anthropic reads a cached prefix only where the new request has a block boundary and
    # every block before it is byte-identical. The history used to travel in one block
    # with a blank line at its end, so the next turn, whose history is this one plus the
    # last turn, had neither: only the system blocks were read at a turn's start.
    requests = []
    config = AgentConfig(render=RenderConfig(layout=layout))
    with Agent.open(tmp_path / "a", agent_id="a", clock=Tick(), policy=POLICY, config=config) as agent:
        for i in range(4):
            with agent.turn(input=f"step {i}: look at file {i}") as turn:
                turn.context()
                turn.record_message(f"file {i} looks fine")
                requests.append(to_anthropic_messages(turn.context(), model="m", max_tokens=10))
    for before, after in itertools.pairwise(requests[1:]):
        assert before["system"] == after["system"]
        old, new = before["messages"][0]["content"], after["messages"][0]["content"]
        end = max(i for i, block in enumerate(old) if "cache_control" in block and i < len(old) - 1)
        # The markers are not content: the texts are what must match.
        assert [b["text"] for b in new[: end + 1]] == [b["text"] for b in old[: end + 1]]
        # ... and within Anthropic's lookback from the new history-end breakpoint.
        new_end = max(i for i, block in enumerate(new) if "cache_control" in block and i < len(new) - 1)
        assert 0 < new_end - end <= 20


# --------------------------------------------------------------------------- native tool calls


def _session_with_tools(tmp_path: Path, turns: int, layout: Layout = "recitation") -> list[Prompt]:
    """The second prompt of each turn of a session whose turns each ran a tool (then said so)."""
    prompts = []
    config = AgentConfig(render=RenderConfig(layout=layout))
    with Agent.open(tmp_path / "a", agent_id="a", clock=Tick(), policy=POLICY, config=config) as agent:
        for i in range(turns):
            with agent.turn(input=f"step {i}: count the lines of file {i}") as turn:
                turn.context()
                turn.tool("bash", {"cmd": f"wc -l file{i}"}, idempotency_key=f"wc-{i}").run(
                    lambda i=i: (f"{i + 10} file{i}", 0)
                )
                turn.record_message(f"file {i} has {i + 10} lines")
                prompts.append(turn.context())
    return prompts


def test_the_historys_tool_calls_are_native_blocks_with_their_ids_in_every_adapter(tmp_path: Path) -> None:
    # The third turn's prompt: the history holds the first two turns' calls.
    prompt = _session_with_tools(tmp_path, 3)[-1]
    calls = [call for section in prompt.sections for call in section.calls]
    assert [c.arguments for c in calls] == [{"cmd": "wc -l file0"}, {"cmd": "wc -l file1"}]
    # Anthropic: the call is the assistant's tool_use, its result the first block of the
    # next user message, under the same id; what the result shows is the history's text.
    messages = to_anthropic_messages(prompt, model="m", max_tokens=10)["messages"]
    uses = [(i, b) for i, m in enumerate(messages) for b in m["content"] if b["type"] == "tool_use"]
    assert [b["input"] for _, b in uses] == [c.arguments for c in calls]
    for (i, use), call in zip(uses, calls, strict=True):
        assert messages[i]["role"] == "assistant" and messages[i]["content"] == [use]
        result = messages[i + 1]["content"][0]
        assert result["type"] == "tool_result" and result["tool_use_id"] == use["id"]
        section = next(s for s in prompt.sections if call in s.calls)
        assert result["content"] == section.text[call.result : call.end]
        assert result["content"].startswith("[ledger:") and " result " in result["content"]
    # The runtime's call ids (`c1.1`) hold a '.', which Anthropic refuses: sent hashed,
    # the same way in every request. OpenAI takes them as they are.
    assert all(use["id"].startswith("holon_") for _, use in uses)
    chat = to_openai_chat(prompt, model="m")["messages"]
    tool_calls = [c for m in chat for c in m.get("tool_calls", [])]
    assert [c["id"] for c in tool_calls] == [c.call_id for c in calls]
    assert [json.loads(c["function"]["arguments"]) for c in tool_calls] == [c.arguments for c in calls]
    for i, m in enumerate(chat):
        if m.get("tool_calls"):
            assert chat[i + 1] == {
                "role": "tool",
                "tool_call_id": m["tool_calls"][0]["id"],
                "content": chat[i + 1]["content"],
            }
    items = to_openai_responses(prompt, model="m")["input"]
    kinds = [item.get("type", "message") for item in items]
    assert kinds.count("function_call") == kinds.count("function_call_output") == len(calls)
    for i, item in enumerate(items):
        if item.get("type") == "function_call":
            assert items[i + 1]["type"] == "function_call_output"
            assert items[i + 1]["call_id"] == item["call_id"]
    # The text between and after the calls is the user's, ending with the current input.
    assert chat[-1]["role"] == "user" and "count the lines of file 2" in chat[-1]["content"]


def test_the_turns_own_work_shown_after_its_input_is_native_too(tmp_path: Path) -> None:
    # Outputs too large to append: the prompt is rendered again, with the turn's work after
    # its input; the call kept there is a native pair at the request's end.
    config = AgentConfig(budget=Budget(context_window=4_000, output_reserve=500))
    with (
        Agent.open(tmp_path / "a", agent_id="a", clock=Tick(), policy=POLICY, config=config) as agent,
        agent.turn(input="read the six files") as turn,
    ):
        first = turn.context()
        for k in range(6):
            turn.tool("bash", {"cmd": f"cat f{k}"}).run(lambda k=k: (f"word{k} " * 400, 0))
        prompt = turn.context()
    assert prompt.prompt_hash != first.prompt_hash
    section = prompt.section("current_input")
    assert section is not None and section.calls
    call = section.calls[-1]
    line = f'[ledger:14] call {call.call_id} bash {{"cmd":"cat f5"}}\n'
    assert section.text[call.start : call.result] == line
    messages = to_anthropic_messages(prompt, model="m", max_tokens=10)["messages"]
    use = messages[-2]["content"]
    assert use == [{"type": "tool_use", "id": use[0]["id"], "name": "bash", "input": {"cmd": "cat f5"}}]
    assert messages[-1]["content"][0]["content"] == section.text[call.result : call.end]
    assert "read the six files" in "".join(b.get("text", "") for b in messages[-3]["content"])
    # The request ends with that result: no empty user message after it.
    assert to_openai_chat(prompt, model="m")["messages"][-1]["role"] == "tool"
    assert to_openai_responses(prompt, model="m")["input"][-1]["type"] == "function_call_output"


def test_without_tool_definitions_the_historys_calls_stay_text(tmp_path: Path) -> None:
    # Anthropic refuses tool_use and tool_result blocks in a request that defines no tools.
    prompt = msgspec.structs.replace(_session_with_tools(tmp_path, 2)[-1], tools=())
    anthropic = to_anthropic_messages(prompt, model="m", max_tokens=10)
    assert [m["role"] for m in anthropic["messages"]] == ["user"]
    text = "".join(b["text"] for b in anthropic["messages"][0]["content"])
    assert text == SEPARATOR.join(s.text for s in prompt.sections if s.stability == "turn")
    assert all("tool_calls" not in m for m in to_openai_chat(prompt, model="m")["messages"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_native_requests_repeat_the_previous_turns_blocks_up_to_its_history_end(
    tmp_path: Path, layout: Layout
) -> None:
    # The history now ends in a tool_result or a text block, in messages of both roles: the
    # next turn's request must still hold every block before this one's history-end
    # breakpoint unchanged, in the same messages, for Anthropic to read the cache there.
    requests = [
        to_anthropic_messages(p, model="m", max_tokens=10) for p in _session_with_tools(tmp_path, 5, layout)
    ]

    def blocks(request: dict[str, Any]) -> list[tuple[int, str, str]]:
        out = []
        for i, m in enumerate(request["messages"]):
            for b in m["content"]:
                plain = {k: v for k, v in b.items() if k != "cache_control"}
                out.append((i, m["role"], json.dumps(plain, sort_keys=True)))
        return out

    for before, after in itertools.pairwise(requests[1:]):
        old, new = blocks(before), blocks(after)
        flat = [b for m in before["messages"] for b in m["content"]]
        end = max(i for i, b in enumerate(flat) if "cache_control" in b and i < len(flat) - 1)
        assert new[: end + 1] == old[: end + 1]
        assert sum("cache_control" in b for m in after["messages"] for b in m["content"]) <= 4


# --------------------------------------------------------------------------- the SDKs' own request types
#
# Every adapter's output, on real ledgers (the example daemon's, and a transcript of each
# format imported), is validated against the installed SDKs' request TypedDicts — every
# key known, recursively, and pydantic's validation — and against the rules the types
# cannot state (Anthropic's alternation and tool_use/tool_result pairing, at most 4
# breakpoints; OpenAI's tool calls each answered). The validator accepts native tool
# blocks anywhere in the messages and checks their pairing (tests/sdk_types.py).

# The shared samples sit beside the repository (benchmarks/eval reads ../shared/samples);
# a worktree is one level further down.
SAMPLES_DIR = next(
    (
        p / "shared" / "samples"
        for p in Path(__file__).resolve().parents
        if (p / "shared" / "samples").is_dir()
    ),
    Path("shared") / "samples",
)
_IMPORTED = (
    ("claude-code/session.jsonl", "claude-code"),
    ("openai-chat/conversation.json", "openai-chat"),
    ("openhands/events.json", "openhands"),
    ("swe-agent/function-calling.traj", "swe-agent"),
)


def _check_every_adapter(prompt: Prompt) -> None:
    sdk = pytest.importorskip("tests.sdk_types")
    pytest.importorskip("anthropic")
    pytest.importorskip("openai")
    anthropic_request = to_anthropic_messages(prompt, model="claude-test", max_tokens=1_000)
    sdk.check_anthropic(anthropic_request)
    # A round appended, the end breakpoint moved to it: still at most four.
    anthropic_request["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]
    cache_last_block(anthropic_request["messages"])
    sdk.check_anthropic(anthropic_request)
    sdk.check_openai_chat(to_openai_chat(prompt, model="gpt-test"))
    sdk.check_openai_responses(to_openai_responses(prompt, model="gpt-test"))


def _native_calls(prompt: Prompt) -> int:
    """Assert the history's calls travel natively in every adapter, under their own ids where
    the provider takes them; return how many there were."""
    calls = [call for section in prompt.sections for call in section.calls]
    anthropic_uses = [
        block["id"]
        for message in to_anthropic_messages(prompt, model="m", max_tokens=10)["messages"]
        for block in message["content"]
        if block["type"] == "tool_use"
    ]
    chat_ids = [
        tool_call["id"]
        for message in to_openai_chat(prompt, model="m")["messages"]
        for tool_call in message.get("tool_calls", [])
    ]
    items = to_openai_responses(prompt, model="m")["input"]
    responses_ids = [item["call_id"] for item in items if item.get("type") == "function_call"]
    assert len(anthropic_uses) == len(chat_ids) == len(responses_ids) == len(calls)
    sent = zip(calls, anthropic_uses, chat_ids, responses_ids, strict=True)
    for call, anthropic_id, chat_id, responses_id in sent:
        if re.fullmatch(r"[a-zA-Z0-9_-]+", call.call_id):
            assert anthropic_id == call.call_id
        if len(call.call_id) <= 40:
            assert chat_id == responses_id == call.call_id
    return len(calls)


@pytest.mark.slow
def test_every_prompt_of_the_example_daemon_is_a_request_each_sdk_accepts(tmp_path: Path) -> None:
    from tests.runtime_support import cold_replay, load_daemon  # noqa: PLC0415

    config = AgentConfig(checkpoint_every=0)
    load_daemon().run(tmp_path / "ledger", turns=40, seed=7, fresh=True, quiet=True, config=config)
    checked = 0
    for _record, prompt, _state in cold_replay(tmp_path / "ledger", config):
        _check_every_adapter(prompt)
        checked += 1
    assert checked >= 40


def _imported(tmp_path: Path, source: Path, fmt: str) -> Path:
    from click.testing import CliRunner  # noqa: PLC0415

    from holon.cli import main as holon_cli  # noqa: PLC0415

    ledger = tmp_path / "imported"
    runner = CliRunner()
    assert runner.invoke(holon_cli, ["init", str(ledger), "--agent-id", "x"]).exit_code == 0
    done = runner.invoke(holon_cli, ["import", str(ledger), str(source), "--from", fmt])
    assert done.exit_code == 0, done.output
    return ledger


def _prompts_of_turns(ledger: Path, most: int) -> list[Prompt]:
    from holon.ledger import Ledger  # noqa: PLC0415
    from holon.replay import next_prompt, prompt_at, turn_spans  # noqa: PLC0415

    with Ledger.open(ledger, readonly=True) as opened:
        records = list(opened.read(0))
        blobs = opened.get_blob
        turns = [span.turn for span in turn_spans(records)]
        # The first turns, the last ones and some between: where tool results pile up; and
        # the next call's, whose history holds the last turn's calls (a one-turn run's all).
        step = max(1, len(turns) // most)
        chosen = sorted({*turns[:2], *turns[::step], *turns[-2:]})
        at_turns = [prompt_at(records, turn, agent_id="x", blobs=blobs).prompt for turn in chosen]
        return [*at_turns, next_prompt(records, agent_id="x", blobs=blobs).prompt]


@pytest.mark.parametrize(("name", "fmt"), _IMPORTED, ids=[fmt for _, fmt in _IMPORTED])
def test_an_imported_transcript_renders_requests_each_sdk_accepts(
    tmp_path: Path, name: str, fmt: str
) -> None:
    source = Path(__file__).resolve().parent.parent / "fixtures" / "importers" / name
    prompts = _prompts_of_turns(_imported(tmp_path, source, fmt), most=6)
    assert prompts
    for prompt in prompts:
        _check_every_adapter(prompt)
    # The import declares the tools the transcript called, so the history's calls are native.
    assert sum(_native_calls(prompt) for prompt in prompts) > 0


def _samples() -> list[tuple[str, str]]:
    from benchmarks.eval.scenario import SAMPLES  # noqa: PLC0415

    return [(rel, fmt) for rel, fmt in SAMPLES]


@pytest.mark.parametrize(("rel", "fmt"), _samples(), ids=[fmt for _, fmt in _samples()])
def test_a_real_sample_of_each_format_renders_requests_each_sdk_accepts(
    tmp_path: Path, rel: str, fmt: str
) -> None:
    source = SAMPLES_DIR / rel
    if not source.exists():
        pytest.skip(f"{source} is not here (the shared samples sit next to the repository)")
    prompts = _prompts_of_turns(_imported(tmp_path, source, fmt), most=4)
    assert prompts
    for prompt in prompts:
        _check_every_adapter(prompt)
    assert sum(_native_calls(prompt) for prompt in prompts) > 0


def _anthropic(messages: list[dict[str, object]], **more: object) -> dict[str, object]:
    return {"model": "m", "max_tokens": 10, "messages": messages, **more}


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (_anthropic([{"role": "user", "content": "hi"}], colour=1), "$.colour: not a key of"),
        (
            _anthropic([{"role": "user", "content": [{"type": "text", "text": "x", "cachecontrol": {}}]}]),
            "not a key",
        ),
        (_anthropic([{"role": "assistant", "content": "hi"}]), "first message must be the user's"),
        (
            _anthropic([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
            "two user messages in a row",
        ),
        (
            _anthropic(
                [
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
                    },
                    {"role": "user", "content": "b"},
                ]
            ),
            "tool_use ['t1'] not answered here",
        ),
        (
            _anthropic(
                [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]
            ),
            "tool_result for ['t9'] with no tool_use",
        ),
        (
            _anthropic(
                [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": str(i), "cache_control": {"type": "ephemeral"}}
                            for i in range(5)
                        ],
                    }
                ]
            ),
            "5 cache_control breakpoints",
        ),
    ],
)
def test_the_anthropic_validator_names_what_the_api_would_refuse(
    request_: dict[str, object], problem: str
) -> None:
    sdk = pytest.importorskip("tests.sdk_types")
    pytest.importorskip("anthropic")
    with pytest.raises(sdk.RequestProblem, match=problem.replace("[", r"\[").replace("$", r"\$")):
        sdk.check_anthropic(request_)


def test_the_openai_validators_check_the_tool_call_pairing() -> None:
    sdk = pytest.importorskip("tests.sdk_types")
    pytest.importorskip("openai")
    call = {"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}"}}
    answered = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    sdk.check_openai_chat({"model": "m", "messages": answered})
    with pytest.raises(sdk.RequestProblem, match="not answered"):
        sdk.check_openai_chat({"model": "m", "messages": answered[:2]})
    with pytest.raises(sdk.RequestProblem, match="not asked for"):
        sdk.check_openai_chat({"model": "m", "messages": [answered[0], answered[2]]})
    with pytest.raises(sdk.RequestProblem, match="not a key"):
        sdk.check_openai_chat({"model": "m", "messages": answered, "prompt_cache": "k"})
    items = [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "name": "x", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]
    sdk.check_openai_responses({"model": "m", "input": items})
    with pytest.raises(sdk.RequestProblem, match="never called"):
        sdk.check_openai_responses({"model": "m", "input": [items[0], items[2]]})
    with pytest.raises(sdk.RequestProblem, match="no function_call_output"):
        sdk.check_openai_responses({"model": "m", "input": items[:2]})


# --------------------------------------------------------------------------- bodies the providers accept
# A daemon passes the adapters' output straight to the provider: every body passes the checks
# of tests/provider_rules.py, over the fixture ledgers, generated sessions (with an exact BPE
# estimator too), generated agent runs at budgets from roomy to below the pinned minimum, and
# hand-made edge cases.


@pytest.mark.slow
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


# --------------------------------------------------------------------------- OpenAI: a daemon's helpers
# A blank system text, and the helpers an OpenAI daemon's loop uses (the daemon itself,
# docs/daemon-guide.md's "A complete daemon with the OpenAI SDK", runs against a fake
# ``openai`` module in tests/test_docs_snippets.py).

MEMORY = WorkingMemorySnapshot(active_work_item_id="w1", work_state="active", objective="ship it")


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
    prompt = _policy_prompt(r.SystemPolicy(text=text, tools=tools))
    assert prompt.section("system") is not None
    assert _system_texts(prompt) == []
    assert [t["function"]["name"] for t in to_openai_chat(prompt, model="m")["tools"]] == ["bash"]
    # With working memory after it, the system text is working memory alone.
    prompt = _policy_prompt(r.SystemPolicy(text=text, tools=tools), snapshot=MEMORY)
    assert _system_texts(prompt) == [prompt.block_text("agent")]


def test_a_policy_text_is_sent_unchanged_before_working_memory() -> None:
    prompt = _policy_prompt(r.SystemPolicy(text="  Be careful.\n"), snapshot=MEMORY)
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


# --------------------------------------------------------------------------- tool definitions as sent
# The tool definitions as sent, and the cache identity covering them:
# - Responses reads a function tool without ``strict`` as strict where it can (Chat
#   Completions as not strict), so the same SystemPolicy meant different tools there.
# - The request's schemas were shallow copies of the folded state's SystemPolicy: a daemon
#   adjusting them in place changed what every later prompt rendered.
# - The tools section sorted the schemas' keys while the adapters send them as declared:
#   two policies differing only in key order rendered one cache key for two prefixes.
# - ``cache_last_block`` moved the end mark onto a thinking block, which Anthropic refuses.

ROOT = Path(__file__).resolve().parent.parent


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


def _tools_prompt(policy: r.SystemPolicy, agent_id: str = "a1") -> Prompt:
    inputs = ContextInputs(agent_id=agent_id, policy=policy, current_input=CurrentInput(text="go", seq=9))
    return build_context(inputs, BUDGET)


def test_responses_function_tools_say_they_are_not_strict() -> None:
    # Responses normalizes a function tool that omits `strict` into strict mode whenever
    # the schema allows it: `cwd` becomes required and the model sends "" for it where
    # it meant the default. Chat Completions reads the same omission as not strict.
    prompt = _tools_prompt(r.SystemPolicy(text="Be careful.", tools=(BASH, r.ToolDefinition(name="noop"))))
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
    one = _tools_prompt(r.SystemPolicy(text="Be careful.", tools=(BASH,)))
    other = _tools_prompt(r.SystemPolicy(text="Be careful.", tools=(reordered,)))
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
    assert _tools_prompt(r.SystemPolicy(text="Be careful.", tools=(reordered,))).cache_key == other.cache_key


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
    request = to_anthropic_messages(
        _tools_prompt(r.SystemPolicy(text="Be careful.")), model="m", max_tokens=10
    )
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
from holon.testing import run_session
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
