"""OpenHands importer: actions joined to observations by `cause`, exit codes, edits, runs, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from holon.errors import InvalidRecord
from holon.importers import parse_openhands, read_transcript
from holon.records import (
    Brief,
    ExecutionEnvironment,
    Message,
    Record,
    SystemPolicy,
    ToolDefinition,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    encode_json_record,
)
from tests.cli_support import invoke
from tests.importers_support import declared

FIXTURES = Path(__file__).parent.parent / "fixtures" / "importers" / "openhands"
T0 = 1_746_028_800_000  # 2025-04-30T16:00:00 (naive timestamps are read as UTC)
T1 = T0 + 3_600_000  # the second run starts an hour later


def _records(name: str) -> list[Record]:
    return list(read_transcript(FIXTURES / name, "openhands").records)


def test_runs_map_to_exact_records() -> None:
    ask = "Fix add() in /workspace/calc.py."
    bash = ToolDefinition(
        name="execute_bash",
        description="Run a shell command.",
        parameters={"type": "object", "properties": {"command": {"type": "string"}}},
    )
    pytest_args = {
        "command": "python -m pytest -q",
        "is_input": False,
        "blocking": False,
        "cwd": None,
        "hidden": False,
    }
    read_args = {
        "path": "/workspace/calc.py",
        "start": 0,
        "end": -1,
        "impl_source": "oh_aci",
        "view_range": None,
    }
    edit_args = {
        "path": "/workspace/calc.py",
        "command": "str_replace",
        "file_text": None,
        "old_str": "a - b",
        "new_str": "a + b",
        "insert_line": None,
        "impl_source": "oh_aci",
    }
    bad_edit_args = {
        "path": "/workspace/util.py",
        "command": "str_replace",
        "old_str": "x",
        "new_str": "y",
        "impl_source": "oh_aci",
    }
    rejected = "Parameter 'command' is expected to be one of ['view', 'create']."
    timeline: list[tuple[object, int, int | None]] = [
        # Each run starts with the environment that names it by its instance.
        (ExecutionEnvironment(extra={"session_id": "calc-1"}), T0, None),
        # The tools it called without defining them are declared by name.
        (
            SystemPolicy(
                text="You are OpenHands agent.", tools=(bash, *declared("str_replace_editor", "think"))
            ),
            T0,
            None,
        ),
        (TurnStarted(trigger="user_message", input=ask), T0 + 1000, 0),
        (Message(role="user", text=ask), T0 + 1000, 0),
        # The model's text accompanying a call (`args.thought`) is its assistant message.
        (Message(role="assistant", text="Run the tests first."), T0 + 3000, 0),
        (ToolIntent(call_id="toolu_01", tool="execute_bash", args=pytest_args), T0 + 3000, 0),
        (
            ToolResult(
                call_id="toolu_01", tool="execute_bash", status="error", output="1 failed", exit_code=1
            ),
            T0 + 4500,
            0,
        ),
        (ExecutionEnvironment(cwd="/workspace", extra={"session_id": "calc-1"}), T0 + 4500, 0),
        (ToolIntent(call_id="toolu_02", tool="str_replace_editor", args=read_args), T0 + 6000, 0),
        (
            ToolResult(
                call_id="toolu_02",
                tool="str_replace_editor",
                status="ok",
                output="def add(a, b):\n    return a - b\n",
            ),
            T0 + 6100,
            0,
        ),
        (Message(role="assistant", text="Fix the operator."), T0 + 9000, 0),
        (ToolIntent(call_id="toolu_03", tool="str_replace_editor", args=edit_args), T0 + 9000, 0),
        (
            ToolResult(
                call_id="toolu_03",
                tool="str_replace_editor",
                status="ok",
                output="The file /workspace/calc.py has been edited.",
                touched_files=("/workspace/calc.py",),
            ),
            T0 + 9050,
            0,
        ),
        (ToolIntent(call_id="toolu_04", tool="str_replace_editor", args=bad_edit_args), T0 + 10_000, 0),
        # A failed edit touched nothing.
        (
            ToolResult(
                call_id="toolu_04",
                tool="str_replace_editor",
                status="error",
                output="ERROR:\nNo replacement was performed, old_str `x` did not appear verbatim.",
            ),
            T0 + 10_050,
            0,
        ),
        (Message(role="channel", channel="openhands:error", text=rejected), T0 + 11_000, 0),
        (Message(role="assistant", text="Fixed add()."), T0 + 12_000, 0),
        (Brief(status="result", text="add() now adds."), T0 + 12_000, 0),
        (TurnEnded(outcome="completed"), T0 + 12_000, 0),
        # The second run's sandbox: its working directory is not known until it reports one.
        (ExecutionEnvironment(extra={"session_id": "calc-2"}), T1, None),
        (TurnStarted(trigger="user_message", input="Build the project."), T1, 1),
        (Message(role="user", text="Build the project."), T1, 1),
        # Call ids restart per run: the second run's toolu_01 gets a unique holon id.
        (
            ToolIntent(
                call_id="toolu_01#2", tool="execute_bash", args={"command": "make", "blocking": False}
            ),
            T1 + 2000,
            1,
        ),
        # exit code -1: OpenHands stopped waiting for the command.
        (
            ToolResult(
                call_id="toolu_01#2",
                tool="execute_bash",
                status="interrupted",
                output="[Command timed out]",
                exit_code=-1,
            ),
            T1 + 122_000,
            1,
        ),
        (ExecutionEnvironment(cwd="/workspace/build", extra={"session_id": "calc-2"}), T1 + 122_000, 1),
        (
            ToolIntent(call_id="toolu_02#2", tool="think", args={"thought": "Try a clean build."}),
            T1 + 123_000,
            1,
        ),
        (
            ToolResult(
                call_id="toolu_02#2", tool="think", status="ok", output="Your thought has been logged."
            ),
            T1 + 123_100,
            1,
        ),
        (
            ToolIntent(
                call_id="toolu_03#2", tool="execute_bash", args={"command": "make clean", "blocking": False}
            ),
            T1 + 125_000,
            1,
        ),
        (
            TurnEnded(
                outcome="failed", error="RuntimeError: Agent reached maximum iteration in headless mode."
            ),
            T1 + 125_000,
            1,
        ),
    ]
    assert _records("runs.jsonl") == [Record(body=b, ts=ts, turn=turn) for b, ts, turn in timeline]  # type: ignore[arg-type]


def test_runs_counts_and_skips() -> None:
    report = read_transcript(FIXTURES / "runs.jsonl", "openhands")
    assert (report.turns, report.tool_calls, report.unmatched_intents) == (2, 7, 1)
    assert report.skipped == {"action:recall": 1, "observation:recall": 1}


def test_bare_event_array_without_tool_call_metadata() -> None:
    report = read_transcript(FIXTURES / "events.json", "openhands")
    bodies = [r.body for r in report.records]
    assert ToolIntent(call_id="1", tool="run", args={"command": "ls"}) in bodies
    assert ToolResult(call_id="1", tool="run", status="ok", output="README.md", exit_code=0) in bodies
    assert report.skipped == {"observation:agent_state_changed": 1}
    assert report.turns == 1


def test_a_write_action_touched_the_file_it_wrote() -> None:
    """CodeAct before function calling wrote whole files with ``write`` (FileWriteAction), not ``edit``."""
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "add a test"}},
        {
            "id": 1,
            "source": "agent",
            "action": "write",
            "args": {"path": "/workspace/test_calc.py", "content": "x"},
        },
        {
            "id": 2,
            "cause": 1,
            "source": "agent",
            "observation": "write",
            "content": "",
            "extras": {"path": "/workspace/test_calc.py"},
        },
    ]
    report = parse_openhands(json.dumps(events).encode(), source="t")
    result = next(r.body for r in report.records if isinstance(r.body, ToolResult))
    assert (result.status, result.touched_files) == ("ok", ("/workspace/test_calc.py",))


def test_a_rejected_action_and_a_failed_browse_are_errors() -> None:
    """UserRejectObservation (the action never ran) and a BrowserOutputObservation with ``error``."""
    rejected = "Action has been rejected by the user! Waiting for further user input."
    events = [
        {"id": 0, "source": "user", "action": "message", "args": {"content": "look it up"}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "rm -rf build"}},
        {"id": 2, "cause": 1, "source": "user", "observation": "user_rejected", "content": rejected},
        {"id": 3, "source": "agent", "action": "browse", "args": {"url": "http://localhost:9/"}},
        {
            "id": 4,
            "cause": 3,
            "source": "agent",
            "observation": "browse",
            "content": "net::ERR_CONNECTION_REFUSED",
            "extras": {"url": "http://localhost:9/", "error": True},
        },
    ]
    report = parse_openhands(json.dumps(events).encode(), source="t")
    results = [r.body for r in report.records if isinstance(r.body, ToolResult)]
    assert [(r.tool, r.status) for r in results] == [("run", "error"), ("browse", "error")]


def test_same_bytes_give_byte_identical_records() -> None:
    assert [encode_json_record(r) for r in _records("runs.jsonl")] == [
        encode_json_record(r) for r in _records("runs.jsonl")
    ]


def test_malformed_line_names_the_line() -> None:
    with pytest.raises(InvalidRecord, match=r"line 2 of .*malformed\.jsonl: not a JSON value"):
        read_transcript(FIXTURES / "malformed.jsonl", "openhands")


def test_wrong_shape_names_line_and_event() -> None:
    with pytest.raises(InvalidRecord) as info:
        read_transcript(FIXTURES / "wrong-shape.jsonl", "openhands")
    assert info.value.where is not None and info.value.where.startswith("line 1 of ")
    assert info.value.field == "history[1]"
    assert "not an OpenHands event (no `action` or `observation`)" in str(info.value)


def test_other_format_is_refused_with_a_hint() -> None:
    claude = Path(__file__).parent.parent / "fixtures" / "importers" / "claude-code" / "session.jsonl"
    with pytest.raises(InvalidRecord, match=r"line 1 of .*not an OpenHands run.*--from openhands"):
        read_transcript(claude, "openhands")


# ------------------------------------------------ an OpenHands V1 conversation with an index twice


def test_an_openhands_conversation_holding_two_files_of_one_event_names_both(tmp_path: Path) -> None:
    # A conversation directory with a copy merged into it: two files numbered 00003. The
    # import said "has no event 00004 (the next file is event-00003-...)", naming a gap
    # that is not there and not the file that does not belong.
    conversation = tmp_path / "conversation"
    shutil.copytree(FIXTURES / "v1-conversation", conversation)
    events = conversation / "events"
    first = next(events.glob("event-00003-*.json"))
    copy = events / "event-00003-0b000000-0000-4000-8000-000000000003.json"
    shutil.copyfile(first, copy)
    ledger = tmp_path / "ledger"
    assert invoke("init", ledger, "--agent-id", "oh").exit_code == 0

    result = invoke("import", ledger, conversation, "--from", "openhands")

    assert result.exit_code == 2, result.stdout + result.stderr
    assert f"holds two files for event 00003, {first.name} and {copy.name}" in result.stderr, result.stderr
    assert "no event 00004" not in result.stderr
