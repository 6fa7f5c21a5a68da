"""Importer follow-ups: what OpenHands V1 tools record, imports into a long ledger, real transcripts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import holon.cli.ledgers
import holon.records as r
from holon.importers import ImportReport
from holon.ledger import Ledger
from holon.records import ExecutionEnvironment, PlanStep, ToolResult, WorkPlan
from tests.cli_support import checkpoint_at_head, invoke, write_jsonl
from tests.importers_support import parse_as

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

# ---------------------------------------------------------------- OpenHands V1 tool observations
#
# Event shapes from OpenHands/software-agent-sdk: openhands-sdk/openhands/sdk/event/llm_convertible/
# {action,observation}.py (ActionEvent, ObservationEvent) and openhands-tools/openhands/tools/
# terminal/definition.py + metadata.py (TerminalObservation: exit_code, timeout, metadata.exit_code,
# metadata.working_dir), file_editor/definition.py (FileEditorAction / FileEditorObservation: command,
# path, prev_exist, old_content, new_content), task_tracker/definition.py (TaskTrackerAction: command
# plan / view, task_list of TaskItem id, title, notes, status todo / in_progress / done).


def _user(text: str) -> dict[str, Any]:
    return {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": text}}


def _action(call: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ActionEvent",
        "source": "agent",
        "thought": [],
        "action": {"kind": "X", **arguments},
        "tool_name": tool,
        "tool_call_id": call,
        "tool_call": {"id": call, "name": tool, "arguments": json.dumps(arguments), "origin": "completion"},
        "llm_response_id": "r",
    }


def _observation(call: str, tool: str, observation: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ObservationEvent",
        "source": "environment",
        "tool_name": tool,
        "tool_call_id": call,
        "action_id": f"a-{call}",
        "observation": observation,
    }


def _terminal(text: str, code: int, *, cwd: str = "/work", timeout: bool = False) -> dict[str, Any]:
    return {
        "kind": "TerminalObservation",
        "content": [{"cache_prompt": False, "type": "text", "text": text}],
        "is_error": False,
        "command": "x",
        "exit_code": code,
        "timeout": timeout,
        "metadata": {"exit_code": code, "pid": -1, "working_dir": cwd, "prefix": "", "suffix": ""},
    }


def _editor(command: str, path: str, *, is_error: bool = False) -> dict[str, Any]:
    return {
        "kind": "FileEditorObservation",
        "content": [{"type": "text", "text": f"{command} {path}"}],
        "is_error": is_error,
        "command": command,
        "path": path,
        "prev_exist": command != "create",
        "old_content": None,
        "new_content": None,
    }


def _v1(*events: dict[str, Any]) -> ImportReport:
    return parse_as("openhands", json.dumps([_user("go"), *events]).encode())


def _results(report: ImportReport) -> list[ToolResult]:
    return [rec.body for rec in report.records if isinstance(rec.body, ToolResult)]


def test_v1_terminal_exit_codes_give_the_status_and_are_kept() -> None:
    report = _v1(
        _action("c1", "terminal", {"command": "pytest"}),
        _observation("c1", "terminal", _terminal("1 failed", 1)),
        _action("c2", "terminal", {"command": "ls"}),
        _observation("c2", "terminal", _terminal("a b", 0)),
        _action("c3", "terminal", {"command": "sleep 99"}),
        _observation("c3", "terminal", _terminal("", -1, timeout=True)),
    )
    # A failing test run was `ok` (no exit code read): holon's recent tools and memory showed it as passed.
    assert [(r.status, r.exit_code) for r in _results(report)] == [
        ("error", 1),
        ("ok", 0),
        ("interrupted", -1),
    ]


def test_v1_terminal_exit_code_from_the_metadata_when_the_observation_states_none() -> None:
    older = _terminal("boom", 2)
    del older["exit_code"]  # an observation that keeps it only in its PS1 metadata
    report = _v1(
        _action("c1", "execute_bash", {"command": "make"}), _observation("c1", "execute_bash", older)
    )
    assert [(r.status, r.exit_code) for r in _results(report)] == [("error", 2)]


def test_v1_terminal_working_dir_is_the_execution_environment() -> None:
    report = _v1(
        _action("c1", "terminal", {"command": "cd src"}),
        _observation("c1", "terminal", _terminal("", 0, cwd="/work/src")),
    )
    envs = [rec.body for rec in report.records if isinstance(rec.body, ExecutionEnvironment)]
    # The run's start, whose directory is not known yet, then the one the terminal reported.
    assert [e.cwd for e in envs] == [None, "/work/src"]


def test_v1_file_editor_writes_are_touched_files_and_views_are_not() -> None:
    report = _v1(
        _action("c1", "file_editor", {"command": "view", "path": "/work/a.py"}),
        _observation("c1", "file_editor", _editor("view", "/work/a.py")),
        _action("c2", "file_editor", {"command": "str_replace", "path": "/work/a.py", "old_str": "x"}),
        _observation("c2", "file_editor", _editor("str_replace", "/work/a.py")),
        _action("c3", "file_editor", {"command": "create", "path": "/work/b.py", "file_text": ""}),
        _observation("c3", "file_editor", _editor("create", "/work/b.py")),
        _action("c4", "file_editor", {"command": "insert", "path": "/work/c.py"}),
        _observation("c4", "file_editor", _editor("insert", "/work/c.py", is_error=True)),
    )
    assert [(r.status, r.touched_files) for r in _results(report)] == [
        ("ok", ()),
        ("ok", ("/work/a.py",)),
        ("ok", ("/work/b.py",)),
        ("error", ()),  # a failed edit wrote nothing
    ]


def test_v1_str_replace_editor_without_a_path_in_its_observation_reads_the_call() -> None:
    observation = {"kind": "StrReplaceEditorObservation", "content": "done", "is_error": False}
    report = _v1(
        _action("c1", "str_replace_editor", {"command": "create", "path": "/w/n.py", "file_text": ""}),
        _observation("c1", "str_replace_editor", observation),
    )
    assert [r.touched_files for r in _results(report)] == [("/w/n.py",)]


def _tasks(*items: tuple[str, str]) -> list[dict[str, str]]:
    return [
        {"id": str(n), "title": title, "notes": "", "status": status}
        for n, (title, status) in enumerate(items)
    ]


def test_v1_task_tracker_plan_is_the_agents_plan() -> None:
    plan = _tasks(("read the code", "done"), ("fix the bug", "in_progress"), ("run tests", "todo"))
    report = _v1(
        _action("c1", "task_tracker", {"command": "plan", "task_list": plan}),
        _observation(
            "c1", "task_tracker", {"kind": "TaskTrackerObservation", "content": "ok", "command": "plan"}
        ),
        _action("c2", "task_tracker", {"command": "view"}),
    )
    plans = [rec.body for rec in report.records if isinstance(rec.body, WorkPlan)]
    assert plans == [
        WorkPlan(
            work_item_id=None,
            steps=(
                PlanStep(id="0", text="read the code", status="done"),
                PlanStep(id="1", text="fix the bug", status="in_progress"),
                PlanStep(id="2", text="run tests", status="pending"),
            ),
        )
    ]


def test_v0_task_tracking_action_is_the_agents_plan_too() -> None:
    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
        {
            "id": 2,
            "source": "agent",
            "action": "task_tracking",
            "args": {"command": "plan", "task_list": _tasks(("a", "done"), ("b", "todo")), "thought": ""},
            "tool_call_metadata": {"function_name": "task_tracker", "tool_call_id": "t1"},
        },
    ]
    report = parse_as("openhands", json.dumps(events).encode())
    plans = [rec.body for rec in report.records if isinstance(rec.body, WorkPlan)]
    assert [[(s.text, s.status) for s in p.steps] for p in plans] == [[("a", "done"), ("b", "pending")]]


# ---------------------------------------------------------------- holon import into a long ledger


def _turn_starts(path: Path) -> list[int | None]:
    with Ledger.open(path, readonly=True) as ledger:
        return [rec.turn for rec in ledger.read() if isinstance(rec.body, r.TurnStarted)]


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the passes the CLI makes over a ledger from seq 0 (what `_passes` reads)."""
    passes: list[int] = []
    real = holon.cli.ledgers._passes

    def counted(ledger: Ledger) -> Any:
        read, resume = real(ledger)

        def read_counted() -> Iterator[r.Record]:
            passes.append(1)
            return iter(read())

        return read_counted, resume

    # Where `holon import` looks it up: beside _state_to_append_to, which makes the passes.
    monkeypatch.setattr(holon.cli.ledgers, "_passes", counted)
    return passes


