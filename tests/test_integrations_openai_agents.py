"""HolonSession: the OpenAI Agents SDK's Runner records its runs in a holon ledger and gets holon's context.

Runs go through the SDK's real ``Runner`` with the SDK's own ``ScriptedModel`` (no network,
tracing off): the model's input is what holon rendered, every item the Runner saves is a
holon record, and pop and clear append instead of rewriting.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, Runner, function_tool
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from click.testing import CliRunner

from holon import records as r
from holon.cli import main
from holon.context import Budget
from holon.errors import UsageError
from holon.integrations import HolonSession
from holon.runtime import Agent, AgentConfig
from tests.runtime_support import Tick

RUN = RunConfig(tracing_disabled=True)


@function_tool
def read_log(name: str) -> str:
    """Read a build log."""
    return f"log {name}: " + "".join(f"step {i} compiled module_{i}.c\n" for i in range(600))


def _session(path: Path, config: AgentConfig | None = None) -> HolonSession:
    return HolonSession(Agent.open(path, agent_id="sdk-agent", clock=Tick(), config=config))


def _records(session: HolonSession) -> list[r.Record]:
    return list(session.agent.ledger.read())


def _texts(items: list[Any]) -> str:
    return json.dumps(items, ensure_ascii=False)


def test_a_run_is_recorded_and_the_next_run_gets_holons_context(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            [function_call("read_log", {"name": "nightly"}, call_id="call_7")],
            [assistant_message("The nightly build compiled 600 modules.")],
            [assistant_message("You asked about the nightly build.")],
        ]
    )
    sdk_agent = SdkAgent(name="builder", instructions="Answer briefly.", model=model, tools=[read_log])
    session = _session(tmp_path / "ledger")

    async def runs() -> list[str]:
        first = await Runner.run(sdk_agent, "how did the nightly build go?", session=session, run_config=RUN)
        second = await Runner.run(sdk_agent, "what did I ask before?", session=session, run_config=RUN)
        return [str(first.final_output), str(second.final_output)]

    answers = ["The nightly build compiled 600 modules.", "You asked about the nightly build."]
    assert asyncio.run(runs()) == answers
    session.close()

    # Every item the Runner saved is a holon record, in order, in one turn per run.
    evidence = [
        rec for rec in _records(session) if isinstance(rec.body, r.Message | r.ToolIntent | r.ToolResult)
    ]
    assert [(type(rec.body).__name__, rec.turn) for rec in evidence] == [
        ("Message", 1),
        ("ToolIntent", 1),
        ("ToolResult", 1),
        ("Message", 1),
        ("Message", 2),
        ("Message", 2),
    ]
    intent, result = evidence[1].body, evidence[2].body
    assert isinstance(intent, r.ToolIntent) and isinstance(result, r.ToolResult)
    assert (intent.tool, intent.args, intent.idempotency_key) == ("read_log", {"name": "nightly"}, "call_7")
    assert session.agent.ledger.get_blob(result.blob.hash).decode().startswith("log nightly: step 0")  # type: ignore[union-attr]
    assert isinstance(evidence[0].body, r.Message) and evidence[0].body.role == "user"
    prompts = [rec for rec in _records(session) if isinstance(rec.body, r.PromptRendered)]
    assert [rec.turn for rec in prompts] == [1, 2]  # what each run's model was shown is recorded

    # The second run's model saw holon's rendering of the first run, then the new input —
    # not the SDK's raw items: the tool call is holon's (history text, or the adapter's
    # native item under holon's call id c1.1), never the Runner's item with its id call_7.
    second_input = model.calls[2].input
    assert second_input[-1] == {"content": "what did I ask before?", "role": "user"}
    assert all(item.get("call_id") != "call_7" and item.get("id") != "call_7" for item in second_input)
    holon_text = _texts(second_input[:-1])
    assert "how did the nightly build go?" in holon_text
    assert "The nightly build compiled 600 modules." in holon_text
    assert "c1.1" in holon_text and "read_log" in holon_text
    assert "Current input" not in holon_text  # the run's input follows; no "no new input" line

    # The ledger verifies: frames, chain and every derived record equal what the code derives.
    verified = CliRunner().invoke(main, ["verify", str(tmp_path / "ledger")])
    assert verified.exit_code == 0, verified.output


def test_the_context_stays_within_the_budget_as_runs_pile_up(tmp_path: Path) -> None:
    # Eight runs, each reading a ~20 KB log: the SDK's own session would send all of it again
    # at every call; holon's context stays within its 6,000-token window.
    config = AgentConfig(budget=Budget(context_window=6_000, output_reserve=1_000))
    session = _session(tmp_path / "ledger", config)
    steps: list[Any] = []
    for run in range(8):
        steps += [[function_call("read_log", {"name": f"run{run}"}, call_id=f"call_{run}")]]
        steps += [[assistant_message(f"run {run} compiled 600 modules")]]
    model = ScriptedModel(steps)
    sdk_agent = SdkAgent(name="builder", model=model, tools=[read_log])

    async def runs() -> None:
        for run in range(8):
            await Runner.run(sdk_agent, f"check build {run}", session=session, run_config=RUN)

    asyncio.run(runs())
    session.close()
    first_calls = [call.input for call in model.calls[::2]]  # each run's first model call
    sizes = [len(_texts(items)) for items in first_calls]
    results = [rec.body for rec in _records(session) if isinstance(rec.body, r.ToolResult)]
    logs = sum(body.blob.size if body.blob is not None else len(body.output) for body in results)
    assert len(results) == 8 and logs > 100_000
    assert max(sizes) < 6_000 * 4  # characters: within the 6,000-token window, not the logs' ~120 KB
    assert "run 6 compiled 600 modules" in _texts(first_calls[7])  # the newest runs are still shown
    assert any("restore with ref" in _texts(items) for items in first_calls)  # older outputs: a ref


def test_pop_withdraws_the_newest_item_by_appending_and_clear_starts_a_new_session(tmp_path: Path) -> None:
    session = _session(tmp_path / "ledger")

    async def steps() -> None:
        await session.get_items()
        await session.add_items([{"role": "user", "content": "deploy the parrot service"}])
        await session.add_items([{"role": "assistant", "content": "deploying to staging"}])
        before = _records(session)
        assert await session.pop_item() == {"role": "assistant", "content": "deploying to staging"}
        after = _records(session)
        # Nothing rewritten: the ledger only grew, by the note that withdraws the item.
        assert after[: len(before)] == before
        note = after[-1].body
        assert isinstance(note, r.Message) and note.role == "channel"
        assert note.text.startswith(f"ledger:{before[-1].seq} withdrawn")
        assert await session.get_items(limit=5) == [{"role": "user", "content": "deploy the parrot service"}]
        assert "withdrawn" in _texts(await session.get_items())  # the model is told, in the history

        await session.clear_session()
        assert await session.get_items(limit=5) == []
        assert await session.pop_item() is None
        await session.add_items([{"role": "user", "content": "now the toucan service"}])
        context = _texts(await session.get_items())
        # A new session: its requests start afresh. The old one is history only; the new one
        # is the newest request, and the history shows it whole where it was sent (so no
        # operator's requests section repeats it).
        assert "## Operator's requests" not in context
        assert context.rindex("now the toucan service") > context.rindex("deploy the parrot service")

    asyncio.run(steps())
    assert session.agent.state.session == f"sdk-agent/{_session_marker(session)}"
    session.close()


def _session_marker(session: HolonSession) -> int:
    markers = [
        rec.seq
        for rec in _records(session)
        if isinstance(rec.body, r.ExecutionEnvironment)
        and rec.body.extra.get("session_id", "").startswith("sdk-agent/")
    ]
    return markers[-1]


def test_a_bad_item_is_refused_and_nothing_of_its_batch_is_recorded(tmp_path: Path) -> None:
    session = _session(tmp_path / "ledger")
    held = session.agent.seq

    async def add(items: list[Any]) -> None:
        await session.add_items(items)

    good = {"role": "user", "content": "hello"}
    orphan = {"type": "function_call_output", "call_id": "call_9", "output": "x"}
    with pytest.raises(UsageError, match=r"item 1: a function_call_output for call_id 'call_9'.*recorded"):
        asyncio.run(add([good, orphan]))
    with pytest.raises(UsageError, match=r"item 0: a message's role must be"):
        asyncio.run(add([{"role": "tool", "content": "x"}]))
    with pytest.raises(UsageError, match=r"item 0: a `function_call` item needs a non-empty string .call_id"):
        asyncio.run(add([{"type": "function_call", "name": "read_log", "arguments": "{}"}]))
    assert session.agent.seq == held
    session.close()


def test_an_item_added_twice_is_recorded_once_and_other_items_are_counted(tmp_path: Path) -> None:
    session = _session(tmp_path / "ledger")
    call = {"type": "function_call", "call_id": "call_1", "name": "read_log", "arguments": '{"name": "a"}'}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "ok"}

    async def steps() -> None:
        await session.add_items([{"role": "user", "content": "read a"}, call, output])
        await session.add_items([call, output, {"type": "reasoning", "id": "rs_1", "summary": []}])

    asyncio.run(steps())
    kinds = [type(rec.body).__name__ for rec in _records(session)]
    assert (kinds.count("ToolIntent"), kinds.count("ToolResult")) == (1, 1)
    assert session.skipped == {"reasoning": 1}
    session.close()


def test_a_reopened_session_continues_the_ledger(tmp_path: Path) -> None:
    first = _session(tmp_path / "ledger")

    async def record(session: HolonSession, text: str) -> None:
        await session.get_items()
        await session.add_items([{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}])

    asyncio.run(record(first, "remember the heron"))
    first.close()
    first.agent.close()
    second = HolonSession.open(tmp_path / "ledger", config=None)
    assert asyncio.run(second.get_items(limit=2)) == [
        {"role": "user", "content": "remember the heron"},
        {"role": "assistant", "content": "ok"},
    ]
    assert "remember the heron" in _texts(asyncio.run(second.get_items()))
    second.close()


def test_the_sdk_agent_searches_its_own_ledger_through_holon_mcp(tmp_path: Path) -> None:
    # The session writes the ledger; `holon mcp` reads it beside it, as the SDK's MCP server.
    session = _session(tmp_path / "ledger")
    search = function_call("holon_search", {"query": "vault code"}, call_id="call_s")
    model = ScriptedModel([[search], [assistant_message("4417")]])

    async def steps() -> str:
        await session.get_items()
        told = {"role": "user", "content": "remember: the vault code is 4417"}
        await session.add_items([told, {"role": "assistant", "content": "ok"}])
        params = {"command": sys.executable, "args": ["-m", "holon", "mcp", str(tmp_path / "ledger")]}
        async with MCPServerStdio(params=params, client_session_timeout_seconds=60) as server:
            sdk_agent = SdkAgent(name="keeper", model=model, mcp_servers=[server])
            result = await Runner.run(sdk_agent, "what is the vault code?", session=session, run_config=RUN)
        return str(result.final_output)

    assert asyncio.run(steps()) == "4417"
    session.close()
    found = model.calls[1].input[-1]
    assert found["type"] == "function_call_output" and "remember: the vault code is 4417" in _texts([found])
    # The search and its answer are the run's tool call in the ledger, like any other.
    results = [rec.body for rec in _records(session) if isinstance(rec.body, r.ToolResult)]
    assert [body.tool for body in results] == ["holon_search"]
    assert "the vault code is 4417" in results[0].output
    session.agent.close()
