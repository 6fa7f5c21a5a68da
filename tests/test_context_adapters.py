"""Provider adapters: plain request dicts with cache breakpoints (Anthropic) and cache keys (OpenAI)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

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
from holon.context.adapters import MAX_ANTHROPIC_BREAKPOINTS
from holon.context.budget import Stability
from holon.context.prompt import SEPARATOR
from holon.context.sections import LAYOUTS, Layout
from holon.projections import WorkingMemorySnapshot
from holon.runtime import Agent, AgentConfig
from tests.context_inputs import message
from tests.runtime_support import Tick

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
