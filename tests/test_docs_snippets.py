"""Every Python snippet in README.md and docs/*.md runs against the current API and does what its text says.

Each ```python block is found by file and position and run by a runner below, in a
temporary directory, with what the block leaves to its reader supplied (a ``run_bash``,
a ledger at the path it names, a fake ``anthropic`` module that scripts the model).
A block without a runner fails :func:`test_every_python_snippet_has_a_runner`, so a new
snippet cannot go untested. Names the prose spells ``holon.x.y`` must resolve too.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import agents
import msgspec
import pytest
from agents.testing import ScriptedModel, assistant_message
from langchain_core.messages import AIMessage

import holon
import holon.audit  # not in the facade (import holon leaves it undefined); the audit snippets use it
from holon import records as r
from holon.importers import ImportReport
from holon.ledger import Ledger
from holon.projections import fold, verify_derivations
from holon.runtime import Agent, ToolCall
from tests.provider_rules import check_openai_chat
from tests.runtime_support import load_daemon
from tests.test_integrations_langgraph import ScriptedChat, read_log

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _snippets() -> dict[str, str]:
    """``"<doc>#<n>"`` (n from 1, in document order) -> the block's code."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for n, match in enumerate(_BLOCK.finditer(doc.read_text()), 1):
            found[f"{doc.relative_to(ROOT)}#{n}"] = match.group(1)
    return found


Runner = Callable[[str, Path], None]
RUNNERS: dict[str, Runner] = {}


def runner(name: str) -> Callable[[Runner], Runner]:
    def register(fn: Runner) -> Runner:
        RUNNERS[name] = fn
        return fn

    return register


