"""Claude Code importer: turns, joined tool calls, plans, edits, compaction, skips, errors."""

from __future__ import annotations

from pathlib import Path

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
from tests.importers_support import claude_jsonl, declared

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
