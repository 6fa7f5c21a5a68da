"""HolonHook: LangGraph's create_react_agent records its messages in a holon ledger and sends holon's context.

A real ``create_react_agent`` graph (with LangGraph's in-memory checkpointer) runs on
langchain_core's own ``GenericFakeChatModel``, taught to accept tools: no network. What
the model is sent is what holon rendered, and every message of the graph is a record.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from holon import records as r
from holon.cli import main
from holon.context import Budget
from holon.errors import UsageError
from holon.integrations import HolonHook
from holon.ledger import Ledger
from holon.runtime import Agent, AgentConfig
from tests.runtime_support import Tick

# create_react_agent is deprecated since LangGraph 1.0 (moved to langchain.agents) and still shipped.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::PendingDeprecationWarning")


class ScriptedChat(GenericFakeChatModel):
    """langchain_core's fake chat model, taught to take tools, keeping what each call was sent."""

    sent: list[list[BaseMessage]]

    def __init__(self, replies: Iterator[AIMessage]) -> None:
        super().__init__(messages=replies, sent=[])  # type: ignore[call-arg]

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.sent.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def read_log(name: str) -> str:
    """Read a build log."""
    return f"log {name}: " + "".join(f"step {i} compiled module_{i}.c\n" for i in range(400))


def _call(call_id: str, name: str = "nightly") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": call_id, "name": "read_log", "args": {"name": name}}])


def _hook(path: Path, config: AgentConfig | None = None) -> HolonHook:
    return HolonHook(Agent.open(path, agent_id="graph-agent", clock=Tick(), config=config))


def _graph(model: ScriptedChat, hook: HolonHook) -> Any:
    return create_react_agent(
        model,
        [read_log],
        pre_model_hook=hook.pre_model_hook,
        post_model_hook=hook.post_model_hook,
        checkpointer=InMemorySaver(),
    )


def _records(hook: HolonHook) -> list[r.Record]:
    return list(hook.agent.ledger.read())


def _text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages)


def _shown(messages: list[BaseMessage]) -> str:
    """What the model reads of ``messages``: their text and their tool calls."""
    calls = [f"{c['id']} {c['name']}" for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    return "\n".join([_text(messages), *calls])


def test_a_graph_is_recorded_and_the_model_is_sent_holons_context(tmp_path: Path) -> None:
    answers = [AIMessage(content="The nightly build is green."), AIMessage(content="The nightly one.")]
    replies = [_call("tc1"), *answers]
    model = ScriptedChat(iter(replies))
    hook = _hook(tmp_path / "ledger")
    graph = _graph(model, hook)
    thread = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"messages": [("user", "how is the nightly build?")]}, thread)
    assert first["messages"][-1].content == "The nightly build is green."
    second = graph.invoke({"messages": [("user", "which build did I ask about?")]}, thread)
    assert second["messages"][-1].content == "The nightly one."
    hook.close()

    # Every message of the graph is a record, one holon turn per human message.
    evidence = [
        (type(rec.body).__name__, rec.turn)
        for rec in _records(hook)
        if isinstance(rec.body, r.Message | r.ToolIntent | r.ToolResult)
    ]
    assert evidence == [
        ("Message", 1),
        ("ToolIntent", 1),
        ("ToolResult", 1),
        ("Message", 1),
        ("Message", 2),
        ("Message", 2),
    ]
    intent = next(rec.body for rec in _records(hook) if isinstance(rec.body, r.ToolIntent))
    assert (intent.tool, intent.args, intent.idempotency_key) == ("read_log", {"name": "nightly"}, "tc1")

    # Call 1: holon's prompt alone, the question as its current input.
    assert "how is the nightly build?" in _text(model.sent[0])
    assert not any(isinstance(m, AIMessage | ToolMessage) for m in model.sent[0])
    # Call 2: the same prompt, then the graph's own tool round, as it is (ids and all).
    assert _text(model.sent[1]).startswith(_text(model.sent[0]))
    tail = model.sent[1][len(model.sent[0]) :]
    assert [type(m).__name__ for m in tail] == ["AIMessage", "ToolMessage"]
    assert isinstance(tail[0], AIMessage) and tail[0].tool_calls[0]["id"] == "tc1"
    # Call 3, the next invocation: holon's context holding the first turn (its tool call as
    # history text, or as the adapter's native call under holon's call id c1.1), none of the
    # graph's own messages.
    graph_ids = {m.id for m in first["messages"]}
    assert not graph_ids & {m.id for m in model.sent[2]}
    shown = _shown(model.sent[2])
    assert "which build did I ask about?" in shown and "The nightly build is green." in shown
    assert "c1.1" in shown and "read_log" in shown
    prompts = [rec.turn for rec in _records(hook) if isinstance(rec.body, r.PromptRendered)]
    assert prompts == [1, 2]  # one prompt per turn while the rounds fit: the cached prefix holds

    verified = CliRunner().invoke(main, ["verify", str(tmp_path / "ledger")])
    assert verified.exit_code == 0, verified.output