def test_import_into_a_checkpointed_ledger_reads_no_record_before_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    session = FIXTURES / "claude-code" / "session.jsonl"
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    first = _turn_starts(ledger)
    with Ledger.open(ledger) as writer:
        checkpoint_at_head(writer)
    passes = _count_passes(monkeypatch)
    result = invoke("import", ledger, FIXTURES / "openhands" / "runs.jsonl", "--from", "openhands")
    assert result.exit_code == 0, result.stderr
    # It read every record to find the highest turn (8-9 s of a 1M-record ledger's import): the
    # checkpoint's state says what the last turn was.
    assert passes == []
    turns = _turn_starts(ledger)
    assert turns[: len(first)] == first
    assert turns == list(range(len(turns)))  # the second transcript's turns follow the first's
    assert invoke("verify", ledger).exit_code == 0


def test_import_with_no_checkpoint_numbers_turns_as_before(tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    for fmt, name in (
        ("claude-code", "session.jsonl"),
        ("openhands", "runs.jsonl"),
        ("openhands", "events.json"),
    ):
        assert invoke("import", ledger, FIXTURES / fmt / name, "--from", fmt).exit_code == 0
    turns = _turn_starts(ledger)
    assert turns == list(range(len(turns)))
    assert invoke("verify", ledger).exit_code == 0


def test_import_after_an_unnumbered_last_turn_follows_the_highest_turn_a_record_names(tmp_path: Path) -> None:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    records = [
        r.Record(body=r.TurnStarted(trigger="user_message", input="a"), ts=1, turn=5),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=2, turn=5),
        r.Record(body=r.TurnStarted(trigger="timer", input=None), ts=3, turn=None),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=4, turn=None),
    ]
    assert invoke("append", ledger, write_jsonl(tmp_path / "in.jsonl", records)).exit_code == 0
    # The last turn names no number, so the state cannot say where numbering goes on: every
    # record is read, and the import follows turn 5 rather than starting again at 0.
    assert (
        invoke("import", ledger, FIXTURES / "openhands" / "events.json", "--from", "openhands").exit_code == 0
    )
    assert _turn_starts(ledger)[:3] == [5, None, 6]


