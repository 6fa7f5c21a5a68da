"""Readable output: escaped for a terminal, the exact bytes for a pipe, and a reader that leaves early.

Readable output escapes the control characters a record holds (a tool output can retitle a
terminal, write its clipboard, or hide the start of a line behind a carriage return); what
restores or reproduces bytes (`holon get`, `holon render`) writes them exactly to a pipe or
a file and escaped to a terminal. A reader that leaves early (`holon ... | head`) changes
no exit code, and a name or a record the terminal cannot encode is escaped, never an
internal error.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import blake3
import msgspec
import pytest

from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_CORRUPT, EXIT_OK, EXIT_USAGE
from holon.runtime import Agent
from tests.cli_support import corrupt_ledger, divergent_ledger, invoke, write_jsonl
from tests.ledger_support import child_env
from tests.runtime_support import Tick

# --------------------------------------------------------------------------- a reader that leaves early


def _with_closed_stdout(*args: str | Path, stderr_too: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run ``holon`` in a child whose stdout is a pipe nobody reads (`holon ... | head` once head
    exited); with ``stderr_too`` its stderr as well (`holon ... 2>&1 | head`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "holon.cli", *map(str, args)],
            stdout=write,
            stderr=write if stderr_too else subprocess.PIPE,
            env=child_env(),
            check=False,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.mark.slow
def test_a_reader_leaving_early_does_not_turn_a_failed_check_into_success(tmp_path: Path) -> None:
    # The report is printed before the verdict: a broken pipe while printing it ended the
    # command with exit code 0, so `set -o pipefail; holon verify L | head` passed a corrupt ledger.
    corrupt = corrupt_ledger(tmp_path / "C")
    divergent = divergent_ledger(tmp_path / "D")[0]
    cases = [
        (("verify", corrupt), EXIT_CORRUPT, "is corrupt"),
        (("verify", corrupt, "--json"), EXIT_CORRUPT, "is corrupt"),
        (("verify", divergent), EXIT_CHECK_FAILED, "derived records diverge"),
        (("replay", divergent, "--check"), EXIT_CHECK_FAILED, "derived records diverge"),
        (("replay", divergent, "--check", "--json"), EXIT_CHECK_FAILED, "derived records diverge"),
    ]
    for args, code, says in cases:
        done = _with_closed_stdout(*args)
        stderr = done.stderr.decode()
        assert done.returncode == code, (args, stderr)
        assert "Traceback" not in stderr and says in stderr, (args, stderr)
    # A command that succeeds still ends quietly with 0 when its reader has gone.
    done = _with_closed_stdout("replay", divergent)
    assert (done.returncode, done.stderr) == (0, b"")


@pytest.mark.slow
def test_an_error_line_nobody_reads_keeps_the_exit_code(tmp_path: Path) -> None:
    # `holon verify L 2>&1 | head -1`: writing the error line to a closed stderr raised out of
    # click, and the process ended with 1 ("a check failed") for a corrupt ledger or a usage error.
    corrupt = corrupt_ledger(tmp_path / "C")
    cases = [
        (("verify", corrupt), EXIT_CORRUPT),
        (("verify", corrupt, "--json"), EXIT_CORRUPT),
        (("stats", tmp_path / "missing"), 2),
        (("stats", corrupt, "--no-such-option"), 2),
        (("stats", divergent_ledger(tmp_path / "D")[0]), 0),
    ]
    for args, code in cases:
        assert _with_closed_stdout(*args, stderr_too=True).returncode == code, args


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("render", "--help")])
def test_help_and_version_to_a_reader_that_left_exit_0(args: tuple[str, ...]) -> None:
    # `set -o pipefail; holon --help | head -1` failed: --help and --version print while the
    # group's own options are parsed, where click turns a broken pipe into exit code 1
    # ("a check failed"); a subcommand's --help already exited 0.
    done = _with_closed_stdout(*args)
    assert (done.returncode, done.stderr) == (EXIT_OK, b"")


# --------------------------------------------------------------------------- terminal escapes in records

# What a tool or a user can put in a record: an OSC sequence retitling the terminal, colour
# codes, and a carriage return that makes a terminal overwrite the start of the line.
_HOSTILE = "run \x1b]0;PWNED\x07\x1b[31mred\x1b[0m now\rOVERWRITTEN"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    records = [
        r.Record(body=r.TurnStarted(trigger="user", input=_HOSTILE), ts=1, turn=1),
        r.Record(body=r.Message(role="user", text=_HOSTILE), ts=2, turn=1),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=3, turn=1),
    ]
    assert invoke("append", ledger, write_jsonl(tmp_path / "in.jsonl", records)).exit_code == 0
    return ledger


@pytest.mark.parametrize(
    "args",
    [("replay",), ("search", "run"), ("explain",), ("memory",)],
    ids=lambda a: a[0],
)
def test_control_characters_of_records_are_shown_escaped(args: tuple[str, ...], hostile: Path) -> None:
    # Readable output printed record text raw: on a terminal, `holon replay L` of a ledger
    # whose tool output held an OSC sequence retitled the window (or, in terminals that
    # allow it, wrote the clipboard), and a carriage return hid what came before it.
    result = invoke(args[0], hostile, *args[1:])
    assert result.exit_code == EXIT_OK, result.stderr
    controls = {ch for ch in result.stdout if ord(ch) < 0x20 and ch not in "\t\n"}
    assert controls == set(), (args, sorted(controls))
    if args[0] in ("replay", "search"):
        assert "run \\x1b]0;PWNED\\x07\\x1b[31mred\\x1b[0m now" in result.stdout


def test_get_and_render_text_still_write_the_exact_bytes(hostile: Path) -> None:
    # The escaping is for reading: what restores or reproduces bytes keeps them.
    assert invoke("get", hostile, "ledger:1").stdout_bytes == _HOSTILE.encode()
    doc = msgspec.json.decode(invoke("render", hostile, "--json").stdout)
    text = invoke("render", hostile)
    assert _HOSTILE.encode() in text.stdout_bytes
    assert blake3.blake3(text.stdout_bytes).hexdigest() == doc["prompt_hash"]


def test_an_error_line_shows_control_characters_escaped(hostile: Path) -> None:
    result = invoke("get", hostile, "ledger:\x1b]0;x\x07")
    assert result.exit_code == EXIT_USAGE
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert "malformed ref" in result.stderr


# --------------------------------------------------------------------------- exact bytes on a terminal

# What a fetched web page or a tool can put in a record: an OSC 52 sequence writing the
# terminal's clipboard, a title change, colours and a carriage return hiding the line's start.
_HOSTILE_PAGE = "ok \x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;PWNED\x07\x1b[31mred\x1b[0m\rHIDDEN end"


@pytest.fixture
def hostile_page(tmp_path: Path) -> Path:
    """A ledger whose turn 1 tool output (ledger:3) holds terminal escapes."""
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    records = [
        r.Record(body=r.TurnStarted(trigger="user", input="fetch the page"), ts=1, turn=1),
        r.Record(body=r.Message(role="user", text="fetch the page"), ts=2, turn=1),
        r.Record(body=r.ToolIntent(call_id="c1", tool="fetch", args={"url": "x"}), ts=3, turn=1),
        r.Record(
            body=r.ToolResult(call_id="c1", tool="fetch", status="ok", output=_HOSTILE_PAGE),
            ts=4,
            turn=1,
        ),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=5, turn=1),
    ]
    assert invoke("append", ledger, write_jsonl(tmp_path / "in.jsonl", records)).exit_code == EXIT_OK
    return ledger


def _on_a_terminal(*args: str | Path) -> tuple[int, bytes]:
    """Run ``holon`` with stdout a terminal (a pty); its exit code and what the terminal received."""
    controller, terminal = pty.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "holon", *map(str, args)],
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
            env=child_env(),
        )
    finally:
        os.close(terminal)
    shown = bytearray()
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError as exc:  # EIO: the child closed the terminal
                if exc.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    child.communicate(timeout=120)
    return child.returncode, bytes(shown)


@pytest.mark.parametrize("args", [("get", "ledger:3"), ("render",)], ids=["get", "render"])
def test_exact_bytes_reach_a_terminal_escaped(args: tuple[str, ...], hostile_page: Path) -> None:
    # `holon get L ledger:N` and `holon render L` wrote a record's bytes raw to the terminal:
    # an OSC 52 sequence in a fetched page wrote the user's clipboard, a title change retitled
    # the window, a carriage return hid what came before it. Every other command escaped them.
    code, shown = _on_a_terminal(args[0], hostile_page, *args[1:])
    assert code == EXIT_OK
    assert b"\x1b" not in shown and b"\x07" not in shown and b"\r\x48IDDEN" not in shown
    assert b"ok \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b]0;PWNED\\x07\\x1b[31mred\\x1b[0m\\x0dHIDDEN" in shown


def test_a_pipe_still_gets_the_exact_bytes(hostile_page: Path) -> None:
    # The escaping is for a terminal only: a pipe or a file gets what was recorded.
    got = subprocess.run(
        [sys.executable, "-m", "holon", "get", str(hostile_page), "ledger:3"],
        capture_output=True,
        env=child_env(),
        check=True,
        timeout=120,
    ).stdout
    assert got == _HOSTILE_PAGE.encode()
    doc = json.loads(invoke("render", hostile_page, "--json").stdout)
    rendered = subprocess.run(
        [sys.executable, "-m", "holon", "render", str(hostile_page)],
        capture_output=True,
        env=child_env(),
        check=True,
        timeout=120,
    ).stdout
    assert blake3.blake3(rendered).hexdigest() == doc["prompt_hash"]


# A tool output as a terminal program writes it: ANSI colour codes around the text.
_COLOURED = "\x1b[32m5 passed\x1b[0m in 0.1s"


def _turn_with_output(output: str) -> list[r.Record]:
    return [
        r.Record(body=r.TurnStarted(trigger="user", input="run the tests"), ts=1, turn=1),
        r.Record(body=r.Message(role="user", text="run the tests"), ts=2, turn=1),
        r.Record(body=r.ToolIntent(call_id="c1", tool="bash", args={"command": "pytest"}), ts=3, turn=1),
        r.Record(body=r.ToolResult(call_id="c1", tool="bash", status="ok", output=output), ts=4, turn=1),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=5, turn=1),
    ]


@pytest.fixture
def coloured(tmp_path: Path) -> Path:
    """A ledger whose one tool output carries ANSI escape codes."""
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == 0
    source = write_jsonl(tmp_path / "in.jsonl", _turn_with_output(_COLOURED))
    assert invoke("append", ledger, source).exit_code == 0
    return ledger


def test_render_text_keeps_ansi_escapes_so_the_bytes_hash_to_the_prompt(coloured: Path) -> None:
    # click strips ANSI codes from text it writes to a pipe: the prompt bytes changed and
    # `holon render L | b3sum` no longer gave the prompt_hash.
    doc = invoke("render", coloured, "--json")
    assert doc.exit_code == 0, doc.stderr
    prompt_hash = json.loads(doc.stdout)["prompt_hash"]
    text = invoke("render", coloured)
    assert text.exit_code == 0, text.stderr
    assert _COLOURED.encode() in text.stdout_bytes
    assert blake3.blake3(text.stdout_bytes).hexdigest() == prompt_hash


# --------------------------------------------------------------------------- what cannot be encoded


def test_json_output_and_json_errors_take_paths_that_are_not_utf8(tmp_path: Path) -> None:
    # A str for such a name holds lone surrogates, which msgspec refuses: `init --json` created
    # the ledger and then failed as an internal error (70), a JSON error line was a traceback.
    name = os.fsdecode(b"run-\xff")
    ledger = tmp_path / name
    created = invoke("init", ledger, "--agent-id", "a", "--json")
    assert created.exit_code == 0, created.stderr
    assert json.loads(created.stdout)["path"] == str(tmp_path / "run-\\xff")
    exported = invoke("export", ledger, tmp_path / f"{name}.jsonl", "--json")
    assert exported.exit_code == 0, exported.stderr
    assert json.loads(exported.stdout)["path"].endswith("run-\\xff.jsonl")
    missing = invoke("stats", tmp_path / f"{name}-missing", "--json")
    assert missing.exit_code == 2 and "Traceback" not in missing.stderr
    error = json.loads(missing.stderr)["error"]
    assert error["type"] == "NotALedger" and "run-\\xff-missing does not exist" in error["message"]
    text = invoke("stats", tmp_path / f"{name}-missing")
    assert f"holon: error: {tmp_path}/run-\\xff-missing does not exist" in text.stderr
    corrupt = corrupt_ledger(tmp_path / f"{name}-corrupt")
    verified = invoke("verify", corrupt, "--json")
    assert verified.exit_code == EXIT_CORRUPT, verified.stderr
    (problem,) = json.loads(verified.stdout)["storage"]["problems"]
    assert "run-\\xff-corrupt/segments/" in problem["file"]


def test_a_terminal_that_cannot_encode_a_record_gets_escapes_not_an_internal_error(tmp_path: Path) -> None:
    # Under a latin-1 locale, printing an arrow from a record ended `holon replay` and
    # `holon search` with exit 70 ("a bug in holon").
    path = tmp_path / "agent"
    with Agent.open(path, agent_id="a", clock=Tick()) as agent, agent.turn(input="move x → y") as turn:
        turn.record_message("moved x → y")
    for args in (("replay", path), ("search", path, "moved")):
        done = subprocess.run(
            [sys.executable, "-m", "holon.cli", *map(str, args)],
            capture_output=True,
            env={**child_env(), "PYTHONIOENCODING": "latin-1"},
            check=False,
            timeout=120,
        )
        assert done.returncode == 0, (args, done.stderr)
        assert b"x \\u2192 y" in done.stdout
