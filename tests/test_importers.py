"""Importer registry and cross-format properties: only InvalidRecord escapes, records are valid,
output does not depend on the process (hash seed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holon.context.estimator import get_estimator
from holon.errors import InvalidRecord, UsageError
from holon.importers import FORMATS, IMPORTERS, ImportReport, _shape, import_transcript, read_transcript
from holon.records import (
    ExecutionEnvironment,
    Message,
    Record,
    SystemPolicy,
    ToolIntent,
    ToolResult,
    TurnEnded,
    TurnStarted,
    decode_json_record,
    encode_json_record,
)
from tests.cli_support import invoke, tree_bytes
from tests.importers_support import (
    USER,
    claude_jsonl,
    imported_tools,
    message_texts,
    parse_as,
    refused_import,
    tool_calls_of,
)
from tests.msgspec_styles import STYLES, use_style

ROOT = Path(__file__).parent.parent
FIXTURES = ROOT / "fixtures" / "importers"
#: Fixtures each importer must accept (the malformed and wrong-shape ones must be refused).
GOOD = {
    "jsonl": ["ledger.jsonl"],
    "claude-code": ["session.jsonl", "long_request.jsonl", "short_request.jsonl"],
    "openai-chat": ["conversation.json", "tau-bench-runs.json", "long_request.json", "short_request.json"],
    "swe-agent": ["function-calling.traj", "thought-action.traj", "long_request.traj", "short_request.traj"],
    "openhands": ["runs.jsonl", "events.json", "long_request.jsonl", "short_request.jsonl"],
}
JSONL_FORMATS = ("jsonl", "claude-code", "openhands")


def _assert_valid(report: ImportReport) -> None:
    """Every record survives the canonical codec unchanged, so it can be appended and exported."""
    for record in report.records:
        assert record.seq == -1
        assert decode_json_record(encode_json_record(record)) == msgspec.structs.replace(record, seq=-1)


def test_registry_lists_every_format_in_order() -> None:
    assert FORMATS == ("jsonl", "claude-code", "openai-chat", "swe-agent", "openhands")
    assert all(IMPORTERS[name].name == name and IMPORTERS[name].description for name in FORMATS)


@pytest.mark.parametrize(("fmt", "name"), [(fmt, name) for fmt, names in GOOD.items() for name in names])
def test_fixture_records_are_valid_and_ts_never_go_backwards(fmt: str, name: str) -> None:
    report = read_transcript(FIXTURES / fmt / name, fmt)
    assert report.records
    _assert_valid(report)
    stamps = [r.ts for r in report.records]
    assert stamps == sorted(stamps)
    assert import_transcript(FIXTURES / fmt / name, fmt) == list(report.records)


@pytest.mark.parametrize(("fmt", "name"), [(fmt, name) for fmt, names in GOOD.items() for name in names])
def test_turns_are_numbered_from_zero_and_closed(fmt: str, name: str) -> None:
    records = read_transcript(FIXTURES / fmt / name, fmt).records
    opened = [r.turn for r in records if r.kind == "turn_started"]
    closed = [r.turn for r in records if r.kind == "turn_ended"]
    assert opened == list(range(len(opened))) == closed


def test_unknown_format_and_missing_file_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="unknown import format 'csv'; expected one of: jsonl, claude-code"):
        read_transcript(FIXTURES / "jsonl" / "ledger.jsonl", "csv")
    with pytest.raises(UsageError, match=r"cannot read .*nope\.jsonl"):
        read_transcript(tmp_path / "nope.jsonl", "jsonl")


def test_output_does_not_depend_on_the_hash_seed() -> None:
    script = (
        "import sys\n"
        "from holon.importers import read_transcript\n"
        "from holon.records import encode_json_record\n"
        "for fmt, path in zip(sys.argv[1::2], sys.argv[2::2]):\n"
        "    for r in read_transcript(path, fmt).records:\n"
        "        sys.stdout.buffer.write(encode_json_record(r) + b'\\n')\n"
    )
    args = [str(x) for fmt, names in GOOD.items() for name in names for x in (fmt, FIXTURES / fmt / name)]
    expected = b"".join(
        encode_json_record(r) + b"\n"
        for fmt, names in GOOD.items()
        for name in names
        for r in read_transcript(FIXTURES / fmt / name, fmt).records
    )
    for seed in ("1", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run(
            [sys.executable, "-c", script, *args], env=env, capture_output=True, check=True, cwd=ROOT
        )
        assert out.stdout == expected


# --------------------------------------------------------------------------- robustness

# Keys and string values the formats use, so random documents reach deep into each mapping.
_KEYS = [
    "type",
    "role",
    "content",
    "message",
    "text",
    "tool_use",
    "tool_result",
    "tool_use_id",
    "is_error",
    "input",
    "id",
    "name",
    "uuid",
    "timestamp",
    "summary",
    "leafUuid",
    "isMeta",
    "isSidechain",
    "isCompactSummary",
    "cwd",
    "gitBranch",
    "sessionId",
    "toolUseResult",
    "interrupted",
    "subtype",
    "todos",
    "status",
    "tool_calls",
    "function",
    "arguments",
    "tool_call_id",
    "tool_call_ids",
    "traj",
    "messages",
    "tools",
    "parameters",
    "description",
    "function_call",
    "history",
    "trajectory",
    "state",
    "working_dir",
    "open_file",
    "execution_time",
    "action",
    "info",
    "exit_status",
    "submission",
    "is_demo",
    "observation",
    "cause",
    "args",
    "extras",
    "metadata",
    "exit_code",
    "success",
    "source",
    "thought",
    "final_thought",
    "task_completed",
    "tool_call_metadata",
    "function_name",
    "path",
    "command",
    "error",
    "seq",
    "ts",
    "turn",
    "kind",
    "v",
    "body",
    "filename",
]
_WORDS = [
    "user",
    "assistant",
    "system",
    "tool",
    "developer",
    "function",
    "text",
    "tool_use",
    "tool_result",
    "thinking",
    "summary",
    "TodoWrite",
    "Edit",
    "Write",
    "Bash",
    "bash",
    "edit",
    "create",
    "run",
    "read",
    "message",
    "finish",
    "think",
    "recall",
    "agent",
    "completed",
    "pending",
    "in_progress",
    "submitted",
    "2025-03-01T10:00:00Z",
    "2025-04-30T16:00:00",
    "not-a-date",
    "Error:_x",
    "ERROR:",
    "t1",
    "call_1",
    "1",
    "str_replace",
    "/a/b.py",
    "rel.py",
]
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(_WORDS)
    | st.text(max_size=5)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6),
    max_leaves=30,
)


def _document(value: Any, fmt: str) -> bytes:
    if fmt in JSONL_FORMATS and isinstance(value, list):
        return b"\n".join(msgspec.json.encode(item) for item in value)
    return msgspec.json.encode(value)


def _parse_or_refuse(fmt: str, data: bytes) -> None:
    try:
        report = IMPORTERS[fmt].parse_bytes(data, source="fuzz")
    except InvalidRecord as exc:
        assert str(exc).startswith("invalid record")
        return
    _assert_valid(report)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=200))
def test_random_bytes_raise_only_invalid_record(fmt: str, data: bytes) -> None:
    _parse_or_refuse(fmt, data)


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=400, deadline=None)
@given(value=_json)
def test_random_json_raises_only_invalid_record(fmt: str, value: Any) -> None:
    _parse_or_refuse(fmt, _document(value, fmt))


@pytest.mark.parametrize("fmt", FORMATS)
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_damaged_fixtures_raise_only_invalid_record(fmt: str, data: st.DataObject) -> None:
    original = (FIXTURES / fmt / GOOD[fmt][0]).read_bytes()
    start = data.draw(st.integers(0, len(original)))
    length = data.draw(st.integers(0, 20))
    junk = data.draw(st.binary(max_size=8))
    _parse_or_refuse(fmt, original[:start] + junk + original[start + length :])


def test_records_type_is_a_tuple_of_records() -> None:
    report = read_transcript(FIXTURES / "jsonl" / "ledger.jsonl", "jsonl")
    assert isinstance(report.records, tuple) and all(isinstance(r, Record) for r in report.records)


# --------------------------------------------------------------------------- whatever msgspec says
#
# What an import refuses, passes over or repairs follows the transcript's bytes: msgspec 0.23
# raises a DecodeError worded its own way for text that is not UTF-8 where 0.22 raised
# UnicodeDecodeError, and a Claude Code line that is not UTF-8 was passed over as a torn
# write under 0.23 instead of refused (tests/msgspec_styles.py).

_USER = {"role": "user", "content": "fix it"}


def _session(*inserted: bytes) -> bytes:
    """A Claude Code session of two prompts with ``inserted`` lines between them."""
    first, second = (
        json.dumps(
            {"uuid": f"u{i}", "timestamp": f"2025-03-01T10:00:0{i}Z", "type": "user", "message": _USER}
        ).encode()
        for i in (1, 2)
    )
    return b"\n".join([first, *inserted, second]) + b"\n"


@pytest.mark.parametrize("style", STYLES)
def test_an_import_refuses_passes_over_or_repairs_by_the_bytes_whatever_msgspec_raises(
    monkeypatch: pytest.MonkeyPatch, style: str
) -> None:
    use_style(monkeypatch, style)
    claude, chat = IMPORTERS["claude-code"], IMPORTERS["openai-chat"]
    latin = b'{"type":"x","t":"caf\xe9"}'
    with pytest.raises(InvalidRecord) as info:  # refused, not passed over as a torn write
        claude.parse_bytes(_session(latin), source="t")
    assert str(info.value).startswith("invalid record at line 2 of t: not UTF-8 text (byte 0xe9 at byte 20: ")
    assert claude.parse_bytes(_session(b'{"type":"progress","da'), source="t").skipped == {
        "unreadable line": 1
    }
    for cut in (b'{"type":"user","message":{"ro', b'{"type":"user","t":"caf\xc3'):
        with pytest.raises(InvalidRecord, match=r"at line 3 of t: .*ends in the middle of its last line"):
            claude.parse_bytes(_session() + cut, source="t")
    document = b"\xef\xbb\xbf" + json.dumps([_USER]).encode()
    with pytest.raises(
        InvalidRecord, match=rf"not UTF-8 text \(byte 0xe9 at byte {document.index(b'fix')}: "
    ):
        chat.parse_bytes(document.replace(b"fix", b"\xe9ix"), source="t")  # the byte order mark counted
    with pytest.raises(InvalidRecord, match="the file ends in the middle of it"):
        chat.parse_bytes(document[:-2], source="t")
    for repaired, text in [(rb"fix \ud83d", "fix \ufffd"), (b'fix", "cost": NaN, "x": "', "fix")]:
        report = chat.parse_bytes(document.replace(b"fix it", repaired), source="t")
        assert [rec.body.text for rec in report.records if isinstance(rec.body, Message)] == [text]


_SURROGATE_PIECES = st.sampled_from(["\\", "ud83d", "ude00", "\ud83d", "\ude00", "x", "😀"])


@given(st.lists(_SURROGATE_PIECES, max_size=10).map("".join))
def test_each_lone_surrogate_escape_and_nothing_else_becomes_u_fffd(text: str) -> None:
    escaped = json.dumps(text).encode()  # each surrogate as its escape; a backslash as `\\`
    expected = "".join("\ufffd" if 0xD800 <= ord(char) <= 0xDFFF else char for char in json.loads(escaped))
    assert json.loads(_shape._without_lone_surrogates(escaped)) == expected

# ------------------------------------------------------------------ refused edits

#: A refusal in each editing tool's own words, and what the same tool says when it did write.
_LINT_REFUSAL = (
    "Your proposed edit has introduced new syntax error(s). Please read this error message carefully "
    "and then retry editing the file.\n\nERRORS:\n- E999 IndentationError: unexpected indent\n\n"
    "This is how your edit would have looked if applied\n---\n[File: /testbed/calc.py]\n1:  x = 1\n---\n\n"
    "Your changes have NOT been applied. Please fix your edit command and try again.\n"
    "DO NOT re-run the same failed edit command. Running it again will lead to the same error."
)
_NOT_FOUND = "No replacement was performed, old_str `a - b` did not appear verbatim in /testbed/calc.py."
_NOT_APPLIED = "Your edit was not applied (file not modified): Text 'a - b' not found in displayed lines."
_CLAUDE_NOT_FOUND = "<tool_use_error>String to replace not found in file.\nString: x</tool_use_error>"
_CLAUDE_NOT_READ = (
    "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"
)
_CLAUDE_REJECTED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed."
)
#: A successful edit whose snippet shows code that mentions a refusal: only the start of the answer counts.
_EDITED = (
    "The file /testbed/calc.py has been edited. Here's the result of running `cat -n` on a snippet:\n"
    '     1\tMESSAGE = "No replacement was performed"\n'
    "Review the changes and make sure they are as expected."
)


def _claude_edit(refusal: str) -> bytes:
    def use(call: str, old: str) -> dict[str, Any]:
        args = {"file_path": "/repo/a.py", "old_string": old, "new_string": "y"}
        block = {"type": "tool_use", "id": call, "name": "Edit", "input": args}
        return {"type": "assistant", "cwd": "/repo", "message": {"role": "assistant", "content": [block]}}

    def answer(call: str, content: str) -> dict[str, Any]:
        # No `is_error`, as a copy of the session rewritten by another tool may lack it.
        block = {"type": "tool_result", "tool_use_id": call, "content": content}
        return {"type": "user", "cwd": "/repo", "message": {"role": "user", "content": [block]}}

    return claude_jsonl(
        {"type": "user", "cwd": "/repo", "message": {"role": "user", "content": "fix it"}},
        use("toolu_1", "x"),
        answer("toolu_1", refusal),
        use("toolu_2", "z"),
        answer("toolu_2", "The file /repo/a.py has been updated."),
    )


def _chat_edit(refusal: str) -> bytes:
    def call(call_id: str) -> dict[str, Any]:
        args = (
            '{"command": "str_replace", "path": "/testbed/calc.py", "old_str": "a - b", "new_str": "a + b"}'
        )
        function = {"name": "str_replace_editor", "arguments": args}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        }

    return json.dumps(
        [
            {"role": "user", "content": "fix it"},
            call("c1"),
            {"role": "tool", "tool_call_id": "c1", "content": refusal},
            call("c2"),
            {"role": "tool", "tool_call_id": "c2", "content": _EDITED},
        ]
    ).encode()


def _swe_edit(refusal: str) -> bytes:
    def call(call_id: str) -> dict[str, Any]:
        function = {"name": "edit", "arguments": '{"search": "a - b", "replace": "a + b"}'}
        return {
            "role": "assistant",
            "content": "Fix it.",
            "tool_calls": [{"id": call_id, "type": "function", "function": function}],
        }

    state = {"open_file": "/testbed/calc.py", "working_dir": "/testbed"}
    steps = [{"action": "edit", "observation": text, "state": state} for text in (refusal, "Text replaced.")]
    history = [
        {"role": "user", "content": "fix it"},
        call("c1"),
        {"role": "tool", "content": refusal, "tool_call_ids": ["c1"]},
        call("c2"),
        {"role": "tool", "content": "Text replaced.", "tool_call_ids": ["c2"]},
    ]
    return json.dumps({"history": history, "trajectory": steps}).encode()


def _openhands_edit(refusal: str) -> bytes:
    def edit(event_id: int) -> dict[str, Any]:
        args = {
            "command": "str_replace",
            "path": "/workspace/calc.py",
            "old_str": "a - b",
            "new_str": "a + b",
        }
        return {"id": event_id, "source": "agent", "action": "edit", "args": args}

    def observed(cause: int, content: str) -> dict[str, Any]:
        return {"id": cause + 1, "cause": cause, "source": "agent", "observation": "edit", "content": content}

    user = {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}}
    return json.dumps([user, edit(1), observed(1, refusal), edit(3), observed(3, _EDITED)]).encode()


@pytest.mark.parametrize(
    ("fmt", "data", "written"),
    [
        # SWE-agent records no status: the editor's own words are all that say it wrote nothing.
        pytest.param("swe-agent", _swe_edit(_LINT_REFUSAL), "/testbed/calc.py", id="swe-agent lint"),
        pytest.param("swe-agent", _swe_edit(_NOT_APPLIED), "/testbed/calc.py", id="swe-agent not found"),
        # Claude Code flags a refused call `is_error`; a copy without the flag still says <tool_use_error>.
        pytest.param(
            "claude-code", _claude_edit(_CLAUDE_NOT_FOUND), "/repo/a.py", id="claude-code not found"
        ),
        pytest.param("claude-code", _claude_edit(_CLAUDE_NOT_READ), "/repo/a.py", id="claude-code not read"),
        pytest.param("claude-code", _claude_edit(_CLAUDE_REJECTED), "/repo/a.py", id="claude-code rejected"),
        pytest.param(
            "openai-chat", _chat_edit(_NOT_FOUND), "/testbed/calc.py", id="openai-chat str_replace_editor"
        ),
        pytest.param(
            "openai-chat",
            _chat_edit("Parameter `old_str` is required for command: str_replace."),
            "/testbed/calc.py",
            id="openai-chat missing parameter",
        ),
        pytest.param(
            "openhands", _openhands_edit(f"ERROR:\n{_NOT_FOUND}"), "/workspace/calc.py", id="openhands"
        ),
    ],
)
def test_a_refused_edit_is_an_error_that_touched_no_file(fmt: str, data: bytes, written: str) -> None:
    results = [
        r.body for r in IMPORTERS[fmt].parse_bytes(data, source="t").records if r.kind == "tool_result"
    ]
    refused, accepted = results
    assert (refused.status, refused.touched_files) == ("error", ())
    # The same tool's success, even one whose file snippet mentions a refusal, wrote its file.
    assert (accepted.status, accepted.touched_files) == ("ok", (written,))


def test_a_swe_agent_refusal_inside_its_observation_template_is_still_a_refusal() -> None:
    """SWE-agent 1.x's default template puts ``OBSERVATION:`` before the tool's output in the history."""
    history = json.loads(_swe_edit(_NOT_APPLIED))
    history["history"][2]["content"] = f"OBSERVATION:\n{_NOT_APPLIED}"
    for with_steps in (True, False):  # the raw output in `trajectory[]`, or only the history's
        data = history if with_steps else {"history": history["history"]}
        report = IMPORTERS["swe-agent"].parse_bytes(json.dumps(data).encode(), source="t")
        refused = next(r.body for r in report.records if r.kind == "tool_result")
        assert (refused.status, refused.touched_files) == ("error", ())


# ------------------------------------------------------------------ session boundaries


def _sessions(fmt: str, data: bytes) -> list[tuple[int, str | None, str | None]]:
    """Each session start: (its index among the records, its session id, its working directory).

    Checked here: it stands outside any turn, and no turn runs across it.
    """
    records = IMPORTERS[fmt].parse_bytes(data, source="t").records
    starts = []
    previous = None
    for index, record in enumerate(records):
        if isinstance(record.body, ExecutionEnvironment) and record.body.extra.get("session_id") != previous:
            previous = record.body.extra.get("session_id")
            assert record.turn is None, record
            assert index == 0 or isinstance(records[index - 1].body, TurnEnded | SystemPolicy), record
            starts.append((index, previous, record.body.cwd))
    return starts


def _chat_run(ask: str, **run: object) -> dict[str, Any]:
    return {"traj": [{"role": "system", "content": "policy"}, {"role": "user", "content": ask}]} | run


def test_each_run_of_a_file_starts_with_the_environment_that_names_it() -> None:
    """A multi-run file holds separate conversations: each run's start is marked, by its id if it has one."""
    tau = [_chat_run("a", task_id=3, trial=0), _chat_run("b", task_id=3, trial=1), _chat_run("c", task_id=7)]
    assert _sessions("openai-chat", json.dumps(tau).encode()) == [
        (0, "task 3 trial 0", None),
        (5, "task 3 trial 1", None),
        (10, "task 7", None),
    ]
    lines = b"\n".join(json.dumps({"messages": [{"role": "user", "content": ask}]}).encode() for ask in "ab")
    assert _sessions("openai-chat", lines) == [(0, "run 1", None), (4, "run 2", None)]

    def openhands_run(instance: str, cwd: str) -> bytes:
        user = {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}}
        run = {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}}
        out = {
            "id": 2,
            "cause": 1,
            "observation": "run",
            "content": "",
            "extras": {"metadata": {"exit_code": 0, "working_dir": cwd}},
        }
        return json.dumps({"instance_id": instance, "history": [user, run, out]}).encode()

    # The second run's directory is its own: until it reports one, it is not the first run's.
    data = openhands_run("calc-1", "/workspace") + b"\n" + openhands_run("calc-2", "/workspace")
    assert _sessions("openhands", data) == [(0, "calc-1", None), (8, "calc-2", None)]
    # A run's id that an earlier run had (a rerun appended to the output) still starts another run.
    data = openhands_run("calc-1", "/workspace") + b"\n" + openhands_run("calc-1", "/workspace")
    assert [s[1] for s in _sessions("openhands", data)] == ["calc-1", "calc-1#2"]