# ---------------------------------------------------------------- OpenHands V0: the call the model wrote


def _v0_call(
    event_id: int, action: str, args: dict[str, Any], written: dict[str, Any] | str
) -> dict[str, Any]:
    """A V0 tool action as OpenHands' evaluation output keeps it: its action object, and the model's
    response in `tool_call_metadata.model_response` (All-Hands-AI/OpenHands evaluation/benchmarks/
    multi_swe_bench/examples/output.jsonl)."""
    arguments = written if isinstance(written, str) else json.dumps(written)
    call = {
        "index": 1,
        "function": {"arguments": arguments, "name": "str_replace_editor"},
        "id": f"toolu_{event_id}",
    }
    other = {
        "index": 0,
        "function": {"arguments": "{}", "name": "x"},
        "id": "toolu_other",
        "type": "function",
    }
    return {
        "id": event_id,
        "source": "agent",
        "action": action,
        "args": args,
        "tool_call_metadata": {
            "function_name": "str_replace_editor",
            "tool_call_id": f"toolu_{event_id}",
            "model_response": {
                "choices": [{"index": 0, "message": {"role": "assistant", "tool_calls": [other, call]}}]
            },
            "total_calls_in_response": 2,
        },
    }


def test_v0_tool_call_records_the_arguments_the_model_wrote() -> None:
    view_args = {"path": "/w/a.c", "start": 0, "end": -1, "impl_source": "oh_aci", "view_range": [1, 5]}
    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "go"}},
        _v0_call(
            2,
            "read",
            view_args | {"thought": "look"},
            {"command": "view", "path": "/w/a.c", "view_range": [1, 5]},
        ),
        {"id": 3, "source": "agent", "observation": "read", "cause": 2, "content": "1 x", "extras": {}},
        _v0_call(4, "read", view_args, "not json"),
    ]
    intents = [
        rec.body
        for rec in parse_as("openhands", json.dumps(events).encode()).records
        if rec.kind == "tool_intent"
    ]
    # It recorded OpenHands' read action (`start`, `end`, `impl_source`), which has no `command`: the
    # prompt showed a str_replace_editor call the model never made.
    assert [i.args for i in intents] == [
        {"command": "view", "path": "/w/a.c", "view_range": [1, 5]},
        view_args,  # arguments that are no JSON object: the action's own, as before
    ]