def test_a_long_tool_loop_stays_within_the_budget(tmp_path: Path) -> None:
    # Twelve ~10 KB logs in one invocation: the graph's messages hold ~120 KB, the model is
    # sent holon's prompt re-rendered whenever the rounds outgrow the 6,000-token window.
    config = AgentConfig(budget=Budget(context_window=6_000, output_reserve=1_000))
    replies = [_call(f"tc{i}", f"run{i}") for i in range(12)] + [AIMessage(content="all twelve read")]
    model = ScriptedChat(iter(replies))
    hook = _hook(tmp_path / "ledger", config)
    result = _graph(model, hook).invoke(
        {"messages": [("user", "read the twelve logs")]}, {"configurable": {"thread_id": "t"}}
    )
    hook.close()
    assert len(_text(result["messages"])) > 100_000
    sizes = [len(_text(sent)) for sent in model.sent]
    assert max(sizes) < 6_000 * 4, sizes
    prompts = [rec for rec in _records(hook) if isinstance(rec.body, r.PromptRendered)]
    assert len(prompts) > 1  # the rounds outgrew the prompt, which was rendered again
    # Every call's tool rounds are whole: each AI tool call is followed by its result.
    for sent in model.sent:
        calls = [c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls]
        answered = [m.tool_call_id for m in sent if isinstance(m, ToolMessage)]
        assert calls == answered


def test_a_tool_message_for_no_recorded_call_is_refused_and_nothing_recorded(tmp_path: Path) -> None:
    hook = _hook(tmp_path / "ledger")
    held = hook.agent.seq
    orphan = ToolMessage(content="ok", tool_call_id="tc9", id="m2")
    with pytest.raises(UsageError, match=r"answers tool call 'tc9', which no recorded AI message made"):
        hook.pre_model_hook({"messages": [HumanMessage(content="hi", id="m1"), orphan]})
    with pytest.raises(UsageError, match="without an id"):
        hook.pre_model_hook({"messages": [HumanMessage(content="hi")]})
    assert hook.agent.seq == held
    hook.close()
    hook.agent.close()


def test_a_restarted_hook_records_only_what_the_checkpointers_thread_adds(tmp_path: Path) -> None:
    # The checkpointer outlives the process that wrote the ledger: the new hook meets the
    # thread's earlier messages again and must not record them a second time.
    saver = InMemorySaver()
    thread = {"configurable": {"thread_id": "t"}}
    replies = [_call("tc1"), AIMessage(content="green"), AIMessage(content="it was the nightly one")]
    model = ScriptedChat(iter(replies))

    def graph(hook: HolonHook) -> Any:
        hooks = {"pre_model_hook": hook.pre_model_hook, "post_model_hook": hook.post_model_hook}
        return create_react_agent(model, [read_log], checkpointer=saver, **hooks)

    with HolonHook.open(tmp_path / "ledger", agent_id="graph-agent") as first:
        graph(first).invoke({"messages": [("user", "is the nightly build green?")]}, thread)
    with Ledger.open(tmp_path / "ledger", readonly=True) as ledger:
        before = [rec.body for rec in ledger.read()]
    with HolonHook.open(tmp_path / "ledger") as second:
        result = graph(second).invoke({"messages": [("user", "which build was it?")]}, thread)
        assert len(result["messages"]) == 6  # the thread holds both invocations
        after = [rec.body for rec in second.agent.ledger.read()]
    users = [b.text for b in after if isinstance(b, r.Message) and b.role == "user"]
    assert users == ["is the nightly build green?", "which build was it?"]
    intents = [b for b in after if isinstance(b, r.ToolIntent)]
    assert intents == [b for b in before if isinstance(b, r.ToolIntent)] and len(intents) == 1
    answers = [b.text for b in after if isinstance(b, r.Message) and b.role == "assistant"]
    assert answers == ["green", "it was the nightly one"]