def test_a_swe_agent_run_is_named_by_its_problem_statement() -> None:
    """SWE-agent 1.x saves its configuration as a JSON string: its problem statement's id is the instance."""
    state = {"open_file": "n/a", "working_dir": "/testbed"}
    config = json.dumps({"problem_statement": {"id": "marshmallow-code__marshmallow-1867", "text": "..."}})
    document = {
        "history": [
            {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "Look.", "action": "ls"},
            {"role": "user", "content": "a.py"},
        ],
        "trajectory": [{"action": "ls", "observation": "a.py", "state": state}],
        "replay_config": config,
    }
    assert _sessions("swe-agent", json.dumps(document).encode()) == [
        (0, "marshmallow-code__marshmallow-1867", "/testbed")
    ]
    del document["replay_config"]
    assert _sessions("swe-agent", json.dumps(document).encode()) == [(0, "run 1", "/testbed")]


def test_a_claude_code_session_starts_with_its_session_id() -> None:
    data = claude_jsonl({"type": "user", "cwd": "/repo", "message": {"role": "user", "content": "fix it"}})
    assert _sessions("claude-code", data) == [(0, "s1", "/repo")]


def test_a_run_with_nothing_in_it_marks_no_session(tmp_path: Path) -> None:
    """A session record alone is no conversation: an empty run records nothing, an empty file none."""
    runs = [{"traj": []}, _chat_run("b")]
    assert _sessions("openai-chat", json.dumps(runs).encode()) == [(0, "run 2", None)]
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    with pytest.raises(UsageError, match="holds no openai-chat conversation"):
        read_transcript(empty, "openai-chat")


