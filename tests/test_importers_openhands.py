"""OpenHands importer: actions joined to observations by `cause`, exit codes, edits, runs, errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord, UsageError
from holon.importers import parse_openhands, read_transcript
from holon.records import (
    Brief,
    ContextSummary,
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
from tests.importers_support import (
    declared,
    imported_tools,
    message_texts,
    parse_as,
    refused_import,
    tool_calls_of,
)

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


# ---------------------------------------------------------------- images, older runs, OpenDevin


def test_openhands_message_images_are_counted_as_skipped() -> None:
    # Images pasted into an OpenHands message are not imported (as in every format), but the
    # report must say so rather than drop them without a count.
    events = json.dumps(
        [
            {
                "id": 1,
                "source": "user",
                "action": "message",
                "args": {"content": "see", "image_urls": ["data:image/png;base64,AA", "b.png"]},
            }
        ]
    )
    report = parse_as("openhands", events.encode())
    assert message_texts(report) == ["see"] and report.skipped == {"image": 2}


def _openhands_run(observation_extras: dict[str, Any]) -> bytes:
    return json.dumps(
        [
            {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
            {"id": 2, "source": "agent", "action": "run", "args": {"command": "git status", "thought": ""}},
            {
                "id": 3,
                "source": "agent",
                "cause": 2,
                "observation": "run",
                "content": "fatal: not a git repository",
                "extras": observation_extras,
            },
        ]
    ).encode()


@pytest.mark.parametrize(("code", "status"), [(128, "error"), (0, "ok"), (-1, "interrupted")])
def test_an_older_openhands_run_keeps_its_exit_code_on_extras(code: int, status: str) -> None:
    # OpenDevin and early OpenHands wrote `extras: {"command_id", "command", "exit_code"}` (no
    # `metadata`): a failed command was imported as `ok` with no exit code.
    old = {"command_id": -1, "command": "git status", "exit_code": code}
    report = parse_as("openhands", _openhands_run(old))
    results = [rec.body for rec in report.records if isinstance(rec.body, ToolResult)]
    assert [(r.status, r.exit_code) for r in results] == [(status, code)]
    # The current shape still wins where both are present.
    current = {"exit_code": 7, "metadata": {"exit_code": code}}
    results = [
        rec.body
        for rec in parse_as("openhands", _openhands_run(current)).records
        if isinstance(rec.body, ToolResult)
    ]
    assert [(r.status, r.exit_code) for r in results] == [(status, code)]


def test_an_opendevin_history_of_action_observation_pairs_imports() -> None:
    # OpenDevin and early OpenHands evaluation outputs store `history` as [action, observation]
    # pairs whose events have no `id` or `cause`: the whole file was refused ("expected an
    # object"). The pair says which action an observation answers.
    run = {
        "instance_id": "x",
        "history": [
            [
                {"source": "user", "action": "message", "args": {"content": "fix it"}},
                {"source": "user", "observation": "null", "content": "", "extras": {}},
            ],
            [
                {"source": "agent", "action": "run", "args": {"command": "git status", "thought": "Look."}},
                {
                    "source": "agent",
                    "observation": "run",
                    "content": "fatal: not a git repository",
                    "extras": {"command_id": -1, "command": "git status", "exit_code": 128},
                },
            ],
            [
                {"source": "agent", "action": "run", "args": {"command": "ls", "thought": ""}},
                {
                    "source": "agent",
                    "observation": "run",
                    "content": "a.py",
                    "extras": {"command_id": -1, "command": "ls", "exit_code": 0},
                },
            ],
            [
                {"source": "agent", "action": "finish", "args": {"outputs": {}, "thought": ""}},
                {"source": "agent", "observation": "null", "content": "", "extras": {}},
            ],
        ],
    }
    report = parse_as("openhands", json.dumps(run).encode())
    bodies = [rec.body for rec in report.records]
    assert message_texts(report) == ["fix it", "Look."]
    assert [(b.call_id, b.args) for b in bodies if isinstance(b, ToolIntent)] == [
        ("pair-1", {"command": "git status"}),
        ("pair-2", {"command": "ls"}),
    ]
    results = [(b.call_id, b.status, b.exit_code, b.output) for b in bodies if isinstance(b, ToolResult)]
    assert results == [("pair-1", "error", 128, "fatal: not a git repository"), ("pair-2", "ok", 0, "a.py")]
    assert report.turns == 1 and report.skipped == {"observation:null": 2}
    with pytest.raises(InvalidRecord, match=r"field `history\[0\]`: not an OpenHands event pair"):
        parse_as("openhands", json.dumps({"history": [[run["history"][0][0]]]}).encode())


# ---------------------------------------------------------------- V1 conversations

V1 = FIXTURES / "v1-conversation"


def _v1_events() -> list[dict[str, Any]]:
    return [json.loads(path.read_bytes()) for path in sorted((V1 / "events").iterdir())]


def test_v1_conversation_directory_imports() -> None:
    report = read_transcript(V1, "openhands")
    bodies = [record.body for record in report.records]
    assert bodies[0] == ExecutionEnvironment(extra={"session_id": "run 1"})
    assert isinstance(bodies[1], SystemPolicy)
    assert [t.name for t in bodies[1].tools] == ["terminal"]
    assert [b.input for b in bodies if isinstance(b, TurnStarted)] == ["List the files."]
    assert [(b.call_id, b.args) for b in bodies if isinstance(b, ToolIntent)] == [
        ("call_1", {"command": "ls"}),
        ("call_2", {"command": "rm -rf src"}),
    ]
    results = [(b.call_id, b.status, b.output) for b in bodies if isinstance(b, ToolResult)]
    assert results == [
        ("call_1", "ok", "README.md\nsrc"),
        ("call_2", "error", "Action rejected: Do not delete files"),
    ]
    assert [b.text for b in bodies if isinstance(b, Message) and b.role == "assistant"] == [
        "I'll run ls.",
        "The files are README.md and src.",
    ]
    assert report.skipped == {"event:ConversationStateUpdateEvent": 1}
    # The events directory itself reads the same.
    assert read_transcript(V1 / "events", "openhands").records == report.records


def test_v1_events_in_one_file_import_as_the_directory_does(tmp_path: Path) -> None:
    file = tmp_path / "events.json"
    file.write_text(json.dumps(_v1_events()))
    assert read_transcript(file, "openhands").records == read_transcript(V1, "openhands").records


def test_v1_condensation_summary_and_agent_error() -> None:
    events = [
        {"kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": "go"}},
        {"kind": "Condensation", "source": "environment", "forgotten_event_ids": ["x"], "summary": "did A"},
        {"kind": "AgentErrorEvent", "tool_name": "x", "tool_call_id": "c9", "error": "bad"},
    ]
    bodies = [r.body for r in parse_as("openhands", json.dumps(events).encode()).records]
    assert ContextSummary(text="did A", source="openhands:condensation") in bodies
    assert Message(role="channel", channel="openhands:error", text="bad") in bodies


def test_v1_action_without_a_call_id_is_refused_naming_it() -> None:
    events = _v1_events()
    del events[2]["tool_call_id"]
    with pytest.raises(InvalidRecord, match=r"missing `tool_call_id`") as caught:
        parse_as("openhands", json.dumps(events).encode())
    assert caught.value.field == "[2].tool_call_id"


def test_v1_directory_with_a_missing_event_is_refused(tmp_path: Path) -> None:
    events = tmp_path / "conv" / "events"
    shutil.copytree(V1 / "events", events)
    next(events.glob("event-00003-*.json")).unlink()
    with pytest.raises(UsageError, match=r"has no event 00003 \(the next file is event-00004-"):
        read_transcript(tmp_path / "conv", "openhands")


def test_v1_directory_names_the_event_file_that_is_not_json(tmp_path: Path) -> None:
    events = tmp_path / "events"
    shutil.copytree(V1 / "events", events)
    bad = next(events.glob("event-00002-*.json"))
    bad.write_bytes(bad.read_bytes()[:40])
    with pytest.raises(InvalidRecord) as caught:
        read_transcript(events, "openhands")
    assert caught.value.where == str(bad)


# ---------------------------------------------------------------- blank call metadata, actions without a name


def _openhands(call_id: str, name: str, action: str = "run") -> bytes:
    return json.dumps(
        [
            {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
            {
                "id": 2,
                "source": "agent",
                "action": action,
                "args": {"command": "ls"},
                "tool_call_metadata": {"function_name": name, "tool_call_id": call_id},
            },
            {"id": 3, "cause": 2, "source": "agent", "observation": "run", "content": "a.py"},
        ]
    ).encode()


@pytest.mark.parametrize(("call_id", "name"), [("", "execute_bash"), ("  ", "execute_bash"), ("c1", " ")])
def test_openhands_blank_call_metadata_falls_back_to_the_action(
    call_id: str, name: str, tmp_path: Path
) -> None:
    # OpenHands joins an observation to its action by `cause`; the metadata only labels the call.
    # A blank tool_call_id already fell back to the event id, but a whitespace one was kept, and
    # a blank function_name made a call to tool "".
    data = _openhands(call_id, name)
    expected_id = call_id if call_id.strip() else "2"
    expected_tool = name if name.strip() else "run"
    assert tool_calls_of(data, "openhands") == [
        (expected_id, expected_tool, None),
        (expected_id, expected_tool, "a.py"),
    ]
    assert imported_tools(tmp_path, "openhands", data) == [(expected_id, expected_tool, "ok")]


def test_an_openhands_action_with_no_name_is_refused(tmp_path: Path) -> None:
    data = _openhands("c1", "execute_bash", action=" ")
    with pytest.raises(InvalidRecord, match="an OpenHands action with no name") as caught:
        parse_as("openhands", data)
    assert caught.value.field == "[1].action"
    refused_import(tmp_path, "openhands", data)


# ---------------------------------------------------------------- cut-off files


OPENHANDS_EVENTS = [
    {"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}},
    {"id": 2, "source": "agent", "action": "run", "args": {"command": "ls", "thought": ""}},
    {"id": 3, "cause": 2, "source": "agent", "observation": "run", "content": "a.py"},
]


@pytest.mark.parametrize(
    "document", [OPENHANDS_EVENTS, {"instance_id": "x", "history": OPENHANDS_EVENTS}], ids=["events", "run"]
)
def test_a_pretty_printed_openhands_file_cut_off_says_so(document: object, tmp_path: Path) -> None:
    # A trajectory OpenHands writes with indent=2, copied while still being written: it was read as
    # JSON Lines and refused at "line 1" (a lone `[` or `{`) asking whether --from was right.
    data = json.dumps(document, indent=2).encode()
    assert tool_calls_of(data, "openhands") == [("2", "run", None), ("2", "run", "a.py")]
    cut = data[: len(data) * 2 // 3]
    with pytest.raises(InvalidRecord) as caught:
        parse_as("openhands", cut)
    message = str(caught.value)
    assert message.startswith("invalid record at t: ") and "ends in the middle of it" in message
    assert "--from" not in message and "line 1" not in message
    assert "copied while still being written" in refused_import(tmp_path, "openhands", cut)
    # JSON Lines (one run per line) still names the line that was cut.
    lines = json.dumps({"history": OPENHANDS_EVENTS}).encode() + b"\n"
    with pytest.raises(InvalidRecord, match=r"at line 2 of t: .*ends in the middle of its last line"):
        parse_as("openhands", lines + lines[:-20])


# ---------------------------------------------------------------- condensation


def test_an_openhands_condensation_summary_is_a_context_summary() -> None:
    # OpenHands' condenser (its compaction) writes a `condensation` action whose summary stands in
    # for the events it forgot; it was skipped (`action:condensation`) and the summary lost.
    events = [
        {
            "id": 0,
            "timestamp": "2025-03-01T10:00:00",
            "source": "user",
            "action": "message",
            "args": {"content": "fix it"},
        },
        {
            "id": 1,
            "timestamp": "2025-03-01T10:00:01",
            "source": "agent",
            "action": "condensation",
            "args": {
                "forgotten_events_start_id": 0,
                "forgotten_events_end_id": 0,
                "summary": "The user asked for a fix.",
                "summary_offset": 1,
            },
        },
        {
            "id": 2,
            "timestamp": "2025-03-01T10:00:02",
            "source": "agent",
            "action": "condensation",
            "args": {"forgotten_event_ids": [0], "summary": None},
        },
    ]
    report = parse_as("openhands", json.dumps(events).encode())
    summaries = [r.body for r in report.records if isinstance(r.body, ContextSummary)]
    assert [(s.text, s.source) for s in summaries] == [
        ("The user asked for a fix.", "openhands:condensation")
    ]
    assert report.skipped == {"action:condensation": 1}  # no summary: nothing to keep, still counted
    assert [type(r.body) for r in report.records][:2] == [ExecutionEnvironment, TurnStarted]
    assert not any(isinstance(r.body, ToolIntent) for r in report.records)
