"""Claude Code importer: turns, joined tool calls, plans, edits, compaction, skips, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.importers import ImportReport, parse_claude_code, read_transcript
from holon.records import (
    ContextSummary,
    ExecutionEnvironment,
    Message,
    PlanStep,
    Record,
    SystemPolicy,
    TaskResult,
    TaskStarted,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    WorkPlan,
    encode_json_record,
)
from tests.cli_support import invoke
from tests.importers_support import USER, channel_messages, claude_jsonl, declared, message_texts, parse_as

FIXTURES = Path(__file__).parent.parent / "fixtures" / "importers" / "claude-code"
T0 = 1_740_823_200_000  # 2025-03-01T10:00:00Z, the first user message


def _session() -> list[Record]:
    return list(read_transcript(FIXTURES / "session.jsonl", "claude-code").records)


def test_session_maps_to_exact_records() -> None:
    fix = "Fix the failing parser test."
    commit = "Skip the lexer. Commit what you have."
    hook = "Stop hook feedback: uncommitted changes remain."
    todos = [
        {"content": "Reproduce the failure", "status": "completed", "activeForm": "Reproducing"},
        {"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing"},
        {"content": "Run the suite", "status": "pending", "activeForm": "Running"},
    ]
    assert _session() == [
        # The summary line has no timestamp: it takes the file's first one (the queue event).
        Record(
            body=ContextSummary(text="Fix the flaky parser test", source="claude-code:summary"), ts=T0 - 1000
        ),
        Record(body=ExecutionEnvironment(cwd="/repo", branch="main", extra={"session_id": "s1"}), ts=T0),
        # Claude Code records the calls, not the tools' definitions: the ones called are
        # declared by name, before the first turn, at its time.
        Record(body=SystemPolicy(text="", tools=declared("TodoWrite", "Bash", "Edit", "Read")), ts=T0),
        Record(body=TurnStarted(trigger="user_message", input=fix), ts=T0, turn=0),
        Record(body=Message(role="user", text=fix), ts=T0, turn=0),
        Record(body=Message(role="assistant", text="I'll plan this out."), ts=T0 + 1500, turn=0),
        Record(
            body=ToolIntent(call_id="toolu_plan", tool="TodoWrite", args={"todos": todos}),
            ts=T0 + 2000,
            turn=0,
        ),
        Record(
            body=WorkPlan(
                work_item_id=None,
                steps=(
                    PlanStep(id="1", text="Reproduce the failure", status="done"),
                    PlanStep(id="2", text="Fix the parser", status="in_progress"),
                    PlanStep(id="3", text="Run the suite", status="pending"),
                ),
            ),
            ts=T0 + 2000,
            turn=0,
        ),
        Record(
            body=ToolResult(
                call_id="toolu_plan",
                tool="TodoWrite",
                status="ok",
                output="Todos have been modified successfully.",
            ),
            ts=T0 + 2100,
            turn=0,
        ),
        Record(
            body=ToolIntent(
                call_id="toolu_test",
                tool="Bash",
                args={"command": "pytest -q tests/test_parser.py", "description": "Run the parser tests"},
            ),
            ts=T0 + 3000,
            turn=0,
        ),
        Record(
            body=ToolResult(
                call_id="toolu_test",
                tool="Bash",
                status="error",
                output="Exit code 1\nFAILED tests/test_parser.py::test_empty",
                exit_code=1,
            ),
            ts=T0 + 5000,
            turn=0,
        ),
        Record(
            body=ToolIntent(
                call_id="toolu_edit",
                tool="Edit",
                args={
                    "file_path": "/repo/src/parser.py",
                    "old_string": "if not text:",
                    "new_string": "if text is None:",
                },
            ),
            ts=T0 + 6000,
            turn=0,
        ),
        Record(
            body=ToolResult(
                call_id="toolu_edit",
                tool="Edit",
                status="ok",
                output="The file /repo/src/parser.py has been updated.",
                touched_files=("/repo/src/parser.py",),
            ),
            ts=T0 + 6200,
            turn=0,
        ),
        # Interrupted before its result arrived: the intent stays alone (unknown outcome).
        Record(
            body=ToolIntent(call_id="toolu_read", tool="Read", args={"file_path": "/repo/src/lexer.py"}),
            ts=T0 + 7000,
            turn=0,
        ),
        Record(body=TurnEnded(outcome="interrupted"), ts=T0 + 7000, turn=0),
        Record(
            body=ExecutionEnvironment(cwd="/repo", branch="fix-parser", extra={"session_id": "s1"}),
            ts=T0 + 300_000,
        ),
        Record(body=TurnStarted(trigger="user_message", input=commit), ts=T0 + 300_000, turn=1),
        Record(body=Message(role="user", text=commit), ts=T0 + 300_000, turn=1),
        Record(
            body=ToolIntent(
                call_id="toolu_commit", tool="Bash", args={"command": "git commit -am 'Fix empty input'"}
            ),
            ts=T0 + 302_000,
            turn=1,
        ),
        Record(
            body=ContextSummary(
                text="This session is being continued from a previous conversation. "
                "Summary: the parser fix is committed.",
                source="claude-code:compact",
            ),
            ts=T0 + 360_000,
            turn=1,
        ),
        Record(body=TurnEnded(outcome="completed"), ts=T0 + 360_000, turn=1),
        Record(body=TurnStarted(trigger="meta_message", input=hook), ts=T0 + 361_000, turn=2),
        Record(body=Message(role="channel", channel="claude-code:meta", text=hook), ts=T0 + 361_000, turn=2),
        Record(body=Message(role="assistant", text="Everything is committed now."), ts=T0 + 362_000, turn=2),
        Record(body=TurnEnded(outcome="completed"), ts=T0 + 362_000, turn=2),
    ]


def test_session_counts_and_skips() -> None:
    report = read_transcript(FIXTURES / "session.jsonl", "claude-code")
    assert (report.turns, report.tool_calls, report.unmatched_intents) == (3, 5, 2)
    assert report.skipped == {
        "block:thinking": 1,
        "event:file-history-snapshot": 1,
        "event:queue-operation": 1,
        "sidechain event": 1,
        "summary of another session": 1,
        "system:compact_boundary": 1,
    }
    assert report.format == "claude-code"
    assert all(record.seq == -1 for record in report.records)


def test_same_bytes_give_byte_identical_records() -> None:
    first = [encode_json_record(r) for r in _session()]
    second = [encode_json_record(r) for r in _session()]
    assert first == second


def test_interrupted_bash_result_and_reused_ids() -> None:
    lines = [
        b'{"type":"user","uuid":"a","message":{"role":"user","content":"go"}}',
        b'{"type":"assistant","uuid":"b","message":{"role":"assistant","content":['
        b'{"type":"tool_use","id":"t","name":"Bash","input":{"command":"sleep 99"}}]}}',
        b'{"type":"user","uuid":"c","message":{"role":"user","content":[{"type":"tool_result",'
        b'"tool_use_id":"t","content":"killed","is_error":true}]},"toolUseResult":{"interrupted":true}}',
        b'{"type":"assistant","uuid":"d","message":{"role":"assistant","content":['
        b'{"type":"tool_use","id":"t","name":"Write","input":{"file_path":"/w/a.txt","content":"x"}}]}}',
        b'{"type":"user","uuid":"e","message":{"role":"user","content":[{"type":"tool_result",'
        b'"tool_use_id":"t","content":"ok"}]}}',
    ]
    report = parse_claude_code(b"\n".join(lines), source="mem.jsonl")
    results = [r.body for r in report.records if isinstance(r.body, ToolResult)]
    assert [(r.call_id, r.tool, r.status, r.touched_files) for r in results] == [
        ("t", "Bash", "interrupted", ()),
        ("t#2", "Write", "ok", ("/w/a.txt",)),
    ]
    # No timestamps anywhere: the synthetic clock, 1000 ms per record from 0 (the tools the
    # import declares, before the first turn, share its time).
    assert isinstance(report.records[0].body, SystemPolicy)
    assert report.records[0].ts == report.records[1].ts == 0
    rest = report.records[1:]
    assert [r.ts for r in rest] == [i * 1000 for i in range(len(rest))]


def test_assistant_activity_before_any_user_message_opens_a_continuation_turn() -> None:
    data = (
        b'{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"resuming"}]}}'
    )
    bodies = [r.body for r in parse_claude_code(data, source="m.jsonl").records]
    assert bodies == [
        TurnStarted(trigger="continuation", input=None),
        Message(role="assistant", text="resuming"),
        TurnEnded(outcome="completed"),
    ]


def test_malformed_line_names_the_line() -> None:
    with pytest.raises(InvalidRecord, match=r"line 3 of .*malformed\.jsonl: not a JSON value"):
        read_transcript(FIXTURES / "malformed.jsonl", "claude-code")


def test_wrong_shape_names_line_and_field() -> None:
    with pytest.raises(InvalidRecord) as info:
        read_transcript(FIXTURES / "wrong-shape.jsonl", "claude-code")
    assert info.value.where is not None and info.value.where.startswith("line 2 of ")
    assert info.value.field == "message.content[0].input"
    assert "expected an object, got a string" in str(info.value)


def test_other_format_is_refused_with_a_hint() -> None:
    holon_jsonl = Path(__file__).parent.parent / "fixtures" / "importers" / "jsonl" / "ledger.jsonl"
    with pytest.raises(
        InvalidRecord, match=r"line 1 of .*: not a Claude Code event \(no `type`\); is this really"
    ):
        read_transcript(holon_jsonl, "claude-code")


# --------------------------------------------------------------------------- sub-agents (Task calls)


def _tagged(report: ImportReport) -> list[tuple[str | None, str, str]]:
    """(task, kind, what) of every message, call, result and plan: whose each record is."""
    out: list[tuple[str | None, str, str]] = []
    for record in report.records:
        body = record.body
        if isinstance(body, Message):
            out.append((body.task_id, "message", body.text))
        elif isinstance(body, ToolIntent | ToolResult):
            out.append((body.task_id, record.kind, body.call_id))
        elif isinstance(body, WorkPlan):
            out.append((body.task_id, "work_plan", ",".join(s.text for s in body.steps)))
    return out


def test_inline_sidechains_are_their_task_calls_tasks_linked_by_prompt_and_parent() -> None:
    # Two Task calls in one message; their sidechains interleave, each event naming its parent.
    report = read_transcript(FIXTURES / "sidechain_inline.jsonl", "claude-code")
    assert report.skipped == {}
    assert report.turns == 1  # neither sub-agent's prompt opened a turn
    starts = [r.body for r in report.records if isinstance(r.body, TaskStarted)]
    assert starts == [
        TaskStarted(id="toolu_T1", description="find the bug: Find why tests/test_parser.py fails"),
        TaskStarted(id="toolu_T2", description="check the docs: Check what the docs say about empty input"),
    ]
    tagged = _tagged(report)
    assert [(t, k, w) for t, k, w in tagged if t == "toolu_T1"] == [
        ("toolu_T1", "message", "Find why tests/test_parser.py fails"),
        ("toolu_T1", "tool_intent", "toolu_s1"),
        ("toolu_T1", "work_plan", "Run the test,Read the lexer"),
        ("toolu_T1", "tool_result", "toolu_s1"),
        ("toolu_T1", "tool_intent", "toolu_s2"),
        ("toolu_T1", "tool_result", "toolu_s2"),
        ("toolu_T1", "tool_intent", "toolu_s3"),
        ("toolu_T1", "tool_result", "toolu_s3"),
        (
            "toolu_T1",
            "message",
            "src/lexer.py indexes text[0] without checking for empty input; that raises IndexError.",
        ),
    ]
    assert [(k, w) for t, k, w in tagged if t == "toolu_T2"] == [
        ("message", "Check what the docs say about empty input"),
        ("tool_intent", "toolu_d1"),
        ("tool_result", "toolu_d1"),
        ("message", "The docs say empty input returns []."),
    ]
    # The main agent's own: its Task calls and their results, the edit it made after.
    assert [w for t, k, w in tagged if t is None and k != "message"] == [
        "toolu_T1",
        "toolu_T2",
        "toolu_T2",
        "toolu_T1",
        "toolu_e1",
        "toolu_e1",
    ]
    results = [r.body for r in report.records if isinstance(r.body, TaskResult)]
    assert [(b.id, b.status, b.summary, b.output) for b in results] == [
        ("toolu_T2", "ok", "The docs say empty input returns [].", ""),
        (
            "toolu_T1",
            "ok",
            "src/lexer.py indexes text[0] without checking for empty input; that raises IndexError.",
            "",
        ),
    ]
    # Each TaskResult right after its call's ToolResult.
    kinds = [r.kind for r in report.records]
    assert all(kinds[i - 1] == "tool_result" for i, k in enumerate(kinds) if k == "task_result")


def test_a_sessions_subagent_files_are_imported_as_the_tasks_they_served(tmp_path: Path) -> None:
    report = read_transcript(FIXTURES / "subagents-session.jsonl", "claude-code")
    # Linked by the agentId the Task result names (a1b2c3d) or by the prompt (ffff000); Claude
    # Code's compaction agent and a file no Task call started are left out, counted.
    assert report.skipped == {"subagent file of no Task call": 1, "subagent file: compaction": 1}
    tagged = _tagged(report)
    assert [(k, w) for t, k, w in tagged if t == "toolu_A"] == [
        ("message", "List every place that reads config.ini"),
        ("tool_intent", "toolu_g1"),
        ("tool_result", "toolu_g1"),
        ("tool_intent", "toolu_r1"),
        ("tool_result", "toolu_r1"),
        ("message", "Three places read config.ini: app.py, cli.py, tests/conftest.py."),
    ]
    assert [w for t, k, w in tagged if t == "toolu_B" and k != "message"] == ["toolu_w1", "toolu_w1"]
    results = {r.body.id: r.body for r in report.records if isinstance(r.body, TaskResult)}
    # The line Claude Code adds for the model (the agent to resume) is not the report; the
    # Task call's ToolResult keeps it.
    assert results["toolu_A"].summary == "Three places read config.ini: app.py, cli.py, tests/conftest.py."
    assert (results["toolu_B"].status, results["toolu_B"].summary) == (
        "error",
        "Agent stopped: the test could not be written",
    )
    # Without the directory (the main file alone), only the Task calls and their results.
    alone = tmp_path / "s.jsonl"
    alone.write_bytes((FIXTURES / "subagents-session.jsonl").read_bytes())
    by_itself = read_transcript(alone, "claude-code")
    assert [t for t, _, _ in _tagged(by_itself)] == [None] * len(_tagged(by_itself))
    assert [r.kind for r in by_itself.records].count("task_result") == 2


def test_a_long_report_is_summarized_and_kept_whole_and_a_background_launch_is_no_result() -> None:
    long_report = "The survey found " + "one more place; " * 200
    call = {"type": "tool_use", "id": "toolu_L", "name": "Agent", "input": {"prompt": "survey"}}
    bg = {
        "type": "tool_use",
        "id": "toolu_bg",
        "name": "Task",
        "input": {"prompt": "index", "run_in_background": True},
    }
    data = claude_jsonl(
        {"type": "user", "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [call, bg]}},
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_bg",
                        "content": "Async agent launched successfully.",
                    }
                ],
            },
            "toolUseResult": {"isAsync": True, "status": "async_launched", "agentId": "bg1"},
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_L", "content": long_report}],
            },
        },
    )
    report = parse_claude_code(data, source="m.jsonl")
    (result,) = [r.body for r in report.records if isinstance(r.body, TaskResult)]
    assert result.id == "toolu_L" and result.output == long_report
    assert result.summary.endswith(" …") and len(result.summary) <= 1002
    assert long_report.startswith(result.summary.removesuffix(" …"))
    # The background one still runs: it has a start, and no result yet.
    assert [r.body.id for r in report.records if isinstance(r.body, TaskStarted)] == ["toolu_L", "toolu_bg"]


def test_a_sub_agents_events_after_its_tasks_result_are_no_tasks() -> None:
    call = {"type": "tool_use", "id": "toolu_T", "name": "Task", "input": {"prompt": "look"}}
    data = claude_jsonl(
        {"type": "user", "message": {"role": "user", "content": "go"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [call]}},
        {
            "type": "user",
            "isSidechain": True,
            "parentUuid": None,
            "message": {"role": "user", "content": "look"},
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_T", "content": "seen"}],
            },
        },
        {
            "type": "assistant",
            "isSidechain": True,
            "parentUuid": "u2",
            "message": {"role": "assistant", "content": "late"},
        },
    )
    report = parse_claude_code(data, source="m.jsonl")
    assert report.skipped == {"sidechain event": 1}
    assert [(t, w) for t, k, w in _tagged(report) if k == "message"] == [(None, "go"), ("toolu_T", "look")]


def test_a_bad_subagent_file_is_named_and_nothing_is_imported(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    session.write_bytes((FIXTURES / "subagents-session.jsonl").read_bytes())
    folder = tmp_path / "s" / "subagents"
    folder.mkdir(parents=True)
    good = (FIXTURES / "subagents-session" / "subagents" / "agent-a1b2c3d.jsonl").read_bytes()
    (folder / "agent-a1b2c3d.jsonl").write_bytes(good.replace(b'"2025-06-02T09:00:04.000Z"', b'"yesterday"'))
    with pytest.raises(InvalidRecord) as info:
        read_transcript(session, "claude-code")
    assert str(folder / "agent-a1b2c3d.jsonl") in str(info.value) and "line 2" in str(info.value)


# ---------------------------------------------------------------- a message written twice


def test_a_claude_code_message_written_twice_is_imported_once() -> None:
    # Claude Code writes some messages twice with the same uuid (with `--input-format
    # stream-json` the whole history again after every prompt; a first prompt echoed). Each
    # copy became another turn and another tool call, and the copied result answered nothing.
    events = [
        {"type": "user", "message": USER},
        {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}],
            },
        },
        {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.py"}],
            },
        },
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
        },
    ]
    once = claude_jsonl(*events)
    lines = once.splitlines(keepends=True)
    second = [
        {
            "type": "user",
            "message": {"role": "user", "content": "and now?"},
            "uuid": "u9",
            "timestamp": "2025-03-01T10:00:09Z",
            "sessionId": "s1",
        }
    ]
    twice = once + b"".join(lines) + json.dumps(second[0]).encode() + b"\n"
    report = parse_as("claude-code", twice)
    assert message_texts(report) == ["fix it", "done", "and now?"]
    assert report.turns == 2 and report.tool_calls == 1
    assert [rec.body.call_id for rec in report.records if isinstance(rec.body, ToolResult)] == ["t1"]
    assert report.skipped == {"duplicate event": 4}
    assert [rec.body for rec in report.records if isinstance(rec.body, ToolIntent)] == [
        ToolIntent(call_id="t1", tool="Bash", args={"command": "ls"})
    ]


# ---------------------------------------------------------------- local commands


def _user(content: object, **extra: object) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": content}} | extra


def _assistant(text: str) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
    }


CAVEAT = (
    "Caveat: The messages below were generated by the user while running local commands. DO NOT "
    "respond to these messages or otherwise consider them in your response unless the user "
    "explicitly asks you to."
)


def test_claude_code_local_commands_are_channel_messages_between_turns() -> None:
    # Before, each of these lines opened a user turn holding the raw tags (and the caveat a
    # meta turn): five turns in which the agent did nothing, the operator "asking" `/model`.
    report = parse_as(
        "claude-code",
        claude_jsonl(
            _user("hello"),
            _assistant("hi"),
            _user(CAVEAT, isMeta=True),
            _user(
                "<command-name>/model</command-name>\n            <command-message>model</command-message>\n"
                "            <command-args>opus</command-args>"
            ),
            _user("<local-command-stdout>Set model to opus</local-command-stdout>"),
            _user(
                "<command-name>/clear</command-name><command-message>clear</command-message><command-args></command-args>"
            ),
            _user("<local-command-stdout></local-command-stdout>"),
            _user("<bash-input>ls</bash-input>"),
            _user("<bash-stdout>a.py</bash-stdout><bash-stderr>warn</bash-stderr>"),
            _user("next"),
        ),
    )
    assert [r.body.input for r in report.records if isinstance(r.body, TurnStarted)] == ["hello", "next"]
    assert channel_messages(report) == [
        (None, "claude-code:command", "/model opus"),
        (None, "claude-code:command-output", "Set model to opus"),
        (None, "claude-code:command", "/clear"),
        (None, "claude-code:command", "!ls"),
        (None, "claude-code:command-output", "a.py\nwarn"),
    ]
    assert report.skipped == {"empty command output": 1, "local command caveat": 1}
    # The turn before the commands ended before them.
    kinds = [type(r.body).__name__ for r in report.records]
    assert kinds.index("TurnEnded") < kinds.index("Message", 3)


def test_a_claude_code_prompt_command_runs_in_the_turn_its_expansion_opens() -> None:
    report = parse_as(
        "claude-code",
        claude_jsonl(
            _user(
                "<command-message>init is analyzing your codebase…</command-message>\n"
                "<command-name>/init</command-name>"
            ),
            _user([{"type": "text", "text": "Please analyze this codebase"}], isMeta=True),
            _assistant("done"),
            # Older versions: the expanded prompt follows the tags in the same message.
            _user("<command-name>/review</command-name><command-args>42</command-args>\nReview PR 42"),
            {
                "type": "system",
                "subtype": "local_command",
                "content": "<local-command-stdout>Goal set</local-command-stdout>",
            },
        ),
    )
    started = [(r.body.trigger, r.body.input) for r in report.records if isinstance(r.body, TurnStarted)]
    assert started == [("meta_message", "Please analyze this codebase"), ("user_message", "Review PR 42")]
    assert channel_messages(report)[0] == (None, "claude-code:command", "/init")
    assert (None, "claude-code:command", "/review 42") in channel_messages(report)
    assert channel_messages(report)[-1] == (None, "claude-code:command-output", "Goal set")


def test_claude_code_text_that_merely_mentions_command_tags_is_a_user_message() -> None:
    text = "why does `<command-name>` show up in my logs?"
    report = parse_as("claude-code", claude_jsonl(_user(text)))
    assert [r.body.input for r in report.records if isinstance(r.body, TurnStarted)] == [text]


# ---------------------------------------------------------------- a session a crash tore

_EVENTS: tuple[dict[str, Any], ...] = (
    {"type": "user", "message": {"role": "user", "content": "list the files"}},
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
        },
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
        },
    },
    {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": "a.py"}]}},
)


def _claude_lines(torn: bytes, *, at: int) -> bytes:
    """The session of _EVENTS (uuids, timestamps) with the line ``torn`` put before line ``at`` (1-based)."""
    lines = claude_jsonl(*_EVENTS).split(b"\n")
    return b"\n".join([*lines[: at - 1], torn, *lines[at - 1 :]])


@pytest.mark.parametrize(
    "torn",
    [
        # A write cut short, and the next event appended right after it on the same line.
        b'{"type":"file-history-snapshot","messageId":"m1","snapsh{"type":"pr-link","sessionId":"s1"}',
        b"\x00" * 300,  # the NUL bytes a crashed append leaves on ext4
        b'{"type":"progress","data":{"out',  # cut short, with the session's later events after it
    ],
)
def test_a_line_a_crash_tore_is_counted_and_the_session_imported(tmp_path: Path, torn: bytes) -> None:
    # Claude Code skips such a line when it resumes the session (v2.1.121). The import refused the
    # whole file ("line 3: not a JSON value (...); is this really a Claude Code transcript?").
    data = _claude_lines(torn, at=3)
    report = parse_as("claude-code", data)
    assert report.skipped == {"unreadable line": 1}
    assert report.turns == 1 and report.tool_calls == 1 and report.unmatched_intents == 0
    assert [encode_json_record(r) for r in report.records] == [
        encode_json_record(r) for r in parse_as("claude-code", claude_jsonl(*_EVENTS)).records
    ]
    file = tmp_path / "s.jsonl"
    file.write_bytes(data)
    assert invoke("init", tmp_path / "L", "--agent-id", "a1").exit_code == 0
    result = invoke("import", tmp_path / "L", file, "--from", "claude-code")
    assert result.exit_code == 0, result.stderr
    assert "skipped: unreadable line 1" in result.stdout


def test_a_first_line_that_is_not_json_still_questions_the_format() -> None:
    # The first line decides the format: a pretty-printed document given as a session is refused.
    data = json.dumps({"history": [], "trajectory": []}, indent=2).encode()
    with pytest.raises(InvalidRecord, match=r"at line 1 of t: not a JSON value .*--from claude-code"):
        parse_as("claude-code", data)
    with pytest.raises(InvalidRecord, match=r"at line 1 of t: not a JSON value .*--from claude-code"):
        parse_as("claude-code", _claude_lines(b"{\x01", at=1))


def test_a_last_line_cut_off_and_a_line_not_utf8_are_still_refused() -> None:
    whole = claude_jsonl(*_EVENTS)
    with pytest.raises(InvalidRecord, match=r"at line 5 of t: .*ends in the middle of its last line"):
        parse_as("claude-code", whole + b'{"type":"user","message":{"ro')
    with pytest.raises(InvalidRecord, match=r"at line 3 of t: not UTF-8 text \(byte 0xe9"):
        parse_as("claude-code", _claude_lines(b'{"type":"x","t":"caf\xe9"}', at=3))


def test_a_damaged_line_with_nothing_read_after_it_is_still_refused() -> None:
    # Nothing shows the session went on past it: it is refused, naming it, as before.
    whole = claude_jsonl(*_EVENTS)
    with pytest.raises(InvalidRecord, match=r"at line 5 of t: not a JSON value"):
        parse_as("claude-code", whole + b'{"type": "progr\n{"type": "us\n\n')


@pytest.mark.parametrize("tail", [b"\x00" * 40 + b"\n", b"\x00" * 4096, b"\n" + b"\x00" * 10 + b"\n\x00\x00"])
def test_only_nul_bytes_after_the_last_event_are_passed_over(tail: bytes) -> None:
    # A power loss leaves a file whose size reached the disk and whose data did not: zeros after
    # the last event. No writer still at work writes them, so they are counted, not refused; the
    # import said "not a JSON value ...; is this really a Claude Code transcript?" after 97 good lines.
    whole = claude_jsonl(*_EVENTS)
    report = parse_as("claude-code", whole + tail)
    assert sum(report.skipped.values()) == report.skipped["unreadable line"] >= 1
    assert report.records == parse_as("claude-code", whole).records


# ---------------------------------------------------------------- stream-json output


def _stream(*events: dict[str, Any]) -> bytes:
    return "".join(json.dumps(event) + "\n" for event in events).encode()


def _stream_assistant(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    message = {"role": "assistant", "model": "claude-sonnet-5-5", "content": list(blocks)}
    return {"type": "assistant", "message": message, "parent_tool_use_id": parent, "session_id": "s"}


def _stream_user(*blocks: dict[str, Any], parent: str | None = None) -> dict[str, Any]:
    message = {"role": "user", "content": list(blocks)}
    return {"type": "user", "message": message, "parent_tool_use_id": parent, "session_id": "s"}


def test_stream_json_subagent_messages_are_not_the_main_agents() -> None:
    report = read_transcript(FIXTURES / "stream_json_subagent.jsonl", "claude-code")
    bodies = [record.body for record in report.records]
    # The subagent's prompt opened an operator turn, and its Bash call and text read as the main agent's.
    assert not any(isinstance(b, TurnStarted) and b.trigger == "user_message" for b in bodies)
    own = [b for b in bodies if isinstance(b, Message | ToolIntent) and b.task_id is None]
    assert [b.tool for b in own if isinstance(b, ToolIntent)] == ["Task"]
    assert [b.text for b in own if isinstance(b, Message)] == [
        "I'll ask a subagent to find the config.",
        "Found it: app.toml.",
    ]
    # They are the Task call's task (its id), not the main agent's.
    theirs = [b for b in bodies if isinstance(b, Message | ToolIntent | ToolResult) and b.task_id is not None]
    assert {b.task_id for b in theirs} == {"toolu_task"}
    assert [type(b).__name__ for b in theirs] == ["Message", "ToolIntent", "ToolResult", "Message"]
    # The Task call and its result (the subagent's report) stay in one turn.
    task = [r for r in report.records if isinstance(r.body, ToolIntent | ToolResult)]
    assert {r.turn for r in task} == {0}
    assert report.turns == 1
    assert report.skipped == {}


def test_stream_json_init_records_the_working_directory() -> None:
    report = read_transcript(FIXTURES / "stream_json_subagent.jsonl", "claude-code")
    first = report.records[0]
    assert first.turn is None
    assert first.body == ExecutionEnvironment(cwd="/work/app", extra={"session_id": "s-1"})


def test_stream_json_error_result_ends_the_turn_failed() -> None:
    data = _stream(
        _stream_assistant(
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "make"}}
        ),
        _stream_user({"type": "tool_result", "tool_use_id": "toolu_1", "content": "building"}),
        {"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 2, "session_id": "s"},
    )
    ended = [r.body for r in parse_as("claude-code", data).records if isinstance(r.body, TurnEnded)]
    assert ended == [TurnEnded(outcome="failed", error="error_max_turns")]


def test_stream_json_api_error_result_names_its_text() -> None:
    data = _stream(
        _stream_assistant({"type": "text", "text": "Looking."}),
        {"type": "result", "subtype": "success", "is_error": True, "result": "API Error: 529 Overloaded"},
        _stream_user({"type": "text", "text": "try again"}),
        _stream_assistant({"type": "text", "text": "Done."}),
        {"type": "result", "subtype": "success", "is_error": False, "result": "Done."},
    )
    report = parse_as("claude-code", data)
    ended = [r.body for r in report.records if isinstance(r.body, TurnEnded)]
    assert ended == [
        TurnEnded(outcome="failed", error="API Error: 529 Overloaded"),
        TurnEnded(outcome="completed"),
    ]
    # The success result repeats the last assistant text; it is not a second message.
    assert [r.body.text for r in report.records if isinstance(r.body, Message)].count("Done.") == 1


def test_stream_json_tool_use_result_marks_an_interrupted_call() -> None:
    result = _stream_user(
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "stopped", "is_error": True}
    )
    result["tool_use_result"] = {"stdout": "", "stderr": "", "interrupted": True}
    data = _stream(
        _stream_assistant(
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "sleep 99"}}
        ),
        result,
    )
    results = [r.body for r in parse_as("claude-code", data).records if isinstance(r.body, ToolResult)]
    assert [r.status for r in results] == ["interrupted"]


# ---------------------------------------------------------------- subagent files

_PROMPT = {"type": "user", "message": {"role": "user", "content": "find the config loader"}}
_CALL = {
    "type": "assistant",
    "message": {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Searching."},
            {"type": "tool_use", "id": "toolu_1", "name": "Grep", "input": {"pattern": "load_config"}},
        ],
    },
}
_RESULT = {
    "type": "user",
    "message": {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}],
    },
}
_ANSWER = {
    "type": "assistant",
    "message": {"role": "assistant", "content": [{"type": "text", "text": "In a.py."}]},
}


def _sidechain(*events: dict[str, Any]) -> list[dict[str, Any]]:
    return [event | {"isSidechain": True, "agentId": "a1b2"} for event in events]


def test_a_claude_code_subagent_transcript_imports_its_conversation() -> None:
    # Claude Code keeps a subagent's conversation in <session>/subagents/agent-<id>.jsonl, every
    # event `isSidechain: true`. It was imported as nothing ("holds no claude-code conversation").
    report = parse_as("claude-code", claude_jsonl(*_sidechain(_PROMPT, _CALL, _RESULT, _ANSWER)))
    kinds = [type(record.body).__name__ for record in report.records]
    assert kinds == [
        "SystemPolicy",  # the tool it called, declared by name
        "TurnStarted",
        "Message",
        "Message",
        "ToolIntent",
        "ToolResult",
        "Message",
        "TurnEnded",
    ]
    assert report.turns == 1 and report.tool_calls == 1 and report.unmatched_intents == 0
    assert "sidechain event" not in report.skipped
    texts = [r.body.text for r in report.records if isinstance(r.body, Message)]
    assert texts == ["find the config loader", "Searching.", "In a.py."]


def test_sidechain_events_inside_a_session_file_are_still_skipped() -> None:
    # The main thread's file: its inline subagent steps stay out, counted, as documented.
    data = claude_jsonl(_PROMPT, *_sidechain(_CALL, _RESULT), _ANSWER)
    report = parse_as("claude-code", data)
    assert report.skipped == {"sidechain event": 2}
    assert report.tool_calls == 0


def test_a_subagent_transcript_imports_through_the_cli(tmp_path: Path) -> None:
    ledger, file = tmp_path / "L", tmp_path / "agent-a1b2.jsonl"
    file.write_bytes(claude_jsonl(*_sidechain(_PROMPT, _CALL, _RESULT, _ANSWER)))
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    result = invoke("import", ledger, file, "--from", "claude-code")
    assert result.exit_code == 0, result.stderr
    assert "1 tool call (0 without a result)" in result.stdout
    assert invoke("verify", ledger).exit_code == 0


# ---------------------------------------------------------------- synthetic messages


def _synthetic(text: str, *, api_error: bool) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "assistant",
        "message": {"role": "assistant", "model": "<synthetic>", "content": [{"type": "text", "text": text}]},
    }
    return event | ({"isApiErrorMessage": True, "error": "rate_limit"} if api_error else {})


def test_a_claude_code_api_error_is_not_the_models_words_and_fails_the_turn() -> None:
    # Claude Code writes an API error it gave up on as an assistant message of model <synthetic>;
    # it was imported as the assistant saying "API Error: ...", and the turn as completed.
    report = parse_as(
        "claude-code",
        claude_jsonl(
            _PROMPT,
            _synthetic("API Error: 529 Overloaded", api_error=True),
            USER | {"type": "user", "message": {"role": "user", "content": "try again"}},
        ),
    )
    messages = [r.body for r in report.records if isinstance(r.body, Message)]
    assert [(m.role, m.channel, m.text) for m in messages] == [
        ("user", None, "find the config loader"),
        ("channel", "claude-code:api-error", "API Error: 529 Overloaded"),
        ("user", None, "try again"),
    ]
    ends = [r.body for r in report.records if isinstance(r.body, TurnEnded)]
    assert [(e.outcome, e.error) for e in ends] == [
        ("failed", "API Error: 529 Overloaded"),
        ("completed", None),
    ]


def test_a_claude_code_synthetic_placeholder_is_a_channel_message() -> None:
    report = parse_as(
        "claude-code", claude_jsonl(_PROMPT, _synthetic("No response requested.", api_error=False))
    )
    messages = [r.body for r in report.records if isinstance(r.body, Message)]
    assert (messages[-1].role, messages[-1].channel) == ("channel", "claude-code:synthetic")
    assert [r.body.outcome for r in report.records if isinstance(r.body, TurnEnded)] == ["completed"]
