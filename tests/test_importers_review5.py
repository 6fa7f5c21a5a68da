"""Fifth review of the transcript importers: subagent files, synthetic messages, what is left out."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord, UsageError
from holon.importers import _shape, read_transcript
from holon.records import (
    ContextSummary,
    ExecutionEnvironment,
    Message,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
)
from tests.cli_support import invoke, tree_bytes
from tests.importers_support import USER, claude_jsonl, parse_as

# ---------------------------------------------------------------- claude-code subagent files

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


# ---------------------------------------------------------------- an import of nothing says why


def test_a_file_that_maps_to_nothing_names_what_was_skipped(tmp_path: Path) -> None:
    # Claude Code writes files holding only summaries of other sessions and snapshots; the refusal
    # said "nothing in it maps to a record" without the counts every other import reports.
    file = tmp_path / "s.jsonl"
    file.write_bytes(
        claude_jsonl(
            {"type": "summary", "summary": "Other work", "leafUuid": "elsewhere"},
            {"type": "file-history-snapshot", "messageId": "m1", "snapshot": {}},
        )
    )
    with pytest.raises(UsageError) as caught:
        read_transcript(file, "claude-code")
    assert str(caught.value) == (
        f"{file} holds no claude-code conversation: nothing in it maps to a record "
        "(skipped: event:file-history-snapshot 1, summary of another session 1)"
    )
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    before = tree_bytes(ledger)
    result = invoke("import", ledger, file, "--from", "claude-code")
    assert result.exit_code == 2 and "summary of another session 1" in result.stderr
    assert tree_bytes(ledger) == before


def test_a_file_of_nothing_skipped_keeps_its_message(tmp_path: Path) -> None:
    file = tmp_path / "t.json"
    file.write_bytes(b"[]")
    with pytest.raises(UsageError, match=r"maps to a record$"):
        read_transcript(file, "openai-chat")


# ---------------------------------------------------------------- claude-code synthetic messages


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


# ---------------------------------------------------------------- swe-agent demos in the history


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


# ---------------------------------------------------------------- openai-chat reasoning


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "reasoning_details"])
def test_openai_compatible_reasoning_is_counted_as_left_out(key: str) -> None:
    # DeepSeek, vLLM, OpenRouter and Ollama return the model's reasoning beside `content`; it
    # was dropped without a word, where Claude Code thinking is counted (`block:thinking`).
    value: object = [{"type": "reasoning.text", "text": "hmm"}] if key == "reasoning_details" else "hmm"
    chat = [USER, {"role": "assistant", "content": "Done.", key: value}]
    report = parse_as("openai-chat", json.dumps(chat).encode())
    assert report.skipped == {"reasoning": 1}
    assert [r.body.text for r in report.records if isinstance(r.body, Message)] == ["fix it", "Done."]


def test_an_empty_reasoning_field_is_nothing_left_out() -> None:
    chat = [USER, {"role": "assistant", "content": "Done.", "reasoning_content": None}]
    assert parse_as("openai-chat", json.dumps(chat).encode()).skipped == {}


# ---------------------------------------------------------------- openhands condensation


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


# ---------------------------------------------------------------- large files: one copy, not several


def _peak_over_size(parse: Callable[[bytes], object], data: bytes) -> float:
    """Peak memory Python allocated while ``parse`` read ``data``, as a multiple of its size."""
    tracemalloc.start()
    try:
        parse(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / len(data)


def test_a_long_claude_code_session_is_not_held_decoded_while_it_is_mapped() -> None:
    # Every line was split out (a second copy of the file) and every event kept decoded (twice its
    # size) until the last record was made: 5.9 times the file's size at the peak, over 500 MB for
    # a 110 MB session. Now lines are decoded one at a time, in two passes: 0.35 times.
    events: list[dict[str, Any]] = []
    for i in range(600):
        ts = {"timestamp": f"2025-03-01T10:{i // 60:02d}:{i % 60:02d}.{i:03d}Z"}
        call = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "content": "ok"}
        events.append({"type": "assistant", "message": {"role": "assistant", "content": [call]}} | ts)
        events.append(
            ts
            | {
                "type": "user",
                "message": {"role": "user", "content": [result]},
                "toolUseResult": {"stdout": "z" * 2000, "lines": ["x"] * 200},
            }
        )
    data = claude_jsonl(_PROMPT, *events)
    assert _peak_over_size(lambda d: parse_as("claude-code", d), data) < 1.5


def test_openhands_evaluation_output_is_read_run_by_run() -> None:
    # Every run was decoded before the first was mapped, and the whole file was first tried as one
    # JSON document whose escapes were all rewritten (a lone-surrogate repair that cannot help with
    # "trailing characters"): 33 times the file's size at the peak. Now 1.4 (the records' outputs).
    runs = []
    for run in range(60):
        history: list[dict[str, Any]] = [
            {
                "id": 0,
                "timestamp": "2025-03-01T10:00:00",
                "source": "user",
                "action": "message",
                "args": {"content": "fix"},
            }
        ]
        for i in range(1, 20, 2):
            history.append(
                {
                    "id": i,
                    "timestamp": "2025-03-01T10:00:01",
                    "source": "agent",
                    "action": "run",
                    "args": {"command": "ls\n" * 20},
                    "tool_call_metadata": {"tool_call_id": f"c{i}", "function_name": "execute_bash"},
                }
            )
            history.append(
                {
                    "id": i + 1,
                    "timestamp": "2025-03-01T10:00:02",
                    "source": "agent",
                    "observation": "run",
                    "cause": i,
                    "content": "out\n" * 100,
                    "extras": {"metadata": {"exit_code": 0}},
                }
            )
        runs.append(json.dumps({"instance_id": run, "history": history}))
    data = ("\n".join(runs) + "\n").encode()
    assert parse_as("openhands", data).tool_calls == 600
    assert _peak_over_size(lambda d: parse_as("openhands", d), data) < 3


def test_json_lines_are_not_rewritten_for_a_repair_that_cannot_help(monkeypatch: pytest.MonkeyPatch) -> None:
    repair = _shape._without_lone_surrogates

    def no_rewrite(data: bytes) -> bytes:
        repaired = repair(data)
        assert repaired is data, "the file's escapes were rewritten"
        return repaired

    monkeypatch.setattr(_shape, "_without_lone_surrogates", no_rewrite)
    run = {"history": [{"id": 0, "source": "user", "action": "message", "args": {"content": "a\\nb"}}]}
    data = (json.dumps(run) + "\n" + json.dumps(run) + "\n").encode()
    assert parse_as("openhands", data).turns == 2


def test_a_json_lines_file_keeps_its_cut_off_and_line_errors() -> None:
    good = claude_jsonl(_PROMPT)
    with pytest.raises(InvalidRecord, match=r"line 2 of t.*ends in the middle of its last line"):
        parse_as("claude-code", good + b'{"type": "user", "mess')
    # A damaged line the session went on past is skipped (test_importers_review23); one with
    # nothing read after it is still refused, naming it.
    with pytest.raises(InvalidRecord, match=r"line 3 of t.*not a JSON value"):
        parse_as("claude-code", good + b"\n{oops\n")