# ------------------------------------------------------------------ long_request / short_request fixtures


def _make_long() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_long", FIXTURES / "make_long.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


MAKE_LONG = _make_long()
#: Each format's suffix for the long_request / short_request fixtures.
SUFFIXES = {"claude-code": ".jsonl", "openai-chat": ".json", "swe-agent": ".traj", "openhands": ".jsonl"}


def test_the_request_fixtures_are_what_make_long_writes() -> None:
    written = MAKE_LONG.fixtures()
    assert sorted(path.relative_to(FIXTURES).as_posix() for path in written) == sorted(
        f"{fmt}/{name}{suffix}"
        for fmt, suffix in SUFFIXES.items()
        for name in ("long_request", "short_request")
    )
    for path, data in written.items():
        assert path.read_bytes() == data, (
            f"{path.relative_to(ROOT)} is stale; run `python fixtures/importers/make_long.py`"
        )


def _text(records: tuple[Record, ...]) -> str:
    """What a prompt could show of the import: messages, call arguments and outputs."""
    parts = []
    for record in records:
        body = record.body
        if isinstance(body, Message):
            parts.append(body.text)
        elif isinstance(body, ToolIntent):
            parts.append(json.dumps(body.args, ensure_ascii=False))
        elif isinstance(body, ToolResult):
            parts.append(body.output)
    return "\n".join(parts)


