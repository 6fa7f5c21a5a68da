"""Importer edge cases found in review: real tools' files that must import, or fail clearly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.ledger import Ledger
from holon.records import ToolIntent, ToolResult
from tests.cli_support import invoke, tree_bytes
from tests.importers_support import USER, claude_jsonl, message_texts, parse_as

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

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


@pytest.mark.parametrize(
    ("fmt", "name"),
    [("openai-chat", "conversation.json"), ("swe-agent", "function-calling.traj")],
)
def test_a_transcript_without_timestamps_imports_into_a_ledger_that_has_records(
    fmt: str, name: str, tmp_path: Path
) -> None:
    # The synthetic clock starts at 0; a ledger's timestamps never go backwards, so without
    # care a second untimestamped transcript (or one after a Claude Code session) is refused.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    session = FIXTURES / "claude-code" / "session.jsonl"
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    for _ in range(2):
        result = invoke("import", ledger, FIXTURES / fmt / name, "--from", fmt)
        assert result.exit_code == 0, result.stderr
    assert invoke("verify", ledger).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        stamps = [rec.ts for rec in opened.read()]
    assert stamps == sorted(stamps)


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


@pytest.mark.parametrize("arguments", [5, [1, 2], True])
def test_openai_arguments_of_another_json_type_do_not_refuse_the_file(arguments: object) -> None:
    # `arguments` is a JSON string in the API; a runner that logged it decoded (or a model's
    # odd output) is still a call that happened, kept whole like an unparseable string.
    chat = json.dumps([USER, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}},
    ]}]).encode()
    intents = [rec.body for rec in parse_as("openai-chat", chat).records if isinstance(rec.body, ToolIntent)]
    assert intents == [ToolIntent(call_id="c1", tool="f", args={"arguments": arguments})]


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


def test_an_openai_refusal_is_the_assistant_message() -> None:
    # A refusal is what the model said instead of content (`refusal` on the message, or a
    # `refusal` content part); dropping it lost the assistant's turn without a word.
    chat = json.dumps([
        USER,
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        USER,
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "Nor that."}]},
    ]).encode()
    report = parse_as("openai-chat", chat)
    assert message_texts(report) == ["fix it", "I can't help with that.", "fix it", "Nor that."]
    assert report.skipped == {}


@pytest.mark.parametrize("observation_role", ["user", "tool"])
def test_a_swe_agent_action_with_empty_tool_calls_is_still_a_call(observation_role: str) -> None:
    # `tool_calls: []` already counted as "no tool calls" when finding actions, but the call
    # was then read from the empty list: the action vanished and its observation became an
    # operator message (a new turn) or vanished too.
    observation: dict[str, Any] = {"role": observation_role, "content": "submitted"}
    if observation_role == "tool":
        observation["tool_call_ids"] = []
    trajectory = json.dumps({"history": [
        USER, {"role": "assistant", "content": "done", "action": "submit", "tool_calls": []}, observation,
    ]}).encode()
    report = parse_as("swe-agent", trajectory)
    bodies = [rec.body for rec in report.records]
    assert ToolIntent(call_id="action-0", tool="bash", args={"command": "submit"}) in bodies
    results = [body for body in bodies if isinstance(body, ToolResult)]
    assert [(r.call_id, r.output) for r in results] == [("action-0", "submitted")]
    assert report.turns == 1


def test_openhands_message_images_are_counted_as_skipped() -> None:
    # Images pasted into an OpenHands message are not imported (as in every format), but the
    # report must say so rather than drop them without a count.
    events = json.dumps([{"id": 1, "source": "user", "action": "message",
                          "args": {"content": "see", "image_urls": ["data:image/png;base64,AA", "b.png"]}}])
    report = parse_as("openhands", events.encode())
    assert message_texts(report) == ["see"] and report.skipped == {"image": 2}


def test_a_transcript_older_than_the_ledger_is_refused_naming_the_file(tmp_path: Path) -> None:
    # The refusal came from append_evidence as "input record 1": no file, no line. It must
    # name the transcript, and leave the ledger as it was.
    ledger = tmp_path / "L"
    session = FIXTURES / "claude-code" / "session.jsonl"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    assert invoke("import", ledger, session, "--from", "claude-code").exit_code == 0
    before = tree_bytes(ledger)
    # Another session, from the middle of the first one's time (the same one again is imported
    # already: exit 0, nothing appended; tests/test_cli_import.py).
    older = tmp_path / "older.jsonl"
    older.write_bytes(claude_jsonl({"type": "user", "message": USER}))
    again = invoke("import", ledger, older, "--from", "claude-code")
    assert again.exit_code == 2 and "Traceback" not in again.stderr
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "older.jsonl" in lines[0] and "time order" in lines[0]
    assert tree_bytes(ledger) == before


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


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 1e300])
def test_a_swe_agent_step_time_that_is_no_duration_is_left_out(seconds: float) -> None:
    # Before: a NaN or infinite execution_time escaped as ValueError / OverflowError from
    # round(), and 1e300 seconds made a duration no ledger field holds.
    data = json.dumps({
        "trajectory": [{"action": "ls", "observation": "a.py", "execution_time": seconds}],
        "history": [
            USER,
            {"role": "assistant", "content": "Look.", "action": "ls", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}},
            ]},
            {"role": "tool", "content": "a.py", "tool_call_ids": ["c1"]},
        ],
    }).encode()
    results = [rec.body for rec in parse_as("swe-agent", data).records if isinstance(rec.body, ToolResult)]
    assert [(result.output, result.duration_ms) for result in results] == [("a.py", None)]