def _run(code: str, name: str, namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    namespace = {"__name__": "snippet", **(namespace or {})}
    exec(compile(code, name, "exec"), namespace)
    return namespace


def _records(path: Path) -> list[r.Record]:
    with Ledger.open(path, readonly=True) as ledger:
        return list(ledger.read(0))


def _verifies(path: Path) -> None:
    with Ledger.open(path, readonly=True) as ledger:
        assert ledger.verify().ok
        assert verify_derivations(list(ledger.read(0))).ok


# ---------------------------------------------------------------- README.md


@runner("README.md#1")
def _readme_agent(code: str, tmp: Path) -> None:
    ran: list[str] = []

    def run_bash(command: str) -> tuple[str, int]:
        ran.append(command)
        return "1 passed in 0.01s", 0

    ns = _run(code, "README.md", {"run_bash": run_bash})
    assert ran == ["pytest -x"]
    assert ns["result"].status == "ok" and ns["call"].output == "1 passed in 0.01s"
    summary = ns["turn"].summary
    assert summary is not None and summary.outcome == "completed"
    # "call your model: holon.to_anthropic_messages(prompt, model=..., max_tokens=...)"
    request = holon.to_anthropic_messages(ns["prompt"], model="claude-sonnet-5-5", max_tokens=1_000)
    assert "Fix the failing CI job" in str(request["messages"])
    kinds = [rec.kind for rec in _records(tmp / "state/agent-7")]
    assert kinds[:3] == ["turn_started", "message", "prompt_rendered"] and "turn_ended" in kinds
    assert kinds.index("tool_intent") < kinds.index("tool_result") < kinds.index("turn_ended")
    _verifies(tmp / "state/agent-7")


# ---------------------------------------------------------------- docs/daemon-guide.md


@runner("docs/daemon-guide.md#1")
def _quick_start(code: str, tmp: Path) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        ns = _run(code, "quick start", {"run_bash": lambda command: ("released 2.4.1", 0)})
    assert isinstance(ns["result"], r.ToolResult) and ns["result"].status == "ok"
    assert out.getvalue().startswith("TurnSummary(turn=1, outcome='completed'")
    assert holon.Agent is Agent  # "Agent is also re-exported as holon.Agent"
    records = _records(tmp / "state/agent-7")
    policies = [rec.body.text for rec in records if isinstance(rec.body, r.SystemPolicy)]
    assert policies == ["You are a careful release engineer."]
    _verifies(tmp / "state/agent-7")


WRITE = "echo rollout-ok > status.txt; cat status.txt"
HANGS = "tail -f /var/log/rollout.log"


def _markers(request: dict[str, Any]) -> int:
    blocks = [*request["system"], *request.get("tools", ())]
    blocks += [b for m in request["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)


def _load_daemon(code: str, name: str, sdk: str, module: ModuleType) -> dict[str, Any]:
    """Run a daemon snippet's definitions with ``module`` standing in for the provider SDK."""
    saved = sys.modules.get(sdk)
    sys.modules[sdk] = module
    try:
        return _run(code, f"{name}.py", {"__name__": name})
    finally:
        if saved is None:
            del sys.modules[sdk]
        else:
            sys.modules[sdk] = saved


def _sdk_module(name: str, transport: Any) -> ModuleType:
    """A stand-in ``anthropic`` / ``openai`` module: its client is the real SDK's on ``transport``."""
    mocks = pytest.importorskip("tests.provider_mocks")
    module = ModuleType(name)
    if name == "anthropic":
        module.Anthropic = lambda: mocks.anthropic_client(transport.transport())  # type: ignore[attr-defined]
    else:
        module.OpenAI = lambda: mocks.openai_client(transport.transport())  # type: ignore[attr-defined]
    return module


def _run_daemon(
    code: str,
    name: str,
    sdk: str,
    transport: Any,
    *,
    tmp: Path,
    operator_lines: str,
    budget: holon.Budget | None = None,
) -> list[str]:
    """Run a daemon snippet's main on ``operator_lines`` as stdin, the SDK on ``transport``.

    ``budget`` replaces the snippet's CONFIG budget (a small one makes the rounds outgrow it).

    The daemon's bash tool runs for real in a workspace under ``tmp``, except ``HANGS``,
    which raises what subprocess.run(timeout=600) raises for a command that hangs.
    Returns the commands run.
    """
    ns = _load_daemon(code, name, sdk, _sdk_module(sdk, transport))
    workspace = tmp / "workspace"
    workspace.mkdir()
    ns["WORKSPACE"] = str(workspace)
    if budget is not None:
        ns["CONFIG"] = msgspec.structs.replace(ns["CONFIG"], budget=budget)
    ran: list[str] = []

    def run(argv: list[str], **kwargs: Any) -> Any:
        ran.append(argv[-1])
        if argv[-1] == HANGS:
            raise subprocess.TimeoutExpired(argv[-1], 600)
        return subprocess.run(argv, **kwargs)  # noqa: PLW1510 - the snippet passes check=False

    ns["subprocess"] = SimpleNamespace(run=run)
    stdin = sys.stdin
    sys.stdin = io.StringIO(operator_lines)
    try:
        ns["main"](str(tmp / "state/agent-7"))
    finally:
        sys.stdin = stdin
    return ran


def _use(use_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": args}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@runner("docs/daemon-guide.md#2")
def _anthropic_daemon(code: str, tmp: Path) -> None:
    mocks = pytest.importorskip("tests.provider_mocks")
    reply = mocks.anthropic_reply
    transport = mocks.RecordedTransport(
        "anthropic",
        [
            reply(_text("Writing it."), _use("u1", "bash", {"command": WRITE}), usage=(900, 0, 900, 30)),
            reply(_use("u2", "holon_search", {"query": "rollout"}), usage=(10, 900, 40, 20)),
            reply(_use("u3", "bash", {"command": HANGS}), usage=(10, 940, 300, 20)),
            reply(_text("Done: status.txt says rollout-ok."), usage=(10, 1240, 60, 15)),
        ],
    )
    ran = _run_daemon(
        code, "agentd", "anthropic", transport, tmp=tmp, operator_lines="write the rollout status\n\n"
    )

    assert (tmp / "workspace/status.txt").read_text() == "rollout-ok\n"
    assert ran == [WRITE, HANGS]
    calls = transport.requests
    assert len(calls) == 4 and transport.problems == []  # each one a request the SDK's types accept
    prompt_text = calls[0]["messages"][0]["content"][0]["text"]
    for k, request in enumerate(calls):
        assert request["model"] == "claude-sonnet-5-5" and request["max_tokens"] == 8_000
        assert [t["name"] for t in request["tools"]] == ["bash", "holon_get", "holon_search"]
        # One prompt for the whole turn: each call is the previous one plus its round.
        assert len(request["messages"]) == 1 + 2 * k
        first = request["messages"][0]
        assert first["role"] == "user" and first["content"][0]["text"] == prompt_text
        assert _markers(request) <= 4, "Anthropic allows at most four cache breakpoints"
        last = request["messages"][-1]["content"][-1]
        assert "cache_control" in last, "the end breakpoint is on the newest block"
    bash_result = calls[1]["messages"][-1]["content"][0]
    search_result = calls[2]["messages"][-1]["content"][0]
    assert bash_result["content"] == "rollout-ok\n" and "is_error" not in bash_result
    # The operator's request first (a request outranks the tool's output), each hit saying why.
    assert search_result["content"].startswith("3 hits for 'rollout', best first:\n1. ledger:2 — message")
    assert "   why: matched rollout in a request (x1.6)" in search_result["content"]
    # A tool that raises is an error result the model sees, not the end of the daemon.
    timed_out = calls[3]["messages"][-1]["content"][0]
    assert timed_out["is_error"] is True and "TimeoutExpired" in timed_out["content"]
    records = _records(tmp / "state/agent-7")
    assert [rec.kind for rec in records].count("prompt_rendered") == 1
    said = [b.text for b in (x.body for x in records) if isinstance(b, r.Message) and b.role == "assistant"]
    assert said == ["Writing it.", "Done: status.txt says rollout-ok."]
    # Every call's usage, as Anthropic reported it (input counts the cache reads and writes).
    usage = [
        (b.input_tokens, b.cache_read_tokens) for b in (x.body for x in records) if isinstance(b, r.ModelCall)
    ]
    assert usage == [(1_800, 0), (950, 900), (1_250, 940), (1_310, 1_240)]
    _verifies(tmp / "state/agent-7")


@runner("docs/daemon-guide.md#3")
def _recording(code: str, tmp: Path) -> None:
    with Agent.open(tmp / "l", agent_id="a") as agent:
        _run(code, "recording", {"agent": agent})
        assert agent.state.active_work_item_id is None, "W1 finished"
        assert not agent.state.waits and [w.id for w in agent.state.resolved_waits] == ["qa-2.4.1"]
    bodies = [rec.body for rec in _records(tmp / "l")]
    plan = next(b for b in bodies if isinstance(b, r.WorkPlan))
    assert plan.work_item_id == "W1" and [s.id for s in plan.steps] == ["s1", "s2", "s3"]
    assert any(isinstance(b, r.WaitingResolved) and b.resolution == "arrived" for b in bodies)
    ended = [b.outcome for b in bodies if isinstance(b, r.TurnEnded)]
    assert ended == ["waiting", "completed"]
    _verifies(tmp / "l")


BROKEN = '{"command": "rm -rf build" "--verbose"}'  # a missing comma: not JSON
COUNT = "seq 1 3000"  # an output larger than the rest of the budget after the prompt


@runner("docs/daemon-guide.md#4")
def _openai_daemon(code: str, tmp: Path) -> None:
    mocks = pytest.importorskip("tests.provider_mocks")
    said_ = mocks.chat_reply
    transport = mocks.RecordedTransport(
        "openai-chat",
        [
            # turn 1: text and a tool call; a recall call beside invalid arguments; a tool that raises
            said_("Writing it.", ("call_1", "bash", f'{{"command": "{WRITE}"}}')),
            said_(None, ("call_2", "holon_search", '{"query": "rollout"}'), ("call_3", "bash", BROKEN)),
            said_(None, ("call_4", "bash", f'{{"command": "{HANGS}"}}')),
            said_("Done: status.txt says rollout-ok."),
            # turn 2: a tool output that does not fit after the prompt, so the prompt is rendered again
            said_(None, ("call_5", "bash", f'{{"command": "{COUNT}"}}')),
            said_("Counted to 3000."),
        ],
    )
    lines = "write the rollout status\n\ncount to 3000\n"
    small = holon.Budget(context_window=6_000, output_reserve=500)
    ran = _run_daemon(code, "agentd_openai", "openai", transport, tmp=tmp, operator_lines=lines, budget=small)
    workspace = tmp / "workspace"
    calls = transport.requests
    assert transport.problems == []  # each one a request the SDK's types accept
    assert (workspace / "status.txt").read_text() == "rollout-ok\n"
    assert ran == [WRITE, HANGS, COUNT], "the call with invalid arguments ran nothing"
    assert len(calls) == 6
    for request in calls:
        check_openai_chat(request)
        assert request["model"] == "gpt-5.5" and request["max_completion_tokens"] == 8_000
        assert [t["function"]["name"] for t in request["tools"]] == ["bash", "holon_get", "holon_search"]
        assert "cache_control" not in json.dumps(request), "OpenAI has no cache breakpoints"
        # One routing key for the agent: every call of every turn reads the same cache.
        assert request["prompt_cache_key"] == "holon:agent-7:agent-7"
    # Turn 1: one prompt, [system, user], then each call is the previous one plus its round.
    head = calls[0]["messages"]
    assert [m["role"] for m in head] == ["system", "user"]
    assert (
        "You maintain the service" in head[0]["content"] and "write the rollout status" in head[1]["content"]
    )
    rounds = [m["role"] for m in calls[3]["messages"][2:]]
    assert rounds == ["assistant", "tool", "assistant", "tool", "tool", "assistant", "tool"]
    for k in range(1, 4):
        assert calls[k]["messages"][: len(calls[k - 1]["messages"])] == calls[k - 1]["messages"]
    tool_messages = {m["tool_call_id"]: m["content"] for m in calls[3]["messages"] if m["role"] == "tool"}
    assert tool_messages["call_1"] == "rollout-ok\n"
    assert tool_messages["call_2"].startswith("3 hits for 'rollout', best first:\n1. ledger:")
    assert tool_messages["call_3"] == (
        "bash: the arguments are not valid JSON (Expecting ',' delimiter: line 1 column 28 (char 27)); "
        f"nothing was run. Call bash again with its arguments as one JSON object. You sent: {BROKEN}"
    )
    assert "TimeoutExpired" in tool_messages["call_4"]
    # The invalid arguments go back as {}: servers that parse the history would refuse them.
    echoed = calls[3]["messages"][4]["tool_calls"]
    assert [(c["id"], c["function"]["arguments"]) for c in echoed] == [
        ("call_2", '{"query": "rollout"}'),
        ("call_3", "{}"),
    ]
    # Turn 2: the count's output did not fit after the prompt: a new prompt (its rounds now
    # history, the calls as native tool calls), and the messages start over from it.
    for k in (4, 5):
        messages = calls[k]["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert messages[: len(calls[3]["messages"])] != calls[3]["messages"]
    user_text = "\n".join(m["content"] for m in calls[5]["messages"] if m["role"] == "user")
    assert "count to 3000" in user_text
    history_calls = [c["id"] for m in calls[5]["messages"] for c in m.get("tool_calls", [])]
    assert "c2.1" in history_calls, "the call is in the new prompt's history"

    records = _records(tmp / "state/agent-7")
    intents = [(b.tool, b.args) for b in (x.body for x in records) if isinstance(b, r.ToolIntent)]
    assert intents == [
        ("bash", {"command": WRITE}),
        ("holon_search", {"query": "rollout"}),
        ("bash", {"unrecordable_arguments": BROKEN}),
        ("bash", {"command": HANGS}),
        ("bash", {"command": COUNT}),
    ]
    results = [(b.call_id, b.status) for b in (x.body for x in records) if isinstance(b, r.ToolResult)]
    assert results == [("c1.1", "ok"), ("c1.2", "ok"), ("c1.3", "error"), ("c1.4", "error"), ("c2.1", "ok")]
    rendered = [x.turn for x in records if x.kind == "prompt_rendered"]
    assert rendered == [1, 2, 2]
    said = [b.text for b in (x.body for x in records) if isinstance(b, r.Message) and b.role == "assistant"]
    assert said == ["Writing it.", "Done: status.txt says rollout-ok.", "Counted to 3000."]
    _verifies(tmp / "state/agent-7")


@runner("docs/daemon-guide.md#5")
def _tool_signature(code: str, tmp: Path) -> None:
    with Agent.open(tmp / "l", agent_id="a") as agent, agent.turn(input="go") as turn:
        ns = _run(code, "turn.tool", {"turn": turn, "name": "bash", "args": {"cmd": "ls"}})
        call = ns["call"]
        assert isinstance(call, ToolCall) and not call.replayed
        call.finish("a.txt")
    assert [rec.kind for rec in _records(tmp / "l")].count("tool_result") == 1


@runner("docs/daemon-guide.md#6")
def _agents_sdk_session(code: str, tmp: Path) -> None:
    agents.set_tracing_disabled(True)
    model = ScriptedModel([[assistant_message("It shipped today.")], [assistant_message("Thursday.")]])
    (tmp / "runs").mkdir()
    with contextlib.chdir(tmp):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            _run(code, "daemon-guide.md", {"model": model})
    assert printed.getvalue() == "Thursday.\n"
    # The second run's model was shown holon's rendering of the first, then the new question.
    second = model.calls[1].input
    shown = json.dumps(second[:-1])
    assert "Where is order 1182?" in shown and "It shipped today." in shown
    assert second[-1] == {"content": "And when does it arrive?", "role": "user"}
    kinds = [rec.kind for rec in _records(tmp / "runs/support-bot")]
    assert kinds.count("turn_ended") == 2  # both runs' turns ended: the last one at the block's end
    _verifies(tmp / "runs/support-bot")


@runner("docs/daemon-guide.md#7")
def _langgraph_hook(code: str, tmp: Path) -> None:
    replies = [AIMessage(content="Yes, it is green."), AIMessage(content="The nightly one.")]
    model = ScriptedChat(iter(replies))
    (tmp / "runs").mkdir()
    with contextlib.chdir(tmp), warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent, moved in LangGraph 1.0
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            _run(code, "daemon-guide.md", {"model": model, "tools": [read_log]})
    assert printed.getvalue() == "The nightly one.\n"
    # The second invocation's model call was sent holon's context holding the first turn.
    shown = "\n".join(str(m.content) for m in model.sent[1])
    assert "Is the nightly build green?" in shown and "Yes, it is green." in shown
    kinds = [rec.kind for rec in _records(tmp / "runs/build-bot")]
    assert kinds.count("turn_ended") == 2
    _verifies(tmp / "runs/build-bot")


# ---------------------------------------------------------------- docs/context-rendering.md


@runner("docs/context-rendering.md#1")
def _render_by_hand(code: str, tmp: Path) -> None:
    path = tmp / "state/agent-7"
    with Agent.open(path, agent_id="agent-7") as agent, agent.turn(input="triage the billing queue") as turn:
        turn.add_work_item("W1", "triage the billing queue", state="active")
    # A caller outside the runtime renders for its own next model call, in a turn it opened.
    with Ledger.open(path) as ledger:
        now = ledger.get(ledger.head()[0]).ts
        ledger.append(r.Record(body=r.TurnStarted(trigger="user"), ts=now, turn=2))
        ledger.append(r.Record(body=r.Message(role="user", text="what is left?"), ts=now, turn=2))
    before = fold(_records(path)).memory
    assert before.pending is not None, "the first turn's delta is pending"
    ns = _run(code, "context-rendering.md")
    # No policy and no episodes: nothing is cached before the history, so no system text;
    # working memory travels in the user message, after the history.
    assert set(ns["request"]) >= {"model", "max_tokens", "messages"}
    assert ns["turn"] == 2 and "what is left?" in ns["prompt"].text
    user = "".join(b["text"] for b in ns["request"]["messages"][0]["content"])
    assert "## Working memory" in user and user.index("what is left?") > user.index("## Working memory")
    records = _records(path)
    assert records[-1].kind == "prompt_rendered"
    after = fold(records).memory
    # "confirms the pending delta"
    assert after.pending is None and after.confirmed_revision == before.revision
    _verifies(path)


@runner("docs/context-rendering.md#2")
def _restore_by_ref(code: str, tmp: Path) -> None:
    output = "".join(f"row {i}: copied\n" for i in range(2_000))  # over the blob threshold
    with Agent.open(tmp / "state/agent-7", agent_id="agent-7") as agent, agent.turn(input="copy") as turn:
        seq = turn.tool("copy", {}).run(lambda: output)
    stored = _records(tmp / "state/agent-7")
    result = next(rec for rec in stored if isinstance(rec.body, r.ToolResult))
    assert result.body.blob is not None and result.body.output == ""
    ns = _run(code.replace("ledger:1234", f"ledger:{result.seq}"), "restore")  # the doc's ref is an example
    assert ns["output"] == output.encode() and seq is not None


# ---------------------------------------------------------------- docs/importers.md


@runner("docs/importers.md#1")
def _importers(code: str, tmp: Path) -> None:
    shutil.copy(ROOT / "fixtures/importers/claude-code/session.jsonl", tmp / "session.jsonl")
    data = (ROOT / "fixtures/importers/openhands/events.json").read_bytes()
    ns = _run(code, "importers.md", {"data": data})
    records, report = ns["records"], ns["report"]
    assert isinstance(records, list) and records and all(rec.seq == -1 for rec in records)
    assert isinstance(report, ImportReport) and isinstance(report.records, tuple)
    assert [rec.body for rec in report.records] == [rec.body for rec in records]
    assert isinstance(report.skipped, dict) and report.skipped_total == sum(report.skipped.values())
    assert isinstance(ns["IMPORTERS"]["openhands"].parse_bytes(data, source="name"), ImportReport)
    assert "claude-code" in ns["FORMATS"]


# ---------------------------------------------------------------- docs/audit.md


def _two_agents(tmp: Path) -> None:
    for name in ("agent-7", "agent-8"):
        with Agent.open(tmp / "runs" / name, agent_id=name) as agent:
            for i in range(3):
                with agent.turn(input=f"step {i}") as turn:
                    turn.context()
                    turn.tool("bash", {"cmd": f"make step{i}"}).run(lambda: ("ok", 0))


@runner("docs/audit.md#1")
def _audit(code: str, tmp: Path) -> None:
    _two_agents(tmp)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _run(code, "audit.md")
    assert "bash" in out.getvalue()
    assert list((tmp / "out").rglob("*.parquet"))


@runner("docs/audit.md#2")
def _audit_export(code: str, tmp: Path) -> None:
    _two_agents(tmp)
    _run(code, "audit.md", {"export_parquet": holon.audit.export_parquet})
    assert list((tmp / "warehouse").rglob("*.parquet"))


# ---------------------------------------------------------------- examples/daemon.py


def test_the_example_daemon_prints_what_the_readme_says(tmp_path: Path) -> None:
    # README.md / docs/daemon-guide.md: per turn the prompt tokens by stability class,
    # revision, epoch, whether the cache key changed and how many episodes were finalized;
    # then a summary table; tools run in a workspace next to the ledger.
    lines: list[str] = []
    ledger = tmp_path / "ledger"
    load_daemon().run(ledger, turns=30, out=lines.append)
    assert lines[0] == f"ledger {ledger}: created (full fold, 0 records folded)"
    assert lines[1].split() == ["turn", "action", "stable", "agent", "turn", "rev", "ep", "key", "episodes"]
    row = re.compile(r" *(\d+) (W\d+ [a-z0-9 ()]+?) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) (NEW |same)  (\+\d+)?")
    turns = [row.match(line) for line in lines[2:32]]
    assert all(turns), lines[2:32]
    assert [int(t[1]) for t in turns if t] == list(range(1, 31))
    assert {t[8] for t in turns if t} == {"NEW ", "same"}
    assert {t[9] for t in turns if t} == {None, "+1"}  # the episodes that turn finalized
    # Each verify step checks the report against the data the load step read: in the prompt
    # while the history holds it (it fits this window), restored by its ref once cleared.
    with Ledger.open(ledger, readonly=True) as opened:
        verdicts = [
            rec.body.text
            for rec in opened.read(0)
            if isinstance(rec.body, r.Message) and rec.body.text.startswith("verify: the report's total")
        ]
    assert verdicts and all(" matches, the sum of the " in v for v in verdicts), verdicts
    assert "summary" in lines and any(line.startswith("episodes archived") for line in lines)
    workspace = tmp_path / "ledger-workspace"
    assert sorted(p.name for p in (workspace / "reports").iterdir())[:1] == ["W1.md"]
    _verifies(ledger)


# ---------------------------------------------------------------- the tests


def test_every_python_snippet_has_a_runner() -> None:
    assert sorted(_snippets()) == sorted(RUNNERS)


@pytest.mark.parametrize("name", sorted(RUNNERS))
def test_the_snippet_runs_and_does_what_the_text_says(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    RUNNERS[name](_snippets()[name], tmp_path)


def _dotted_names() -> list[str]:
    names = {m.group(1) for doc in DOCS for m in re.finditer(r"`(holon(?:\.[A-Za-z_]\w*)+)", doc.read_text())}
    return sorted(names)


@pytest.mark.parametrize("name", _dotted_names())
def test_every_holon_name_the_docs_spell_out_exists(name: str) -> None:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            found = getattr(found, part)
        return
    pytest.fail(f"{name} does not import")