@pytest.mark.parametrize("fmt", sorted(SUFFIXES))
def test_a_long_request_imports_with_its_constraints_calls_failures_and_correction(fmt: str) -> None:
    report = read_transcript(FIXTURES / fmt / f"long_request{SUFFIXES[fmt]}", fmt)
    assert (report.skipped, report.unmatched_intents) == ({}, 0)
    records = report.records
    turns = [r.body for r in records if isinstance(r.body, TurnStarted)]
    # The first operator request (about 1,500 characters) holds the constraints; a later turn corrects it.
    assert [t.input for t in turns] == [MAKE_LONG.REQUEST, MAKE_LONG.CORRECTION]
    assert 1400 <= len(MAKE_LONG.REQUEST) <= 1600
    text = _text(records).lower()
    for constraint in MAKE_LONG.CONSTRAINTS:
        assert MAKE_LONG.REQUEST.count(constraint) == 1
    for marker in MAKE_LONG.MARKERS:  # distinctive: in the request and nowhere else
        assert text.count(marker) == 1, marker
    assert 40 <= report.tool_calls <= 60
    results = [r.body for r in records if isinstance(r.body, ToolResult)]
    sizes = [len(r.output) for r in results]
    assert min(sizes) <= 61 and 5_000 <= max(sizes) <= 6_200  # empty (SWE-agent's no-output line) to ~6 KB
    failed = [r for r in results if any(line.startswith("FAILED ") for line in r.output.splitlines())]
    assert len(failed) == 3
    # One edit the editor refused: an error that touched no file.
    refused = [r for r in results if "not found" in r.output or "did not appear verbatim" in r.output]
    assert [(r.status, r.touched_files) for r in refused] == [("error", ())]
    assert sum(bool(r.touched_files) for r in results) == 16
    assert sum(isinstance(r.body, Message) and r.body.role == "assistant" for r in records) >= 5
    # Roughly 20-40k tokens of history: 80-160 KB of text.
    assert 80_000 <= len(text) <= 160_000
    assert 20_000 <= get_estimator().count(text) <= 40_000
    sessions = [r.body.extra.get("session_id") for r in records if isinstance(r.body, ExecutionEnvironment)]
    assert sessions[0] is not None


