"""The ready turn loop (holon.runtime.loop) through the official SDK clients on a mock transport.

Each provider API runs a 30-turn scripted session, sync and async: every request the
SDK sends is validated against the SDK's own request types, every tool call goes through
the write-ahead log, every model call's usage is recorded as the provider reported it,
and the ledger then verifies, every prompt reproduces and the audit reports the usage.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from click.testing import CliRunner

import holon.records as r
from holon.cli import main as holon_cli
from holon.context import Budget
from holon.errors import UsageError
from holon.ledger import Ledger
from holon.runtime import (
    Agent,
    AgentConfig,
    AnthropicMessages,
    OpenAIChat,
    OpenAIResponses,
    Tools,
    TurnRun,
    arun_turn,
    run_turn,
)
from holon.runtime.tools import schema_of
from tests.runtime_support import ROOT, Tick

mocks = pytest.importorskip("tests.provider_mocks")

APIS = ("anthropic", "openai-chat", "openai-responses")
CONFIG = AgentConfig(budget=Budget(context_window=6_000, output_reserve=500), checkpoint_every=0)
TURNS = 30


def _dialect(api: str, model: Any, *, asynchronous: bool) -> Any:
    transport = model.transport()
    if api == "anthropic":
        return AnthropicMessages(
            mocks.anthropic_client(transport, asynchronous=asynchronous), model="claude-test", max_tokens=500
        )
    client = mocks.openai_client(transport, asynchronous=asynchronous)
    cls = OpenAIChat if api == "openai-chat" else OpenAIResponses
    return cls(client, model="gpt-test", max_tokens=500)


def _tools(notes: list[str], *, asynchronous: bool) -> Tools:
    tools = Tools()

    def note(text: str) -> str:
        """Keep a note for later."""
        notes.append(text)
        return f"noted {text}"

    async def note_async(text: str) -> str:
        """Keep a note for later."""
        await asyncio.sleep(0)
        return note(text)

    def add(a: int, b: int = 0) -> int:
        """Add two integers."""
        return a + b

    def fail(why: str) -> str:
        """Fail on purpose."""
        raise RuntimeError(why)

    tools.add(note_async if asynchronous else note, name="note")
    tools.add(add)
    tools.add(fail)
    return tools


def _input(n: int, api: str) -> str:
    """Turn ``n``'s input: which tools the scripted model calls (see tests.provider_mocks)."""
    if n % 10 == 3:
        return f"[input {n}] call nosuch {{}}"  # a tool that does not exist
    if n % 10 == 5:
        return f'[input {n}] call add {{"b": 1}}'  # arguments the function does not take
    if n % 10 == 7:
        bad = "!bad" if api != "anthropic" else '{"why": "disk full"}'
        return f"[input {n}] call {'note' if api != 'anthropic' else 'fail'} {bad}"
    if n % 3 == 0:
        return f'[input {n}] call note {{"text": "item {n}"}}'
    if n % 3 == 1:
        return f'[input {n}] call add {{"a": {n}, "b": 2}} | call holon_search {{"query": "item"}}'
    return f"[input {n}] how are things"


def _session(path: Path, api: str, *, asynchronous: bool) -> tuple[Any, list[TurnRun], list[str]]:
    model = mocks.ScriptedModel(api)
    dialect = _dialect(api, model, asynchronous=asynchronous)
    notes: list[str] = []
    tools = _tools(notes, asynchronous=asynchronous)
    policy = tools.policy("You keep notes and add numbers.")
    runs: list[TurnRun] = []
    with Agent.open(path, agent_id="loop-agent", config=CONFIG, policy=policy, clock=Tick()) as agent:
        for n in range(1, TURNS + 1):
            with agent.turn(input=_input(n, api), trigger="operator", role="operator") as turn:
                if asynchronous:
                    runs.append(asyncio.run(arun_turn(turn, dialect, tools)))
                else:
                    runs.append(run_turn(turn, dialect, tools))
    return model, runs, notes


def _agent(tmp_path: Path, tools: Tools) -> Agent:
    return Agent.open(tmp_path / "l", agent_id="a", config=CONFIG, policy=tools.policy("p"), clock=Tick())


