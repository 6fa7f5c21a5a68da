"""SWE-agent importer: tool_calls joined by id (ids reused), edits via the open file, outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.importers import parse_swe_agent, read_transcript
from holon.records import (
    Brief,
    ExecutionEnvironment,
    Message,
    Record,
    SystemPolicy,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    encode_json_record,
)
from tests.importers_support import USER, channel_messages, declared, parse_as

FIXTURES = Path(__file__).parent.parent / "fixtures" / "importers" / "swe-agent"


def _records(name: str) -> list[Record]:
    return list(read_transcript(FIXTURES / name, "swe-agent").records)


def test_function_calling_run_maps_to_exact_records() -> None:
    issue = "ISSUE: add() subtracts."
    patch = "diff --git a/src/calc.py b/src/calc.py"

    def step(  # noqa: PLR0917 - one positional per column of the table below
        text: str,
        call: str,
        tool: str,
        args: dict[str, object],
        out: str,
        ms: int,
        files: tuple[str, ...] = (),
    ) -> list[object]:
        return [
            Message(role="assistant", text=text),
            ToolIntent(call_id=call, tool=tool, args=args),
            ToolResult(call_id=call, tool=tool, status="ok", output=out, touched_files=files, duration_ms=ms),
        ]

    bodies = [
        # The run's start: its working directory, and its name (no instance id here, so its place).
        ExecutionEnvironment(cwd="/testbed", extra={"session_id": "run 1"}),
        # The trajectory records the calls, not the tools' definitions: declared by name.
        SystemPolicy(
            text="You are an autonomous programmer.",
            tools=declared("bash", "create", "open", "edit", "submit"),
        ),
        TurnStarted(trigger="user_message", input=issue),
        Message(role="user", text=issue),
        *step("Look around.", "call_a", "bash", {"command": "ls"}, "src/ tests/", 250),
        # A relative file name is resolved against the recorded working directory.
        *step(
            "Reproduce.",
            "call_b",
            "create",
            {"filename": "repro.py"},
            "[File: repro.py (1 lines total)]",
            100,
            ("/testbed/repro.py",),
        ),
        # SWE-agent reused call_a: the second call gets a unique holon id.
        *step("Open it.", "call_a#2", "open", {"path": "src/calc.py"}, "[File: src/calc.py]", 100),
        # The windowed `edit` writes the file open at that step (from `trajectory[].state`).
        *step(
            "Fix it.",
            "call_c",
            "edit",
            {"search": "a - b", "replace": "a + b"},
            "Text replaced.",
            500,
            ("/testbed/src/calc.py",),
        ),
        *step("Check.", "call_d", "bash", {"command": "python repro.py"}, "3", 1000),
        *step("Done.", "call_submit", "submit", {}, patch, 200),
        Brief(status="result", text=patch),
        TurnEnded(outcome="completed"),
    ]
    turns = [None, None, *[0] * (len(bodies) - 2)]
    expected = [
        Record(body=b, ts=i * 1000, turn=t) for i, (b, t) in enumerate(zip(bodies, turns, strict=True))
    ]
    assert _records("function-calling.traj") == expected


def test_function_calling_counts_and_skips() -> None:
    report = read_transcript(FIXTURES / "function-calling.traj", "swe-agent")
    assert (report.turns, report.tool_calls, report.unmatched_intents) == (1, 6, 0)
    assert report.skipped == {"demonstration message": 1}


def test_thought_action_run_pairs_action_with_next_observation_and_fails_on_exit_cost() -> None:
    records = _records("thought-action.traj")
    bodies = [r.body for r in records]
    # state stored as a JSON string
    assert bodies[0] == ExecutionEnvironment(cwd="/repo", extra={"session_id": "run 1"})
    assert ToolIntent(call_id="action-0", tool="bash", args={"command": "find_file calc.py"}) in bodies
    assert (
        ToolResult(call_id="action-0", tool="bash", status="ok", output='Found 1 matches for "calc.py"')
        in bodies
    )
    assert bodies[-2:] == [
        Brief(status="failure", text="SWE-agent exit status: exit_cost"),
        TurnEnded(outcome="failed", error="exit status: exit_cost"),
    ]
    assert sum(isinstance(b, TurnStarted) for b in bodies) == 1


def test_same_bytes_give_byte_identical_records() -> None:
    assert [encode_json_record(r) for r in _records("function-calling.traj")] == [
        encode_json_record(r) for r in _records("function-calling.traj")
    ]


def test_missing_history_is_refused_with_a_hint() -> None:
    with pytest.raises(InvalidRecord, match=r"no-history\.traj: not a SWE-agent trajectory \(no `history`\)"):
        read_transcript(FIXTURES / "no-history.traj", "swe-agent")


def test_wrong_shape_names_the_entry() -> None:
    with pytest.raises(InvalidRecord) as info:
        read_transcript(FIXTURES / "wrong-shape.traj", "swe-agent")
    assert info.value.field == "history[2].tool_call_ids"
    assert "expected an array, got a string" in str(info.value)


def test_malformed_document_is_named() -> None:
    with pytest.raises(InvalidRecord, match=r"malformed\.json: not a JSON document"):
        read_transcript(FIXTURES.parent / "openai-chat" / "malformed.json", "swe-agent")


def test_an_old_style_edit_line_the_linter_refused_is_an_error_that_touched_no_file() -> None:
    """SWE-agent 0.x's ``edit`` is a command line; only its linter's refusal says it wrote nothing."""
    refusal = (
        "Your proposed edit has introduced new syntax error(s). Please read this error message carefully "
        "and then retry editing the file.\n\nERRORS:\n- E999 IndentationError: unexpected indent\n\n"
        "Your changes have NOT been applied. Please fix your edit command and try again."
    )
    state = '{"open_file": "/repo/calc.py", "working_dir": "/repo"}'
    actions = ["edit 1:1\n  return a + b\nend_of_edit", "edit 1:1\n    return a + b\nend_of_edit"]
    outputs = [refusal, "File updated. Please review the changes."]
    steps = [{"action": a, "observation": o, "state": state} for a, o in zip(actions, outputs, strict=True)]
    history: list[dict[str, object]] = [{"role": "user", "content": "ISSUE: add() subtracts."}]
    for action, output in zip(actions, outputs, strict=True):
        history += [
            {"role": "assistant", "content": action, "action": action},
            {"role": "user", "content": output},
        ]
    for document in ({"history": history, "trajectory": steps}, {"trajectory": steps}):
        report = parse_swe_agent(json.dumps(document).encode(), source="t")
        results = [r.body for r in report.records if isinstance(r.body, ToolResult)]
        assert [(r.status, r.touched_files) for r in results] == [("error", ()), ("ok", ("/repo/calc.py",))]


def test_the_last_action_s_observation_kept_only_in_its_step_is_its_result() -> None:
    """SWE-agent 0.x wrote an observation into the history when it next asked the model: never the last."""
    patch = "diff --git a/calc.py b/calc.py"
    state = '{"open_file": "n/a", "working_dir": "/repo"}'
    steps = [
        {"action": "python repro.py", "observation": "3", "state": state, "execution_time": 0.5},
        {"action": "submit", "observation": patch, "state": state, "execution_time": 0.25},
    ]
    history = [
        {"role": "user", "content": "ISSUE: add() subtracts."},
        {"role": "assistant", "content": "Check.\n```\npython repro.py\n```", "action": "python repro.py\n"},
        {"role": "user", "content": "3\n(Open file: n/a)\n(Current directory: /repo)\nbash-$"},
        {"role": "assistant", "content": "Done.\n```\nsubmit\n```", "action": "submit\n"},
    ]
    document = {
        "history": history,
        "trajectory": steps,
        "info": {"exit_status": "submitted", "submission": patch},
    }
    report = parse_swe_agent(json.dumps(document).encode(), source="t")
    assert report.unmatched_intents == 0
    bodies = [r.body for r in report.records]
    result = ToolResult(call_id="action-1", tool="bash", status="ok", output=patch, duration_ms=250)
    assert bodies[-3:] == [result, Brief(status="result", text=patch), TurnEnded(outcome="completed")]


# ---------------------------------------------------------------- empty tool_calls, step times


@pytest.mark.parametrize("observation_role", ["user", "tool"])
def test_a_swe_agent_action_with_empty_tool_calls_is_still_a_call(observation_role: str) -> None:
    # `tool_calls: []` already counted as "no tool calls" when finding actions, but the call
    # was then read from the empty list: the action vanished and its observation became an
    # operator message (a new turn) or vanished too.
    observation: dict[str, Any] = {"role": observation_role, "content": "submitted"}
    if observation_role == "tool":
        observation["tool_call_ids"] = []
    trajectory = json.dumps(
        {
            "history": [
                USER,
                {"role": "assistant", "content": "done", "action": "submit", "tool_calls": []},
                observation,
            ]
        }
    ).encode()
    report = parse_as("swe-agent", trajectory)
    bodies = [rec.body for rec in report.records]
    assert ToolIntent(call_id="action-0", tool="bash", args={"command": "submit"}) in bodies
    results = [body for body in bodies if isinstance(body, ToolResult)]
    assert [(r.call_id, r.output) for r in results] == [("action-0", "submitted")]
    assert report.turns == 1


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 1e300])
def test_a_swe_agent_step_time_that_is_no_duration_is_left_out(seconds: float) -> None:
    # Before: a NaN or infinite execution_time escaped as ValueError / OverflowError from
    # round(), and 1e300 seconds made a duration no ledger field holds.
    data = json.dumps(
        {
            "trajectory": [{"action": "ls", "observation": "a.py", "execution_time": seconds}],
            "history": [
                USER,
                {
                    "role": "assistant",
                    "content": "Look.",
                    "action": "ls",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "bash", "arguments": '{"cmd": "ls"}'},
                        },
                    ],
                },
                {"role": "tool", "content": "a.py", "tool_call_ids": ["c1"]},
            ],
        }
    ).encode()
    results = [rec.body for rec in parse_as("swe-agent", data).records if isinstance(rec.body, ToolResult)]
    assert [(result.output, result.duration_ms) for result in results] == [("a.py", None)]


# ---------------------------------------------------------------- trajectories of steps only


def _steps_only(*steps: dict[str, Any]) -> bytes:
    return json.dumps(
        {"trajectory": list(steps), "info": {"exit_status": "submitted", "submission": "diff"}}
    ).encode()


def test_a_swe_agent_traj_with_only_trajectory_imports_its_steps_as_calls() -> None:
    # Before: refused ("no `history`") although every step says what ran and what it printed.
    state = {"working_dir": "/testbed", "open_file": "/testbed/a.py"}
    report = parse_as(
        "swe-agent",
        _steps_only(
            {
                "thought": "Look.",
                "action": "ls\n",
                "observation": "a.py",
                "execution_time": 0.5,
                "state": state,
            },
            {
                "response": "Fix.",
                "action": "edit 1:1\nx = 1\nend_of_edit",
                "observation": "ok",
                "state": state,
            },
            {"thought": "", "action": "create 'b c.py'", "observation": "", "state": json.dumps(state)},
        ),
    )
    bodies = [r.body for r in report.records]
    assert [b.text for b in bodies if isinstance(b, Message)] == ["Look.", "Fix."]
    intents = [b for b in bodies if isinstance(b, ToolIntent)]
    assert [(i.call_id, i.tool, i.args) for i in intents] == [
        ("action-0", "bash", {"command": "ls"}),
        ("action-1", "bash", {"command": "edit 1:1\nx = 1\nend_of_edit"}),
        ("action-2", "bash", {"command": "create 'b c.py'"}),
    ]
    results = [b for b in bodies if isinstance(b, ToolResult)]
    assert [(r.output, r.duration_ms, r.touched_files) for r in results] == [
        ("a.py", 500, ()),
        ("ok", None, ("/testbed/a.py",)),
        ("", None, ("/testbed/b c.py",)),
    ]
    assert isinstance(bodies[0], ExecutionEnvironment) and bodies[0].cwd == "/testbed"
    assert any(isinstance(b, Brief) and b.text == "diff" for b in bodies)
    assert report.turns == 1 and report.unmatched_intents == 0


@pytest.mark.parametrize("missing", ["action", "observation"])
def test_a_swe_agent_step_without_what_ran_or_what_it_printed_is_named(missing: str) -> None:
    step = {"thought": "t", "action": "ls", "observation": "a.py"}
    del step[missing]
    with pytest.raises(InvalidRecord, match=f"trajectory step 1 has no `{missing}`") as info:
        parse_as("swe-agent", _steps_only({"action": "pwd", "observation": "/"}, step))
    assert info.value.field == f"trajectory[1].{missing}"


def test_a_swe_agent_step_whose_output_was_no_command_is_not_a_call() -> None:
    report = parse_as(
        "swe-agent",
        _steps_only(
            {"thought": "hm", "action": "", "observation": "Your output was not formatted correctly"}
        ),
    )
    assert report.tool_calls == 0 and report.skipped == {"step without an action": 1}
    assert channel_messages(report) == [(0, "swe-agent:error", "Your output was not formatted correctly")]


def test_an_old_style_swe_agent_edit_action_touches_the_open_file() -> None:
    # Before: an old-style run's `edit` (a bash-session command, not a tool call) touched nothing.
    data = json.dumps(
        {
            "history": [
                USER,
                {"role": "assistant", "content": "Edit.", "action": "edit 1:1\nx = 1\nend_of_edit"},
                {"role": "user", "content": "File updated."},
            ],
            "trajectory": [
                {"action": "edit 1:1", "observation": "File updated.", "state": {"open_file": "/r/a.py"}}
            ],
        }
    ).encode()
    results = [r.body for r in parse_as("swe-agent", data).records if isinstance(r.body, ToolResult)]
    assert [r.touched_files for r in results] == [("/r/a.py",)]


# ---------------------------------------------------------------- demos in the history


def test_swe_agent_demonstrations_in_the_history_keep_the_steps_aligned() -> None:
    # With `put_demos_in_history`, SWE-agent copies the demo run's messages into the history one
    # by one, `is_demo: true`, its actions included. They were counted against this run's
    # `trajectory`, which then never lined up: every step's duration, cwd and open file was lost.
    demo_action = {
        "role": "assistant",
        "content": "demo thought",
        "action": "ls",
        "is_demo": True,
    }
    traj = {
        "history": [
            {"role": "system", "content": "You are SWE-agent."},
            {"role": "user", "content": "demo issue", "is_demo": True},
            demo_action,
            {"role": "user", "content": "demo output", "is_demo": True},
            {"role": "user", "content": "the issue"},
            {"role": "assistant", "content": "look", "action": "ls -a"},
            {"role": "user", "content": "a.py"},
        ],
        "trajectory": [
            {
                "action": "ls -a",
                "observation": "a.py",
                "execution_time": 0.25,
                "state": {"working_dir": "/repo", "open_file": "n/a"},
            }
        ],
        "info": {},
    }
    report = parse_as("swe-agent", json.dumps(traj).encode())
    results = [r.body for r in report.records if isinstance(r.body, ToolResult)]
    assert [(res.output, res.duration_ms) for res in results] == [("a.py", 250)]
    assert report.skipped == {"demonstration message": 3}
    assert any(getattr(r.body, "cwd", None) == "/repo" for r in report.records)