@pytest.mark.parametrize("fmt", sorted(SUFFIXES))
def test_a_short_request_imports_in_a_few_calls(fmt: str) -> None:
    report = read_transcript(FIXTURES / fmt / f"short_request{SUFFIXES[fmt]}", fmt)
    assert (report.skipped, report.unmatched_intents, report.turns, report.tool_calls) == ({}, 0, 1, 3)
    first = next(r.body for r in report.records if isinstance(r.body, TurnStarted))
    assert first.input == MAKE_LONG.SHORT_REQUEST
    assert all(constraint in first.input for constraint in MAKE_LONG.CONSTRAINTS)
    assert len(_text(report.records)) <= 3_000



# ---------------------------------------------------------------- bytes every format meets
# Real tools' files that must import, or fail clearly: a byte order mark, lone surrogate
# escapes, Python's NaN and Infinity words, arguments msgpack cannot hold, a file cut off
# mid-line, bytes that are not UTF-8.

SAMPLES: dict[str, bytes] = {
    "claude-code": claude_jsonl({"type": "user", "message": {"role": "user", "content": "fix it"}}),
    "openai-chat": json.dumps([USER]).encode(),
    "swe-agent": json.dumps({"history": [USER]}).encode(),
    "openhands": json.dumps(
        [{"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    ).encode(),
}


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_a_utf8_byte_order_mark_is_ignored(fmt: str) -> None:
    # Windows tools (PowerShell's Out-File, Notepad) prefix UTF-8 files with a BOM; RFC 8259
    # lets a parser ignore it, and the file is otherwise the tool's own.
    assert message_texts(parse_as(fmt, b"\xef\xbb\xbf" + SAMPLES[fmt])) == ["fix it"]


def test_lone_surrogate_escapes_become_replacement_characters() -> None:
    # JavaScript (Claude Code) and Python's json.dumps write half of a character, e.g. an
    # output cut in the middle of an emoji, as a lone `\udXXX` escape: valid JSON grammar.
    # The rest of the file must still import; an escaped backslash before `u` is just text.
    text = r"cut \ud83d|\ude00|\ud83d\ude00|\\ud800"
    data = SAMPLES["claude-code"].replace(b'"fix it"', f'"{text}"'.encode())
    assert message_texts(parse_as("claude-code", data)) == ["cut \ufffd|\ufffd|\U0001f600|\\ud800"]
    for fmt, sample in SAMPLES.items():
        damaged = sample.replace(b"fix it", rb"fix \udcff it")
        assert message_texts(parse_as(fmt, damaged)) == ["fix \ufffd it"], fmt


def test_only_a_synthetic_clock_moves_after_a_ledger() -> None:
    synthetic = parse_as("openai-chat", SAMPLES["openai-chat"])
    assert [rec.ts for rec in synthetic.after(5_000).records] == [6_000, 7_000, 8_000, 9_000]
    timestamped = parse_as("claude-code", SAMPLES["claude-code"])
    assert timestamped.after(5_000) == timestamped


def test_arguments_the_ledger_cannot_store_are_kept_as_json_text(tmp_path: Path) -> None:
    # Tool arguments are model-written and never a reason to refuse a file, but msgpack holds
    # no integer beyond 64 bits: the import failed at "seq N" (no such line), left a blob behind.
    big = 123456789012345678901234567890
    data = claude_jsonl(
        {"type": "user", "message": {"role": "user", "content": "fix it"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Calc", "input": {"n": big}},
        ]}},
    )
    intents = [rec.body for rec in parse_as("claude-code", data).records if isinstance(rec.body, ToolIntent)]
    assert intents == [ToolIntent(call_id="t1", tool="Calc", args={"arguments": f'{{"n":{big}}}'})]
    chat = json.dumps([USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": json.dumps({"n": -big})}},
    ]}]).encode()
    intents = [rec.body for rec in parse_as("openai-chat", chat).records if isinstance(rec.body, ToolIntent)]
    assert intents == [ToolIntent(call_id="c1", tool="f", args={"arguments": f'{{"n":{-big}}}'})]
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    assert invoke("init", tmp_path / "L", "--agent-id", "a1").exit_code == 0
    assert invoke("import", tmp_path / "L", path, "--from", "claude-code").exit_code == 0