def _records(path: Path) -> list[r.Record]:
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read(0))


@pytest.mark.slow
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("api", APIS)
def test_a_scripted_session_runs_to_the_end_of_every_turn(
    tmp_path: Path, api: str, asynchronous: bool
) -> None:
    path = tmp_path / "ledger"
    model, runs, notes = _session(path, api, asynchronous=asynchronous)

    # Every request the SDK sent is one the provider's own types and rules accept.
    assert model.problems == []
    assert notes == [f"item {n}" for n in range(1, TURNS + 1) if n % 3 == 0 and n % 10 not in (3, 5, 7)]
    assert all(not run.capped for run in runs)
    # A turn with tool calls takes two rounds, one without takes one.
    assert [run.rounds for run in runs] == [
        1 if "call" not in _input(n, api) else 2 for n in range(1, TURNS + 1)
    ]
    assert sum(run.rounds for run in runs) == len(model.requests)

    records = _records(path)
    by_seq = {rec.seq: rec for rec in records}
    calls = [rec for rec in records if isinstance(rec.body, r.ModelCall)]
    assert len(calls) == len(model.requests)
    for rec, response in zip(calls, model.responses, strict=True):
        body = rec.body
        assert isinstance(body, r.ModelCall)
        assert body.provider == api
        assert isinstance(by_seq[body.prompt_seq].body, r.PromptRendered)
        assert by_seq[body.prompt_seq].turn == rec.turn
        usage = response["usage"]
        if api == "anthropic":
            reported = (
                usage["input_tokens"]
                + usage["cache_read_input_tokens"]
                + usage["cache_creation_input_tokens"],
                usage["cache_read_input_tokens"],
                usage["cache_creation_input_tokens"],
            )
        elif api == "openai-chat":
            reported = (usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"], None)
        else:
            reported = (usage["input_tokens"], usage["input_tokens_details"]["cached_tokens"], None)
        assert (body.input_tokens, body.cache_read_tokens, body.cache_write_tokens) == reported
        assert body.output_tokens == usage["output_tokens" if api != "openai-chat" else "completion_tokens"]
        assert body.response_id == response["id"]
        assert body.estimated_input_tokens is not None and body.estimated_input_tokens > 0
        assert body.estimated_cache_read_tokens is not None
        assert 0 <= body.estimated_cache_read_tokens <= body.estimated_input_tokens
    assert sum(1 for c in calls if c.body.cache_read_tokens) > TURNS // 2  # type: ignore[union-attr]

    # What the tools returned, and the model's mistakes answered as errors it can read.
    results = {rec.turn: rec.body for rec in records if isinstance(rec.body, r.ToolResult)}
    add_turn = next(n for n in range(1, TURNS + 1) if '"a": ' in _input(n, api))
    assert results[add_turn].status == "ok"  # type: ignore[union-attr]
    errors = [rec for rec in records if isinstance(rec.body, r.ToolResult) and rec.body.status == "error"]
    texts = " ".join(rec.body.output for rec in errors)  # type: ignore[union-attr]
    assert "there is no tool named 'nosuch'" in texts
    assert "add: the arguments do not fit the tool" in texts
    assert ("are not valid JSON" if api != "anthropic" else "RuntimeError: disk full") in texts
    answers = [
        rec.body.text for rec in records if isinstance(rec.body, r.Message) and rec.body.role == "assistant"
    ]
    assert "done: noted item 3" not in answers  # turn 3 called a tool that does not exist
    assert "done: noted item 6" in answers

    # The ledger verifies, every prompt reproduces, and the audit shows the recorded usage.
    runner = CliRunner()
    verified = runner.invoke(holon_cli, ["verify", str(path)])
    assert verified.exit_code == 0, verified.output
    checked = runner.invoke(holon_cli, ["prompts", str(path), "--check", "--json"])
    assert checked.exit_code == 0, checked.output
    prompts = json.loads(checked.output)["prompts"]
    assert len(prompts) == len({c.body.prompt_seq for c in calls})  # type: ignore[union-attr]
    assert all(row["status"] == "reproduced" for row in prompts)
    report = runner.invoke(holon_cli, ["audit", str(path), "--report", "usage", "--json"])
    assert report.exit_code == 0, report.output
    (usage_row,) = json.loads(report.output)
    assert usage_row["calls"] == len(model.requests)
    assert usage_row["input_tokens"] == sum(c.body.input_tokens for c in calls)  # type: ignore[union-attr]
    assert usage_row["cache_read_tokens"] == sum(c.body.cache_read_tokens for c in calls)  # type: ignore[union-attr]


@pytest.mark.parametrize("api", APIS)
def test_the_round_cap_stops_a_model_that_never_stops_calling_tools(tmp_path: Path, api: str) -> None:
    tools = Tools()
    tools.add(str, name="add", description="Echo.", parameters={"type": "object"})
    model = mocks.ScriptedModel(api)
    model._turn_text = lambda body: ('[input 1] call add {"a": 1}', [])  # type: ignore[method-assign]
    dialect = _dialect(api, model, asynchronous=False)
    with (
        _agent(tmp_path, tools) as agent,
        agent.turn(input="go", role="operator") as turn,
    ):
        run = run_turn(turn, dialect, tools, max_rounds=3)
    assert run.capped and run.rounds == 3 and len(run.calls) == 3
    assert model.problems == []
    briefs = [rec.body for rec in _records(tmp_path / "l") if isinstance(rec.body, r.Brief)]
    assert briefs == [r.Brief(status="failure", text="stopped after 3 model rounds")]


def test_a_policy_offering_other_tools_is_refused_before_any_call(tmp_path: Path) -> None:
    tools = Tools()
    tools.add(lambda: "x", name="ping", description="Ping.", parameters={"type": "object"})
    other = Tools()
    model = mocks.ScriptedModel("openai-chat")
    dialect = _dialect("openai-chat", model, asynchronous=False)
    with (
        Agent.open(
            tmp_path / "l", agent_id="a", config=CONFIG, policy=other.policy("p"), clock=Tick()
        ) as agent,
        agent.turn(input="go") as turn,
    ):
        with pytest.raises(UsageError, match=r"does not offer ping.*policy=tools.policy"):
            run_turn(turn, dialect, tools)
        turn.end("completed")
    assert model.requests == []


def test_async_tools_need_the_async_loop(tmp_path: Path) -> None:
    tools = Tools()

    async def ping() -> str:
        """Ping."""
        return "pong"

    tools.add(ping)
    dialect = _dialect("anthropic", mocks.ScriptedModel("anthropic"), asynchronous=False)
    with (
        _agent(tmp_path, tools) as agent,
        agent.turn(input="go") as turn,
        pytest.raises(UsageError, match="ping are async: run the turn with arun_turn"),
    ):
        run_turn(turn, dialect, tools)


def test_a_sync_loop_given_an_async_client_says_which_to_use(tmp_path: Path) -> None:
    tools = Tools()
    dialect = _dialect("openai-responses", mocks.ScriptedModel("openai-responses"), asynchronous=True)
    with (
        _agent(tmp_path, tools) as agent,
        agent.turn(input="go") as turn,
        pytest.raises(UsageError, match="use arun_turn"),
    ):
        run_turn(turn, dialect, tools)


def test_a_keyed_call_is_not_run_twice(tmp_path: Path) -> None:
    ran: list[str] = []
    tools = Tools()

    def deploy(version: str) -> str:
        """Deploy a version."""
        ran.append(version)
        return f"deployed {version}"

    tools.add(deploy, idempotency_key=lambda args: f"deploy:{args['version']}")
    model = mocks.ScriptedModel("anthropic")
    dialect = _dialect("anthropic", model, asynchronous=False)
    with _agent(tmp_path, tools) as agent:
        for n in (1, 2):
            with agent.turn(input=f'[input {n}] call deploy {{"version": "2.4"}}', role="operator") as turn:
                run = run_turn(turn, dialect, tools)
            assert run.calls[0].output == "deployed 2.4"
        assert run.calls[0].replayed
    assert ran == ["2.4"]
    assert model.problems == []


def test_the_schema_comes_from_type_hints_and_the_docstring() -> None:
    def search(
        query: Annotated[str, "words to look for"],
        limit: int = 8,
        mode: Literal["any", "all"] = "any",
        paths: list[str] | None = None,
        weights: dict[str, float] | None = None,
    ) -> str:
        """Search the workspace.

        Longer text the model does not need.
        """
        return ""

    tools = Tools(recall=False)
    tools.add(search)
    (definition,) = tools.definitions
    assert definition.description == "Search the workspace."
    assert definition.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "words to look for"},
            "limit": {"type": "integer"},
            "mode": {"enum": ["any", "all"], "type": "string"},
            "paths": {"type": "array", "items": {"type": "string"}},
            "weights": {"type": "object", "additionalProperties": {"type": "number"}},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert [t.name for t in Tools().definitions] == ["holon_get", "holon_search"]


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (lambda x: x, "parameter 'x' has no type hint"),
        (print, "cannot be given by name"),
    ],
)
def test_a_signature_without_a_schema_is_refused_with_what_to_do(function: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        schema_of(function)


def test_registration_mistakes_are_named() -> None:
    tools = Tools()
    with pytest.raises(UsageError, match="no description"):
        tools.add(lambda: "", name="x", parameters={"type": "object"})
    with pytest.raises(UsageError, match="recall tool"):
        tools.add(lambda: "", name="holon_get", description="d", parameters={"type": "object"})
    tools.add(lambda: "", name="x", description="d", parameters={"type": "object"})
    with pytest.raises(UsageError, match="registered twice"):
        tools.add(lambda: "", name="x", description="d", parameters={"type": "object"})


def test_importing_holon_and_its_loop_imports_no_sdk() -> None:
    code = (
        "import sys, holon, holon.runtime.loop; holon.run_turn; "
        "sdks = ('anthropic', 'openai', 'httpx2', 'httpx'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in sdks))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _example(name: str) -> Any:
    """examples/<name>.py as a module (a script, not a package)."""
    spec = importlib.util.spec_from_file_location(f"holon_example_{name}", ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("script", "api", "flags"),
    [
        ("anthropic_agent", "anthropic", []),
        ("openai_agent", "openai-chat", []),
        ("openai_agent", "openai-responses", ["--api", "responses"]),
    ],
)
def test_the_example_agents_run_on_recorded_responses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], script: str, api: str, flags: list[str]
) -> None:
    transport = mocks.RecordedTransport(api, ROOT / "fixtures" / "providers" / f"{api}.json")
    make = mocks.anthropic_client if api == "anthropic" else mocks.openai_client
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello from the workspace\n", encoding="utf-8")
    ledger = tmp_path / "ledger"
    argv = [str(ledger), "--workspace", str(workspace), *flags]
    argv += ["What do the notes say?", "Search your memory for the notes"]
    assert _example(script).main(argv, client=make(transport.transport())) == 0
    assert capsys.readouterr().out.splitlines() == [
        "The notes say: hello from the workspace.",
        "I read notes.txt in the first turn; it says hello from the workspace.",
    ]
    assert transport.problems == []
    assert len(transport.requests) == len(transport.responses) == 5
    records = _records(ledger)
    outputs = [rec.body.output for rec in records if isinstance(rec.body, r.ToolResult)]
    assert outputs[:2] == ["notes.txt\n", "hello from the workspace\n"]
    assert "notes" in outputs[2]  # holon_search found the turn that read them
    usage = [rec.body for rec in records if isinstance(rec.body, r.ModelCall)]
    assert [u.cache_read_tokens for u in usage] == [0, 1800, 1900, 1850, 2600]
    checked = CliRunner().invoke(holon_cli, ["prompts", str(ledger), "--check"])
    assert checked.exit_code == 0, checked.output


def test_an_example_agent_without_a_key_says_which_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(SystemExit) as exit_:
        _example("openai_agent").main([str(tmp_path / "l"), "hi"])
    assert exit_.value.code == 2
    assert "set OPENAI_API_KEY" in capsys.readouterr().err
    assert not (tmp_path / "l").exists()