def test_a_transcript_cut_off_mid_line_says_so_and_what_to_do(tmp_path: Path) -> None:
    # A session file copied while Claude Code was still appending ends mid-line: that is not
    # a wrong --from, and the user needs to know what to do about it.
    data = (FIXTURES / "claude-code" / "session.jsonl").read_bytes().rstrip(b"\n")
    last = data.count(b"\n") + 1
    with pytest.raises(InvalidRecord) as caught:
        parse_as("claude-code", data[:-20])
    message = str(caught.value)
    assert f"line {last} of t" in message and "ends in the middle of its last line" in message
    assert "still being written" in message and "--from" not in message
    trajectory = (FIXTURES / "swe-agent" / "function-calling.traj").read_bytes()
    with pytest.raises(InvalidRecord) as caught:
        parse_as("swe-agent", trajectory[: len(trajectory) // 2])
    assert "ends in the middle of" in str(caught.value) and "--from" not in str(caught.value)
    # A complete last line without its newline is fine, and a cut line that is not the last is
    # still reported as malformed (with the --from hint).
    assert parse_as("claude-code", data).records
    with pytest.raises(InvalidRecord, match="--from claude-code"):
        parse_as("claude-code", b"{\n" + data)


NAN_SAMPLES: dict[str, bytes] = {
    "claude-code": claude_jsonl({"type": "user", "message": USER, "cost": float("nan")}),
    "openai-chat": json.dumps([USER | {"logprob": float("-inf")}]).encode(),
    "swe-agent": json.dumps({"history": [USER], "info": {"instance_cost": float("nan")}}).encode(),
    "openhands": json.dumps(
        [{"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}, "cost": 1e999}]
    ).encode(),
}


@pytest.mark.parametrize("fmt", sorted(NAN_SAMPLES))
def test_python_nan_and_infinity_words_do_not_refuse_the_file(fmt: str) -> None:
    # Python's json.dump writes a float NaN or infinity as a bare word (not JSON). Before,
    # the file was refused with "invalid character" and a hint that --from was wrong.
    assert b"NaN" in NAN_SAMPLES[fmt] or b"Infinity" in NAN_SAMPLES[fmt]
    assert message_texts(parse_as(fmt, NAN_SAMPLES[fmt])) == ["fix it"]


NAN = float("nan")


def test_a_nan_in_tool_arguments_is_kept_as_text(tmp_path: Path) -> None:
    # The ledger holds no NaN (its JSONL form could not), so the arguments are kept as the
    # transcript wrote them, like an integer beyond 64 bits.
    data = claude_jsonl(
        {"type": "user", "message": {"role": "user", "content": "fix it"}},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Fit", "input": {"tol": NAN, "max": float("inf")}},
        ]}},
    )
    intents = [rec.body for rec in parse_as("claude-code", data).records if isinstance(rec.body, ToolIntent)]
    assert intents == [ToolIntent(call_id="t1", tool="Fit", args={"arguments": '{"tol":NaN,"max":Infinity}'})]
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    assert invoke("init", tmp_path / "L", "--agent-id", "a1").exit_code == 0
    assert invoke("import", tmp_path / "L", path, "--from", "claude-code").exit_code == 0


@pytest.mark.parametrize("word", [b"nan", b"-NaN", b"NaNa", b"Inf"])
def test_other_bare_words_are_still_not_json(word: bytes) -> None:
    data = b'{"history": [{"role": "user", "content": "fix it"}], "cost": ' + word + b"}"
    malformed = r"not a JSON document \(JSON is malformed: invalid character \(byte \d+\)\)"
    with pytest.raises(InvalidRecord, match=malformed):
        parse_as("swe-agent", data)


NOT_UTF8: dict[str, bytes] = {
    "claude-code": claude_jsonl({"type": "user", "message": USER}).replace(b"fix it", b"caf\xe9 fix it"),
    "openai-chat": json.dumps([USER]).encode().replace(b"fix it", b"caf\xe9 fix it"),
    "swe-agent": json.dumps({"history": [USER]}).encode().replace(b"fix it", b"caf\xe9 fix it"),
    "openhands": json.dumps(
        [{"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    ).encode().replace(b"fix it", b"caf\xe9 fix it"),
    "jsonl": b'{"seq": 0, "ts": 1, "turn": null, "kind": "message", "v": 1, '
    b'"body": {"role": "user", "text": "caf\xe9 fix it"}}\n',
}


@pytest.mark.parametrize("fmt", sorted(NOT_UTF8))
def test_a_file_that_is_not_utf8_names_the_byte_where_it_is_and_what_to_do(fmt: str) -> None:
    # A transcript re-saved by a Windows tool as Latin-1: the error said "at byte 1" or so (the
    # offset inside the JSON string holding the byte, not in the file or line) and nothing
    # about what to do, wrapped in "not a JSON document (...)".
    data = NOT_UTF8[fmt]
    with pytest.raises(InvalidRecord) as caught:
        parse_as(fmt, data)
    offset = data.splitlines()[0].index(b"\xe9")
    message = str(caught.value)
    assert f"not UTF-8 text (byte 0xe9 at byte {offset}: " in message, message
    assert "save it as UTF-8" in message and "not a JSON" not in message


def test_the_offset_of_a_byte_that_is_not_utf8_counts_a_byte_order_mark() -> None:
    # Windows tools start files with a BOM; the offset must still be the byte's in the file.
    data = b"\xef\xbb\xbf" + json.dumps({"messages": [{"role": "user", "content": "cafX"}]}).encode()
    data = data.replace(b"X", b"\xe9")
    offset = data.index(b"\xe9")
    with pytest.raises(InvalidRecord, match=f"byte 0xe9 at byte {offset}: "):
        parse_as("openai-chat", data)


# ---------------------------------------------------------------- blank ids and names


def _chat(call_id: str, name: str, answer_id: str | None = None) -> bytes:
    answer = call_id if answer_id is None else answer_id
    return json.dumps([
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": answer, "content": "a.py"},
    ]).encode()


def _claude(call_id: str, name: str, answer_id: str | None = None) -> bytes:
    answer = call_id if answer_id is None else answer_id
    return claude_jsonl(
        {"type": "user", "message": USER},
        {"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": {}}]}},
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": answer, "content": "a.py"}]}},
    )


def _swe(call_id: str, name: str, answer_id: str | None = None) -> bytes:
    answer = call_id if answer_id is None else answer_id
    return json.dumps({"history": [
        USER,
        {"role": "assistant", "content": "Look.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "content": "a.py", "tool_call_ids": [answer]},
    ]}).encode()


BUILDERS = {"openai-chat": _chat, "claude-code": _claude, "swe-agent": _swe}
FIELDS = {
    "openai-chat": r"\[1\]\.tool_calls\[0\]\.function\.name",
    "claude-code": r"message\.content\[0\]\.name",
    "swe-agent": r"history\[1\]\.tool_calls\[0\]\.function\.name",
}


@pytest.mark.parametrize("name", ["", "  "])
@pytest.mark.parametrize("fmt", sorted(BUILDERS))
def test_a_tool_call_with_a_blank_name_is_refused_where_it_is(fmt: str, name: str, tmp_path: Path) -> None:
    # Imported as a call to tool "", rendered as `call c1  {}`: no format's API writes or accepts a
    # call to no tool. The refusal names the field, and asks nothing about --from: the format is right.
    data = BUILDERS[fmt]("c1", name)
    with pytest.raises(InvalidRecord, match=FIELDS[fmt]) as caught:
        parse_as(fmt, data)
    blank = "an empty" if not name else "a blank (whitespace-only)"
    assert f"has {blank} `name`" in str(caught.value) and "fix or remove the call" in str(caught.value)
    assert "--from" not in str(caught.value)
    assert "name" in refused_import(tmp_path, fmt, data)


@pytest.mark.parametrize(
    ("field", "data"),
    [
        ("message.content[0].id", _claude("", "Bash", answer_id="t1")),
        ("message.content[0].id", _claude(" ", "Bash")),
        ("message.content[0].tool_use_id", _claude("t1", "Bash", answer_id="")),
    ],
)
def test_a_claude_code_blank_call_id_is_refused(field: str, data: bytes, tmp_path: Path) -> None:
    # The Messages API gives every tool_use an id (`toolu_...`) and refuses a blank one: such a
    # file was edited or written by something else, and a blank id joins nothing reliably.
    with pytest.raises(InvalidRecord, match="the Messages API gives every tool call an id") as caught:
        parse_as("claude-code", data)
    assert caught.value.field == field and "--from" not in str(caught.value)
    refused_import(tmp_path, "claude-code", data)


@pytest.mark.parametrize("blank", ["", "   "])
@pytest.mark.parametrize(("fmt", "derived"), [("openai-chat", "tool_call-1.0"), ("swe-agent", "action-0.0")])
def test_an_openai_style_blank_call_id_gets_a_derived_one(
    fmt: str, derived: str, blank: str, tmp_path: Path
) -> None:
    # Gemini's OpenAI-compatible endpoint and LM Studio send `"id": ""`, and runners answer with
    # `"tool_call_id": ""`. Imported, the call got holon call id "" (a second one "#2"). It gets a
    # deterministic id from its place, and its blank-id result still answers it.
    data = BUILDERS[fmt](blank, "ls")
    assert tool_calls_of(data, fmt) == [(derived, "ls", None), (derived, "ls", "a.py")]
    assert imported_tools(tmp_path, fmt, data) == [(derived, "ls", "ok")]


def test_blank_call_ids_answer_in_order_and_never_a_call_that_has_an_id() -> None:
    chat = json.dumps([
        USER,
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "", "type": "function", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c9", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            {"id": "", "type": "function", "function": {"name": "c", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "", "content": "1"},
        {"role": "tool", "tool_call_id": " ", "content": "2"},
        {"role": "tool", "tool_call_id": "", "content": "3"},
    ]).encode()
    report = parse_as("openai-chat", chat)
    results = [(r.body.call_id, r.body.output) for r in report.records if isinstance(r.body, ToolResult)]
    # The third blank-id result has no id-less call left: an orphan, not an answer to c9.
    assert results == [("tool_call-1.0", "1"), ("tool_call-1.2", "2")]
    assert report.skipped == {"orphan tool result": 1} and report.unmatched_intents == 1


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


# ---------------------------------------------------------------- large files: one copy, not several

_PROMPT = {"type": "user", "message": {"role": "user", "content": "find the config loader"}}


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
    # A damaged line the session went on past is skipped (test_importers_claude_code); one with
    # nothing read after it is still refused, naming it.
    with pytest.raises(InvalidRecord, match=r"line 3 of t.*not a JSON value"):
        parse_as("claude-code", good + b"\n{oops\n")
