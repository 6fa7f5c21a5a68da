"""Bugs found in a third review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import errno
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import blake3
import pytest

from holon import records as r
from holon.cli import EXIT_OK, EXIT_USAGE
from holon.ledger import Ledger
from tests.cli_support import invoke, write_jsonl
from tests.ledger_support import child_env
from tests.test_cli_review import _holon_with_stdin, _turn

IMPORTERS = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

# --------------------------------------------------------------------------- usage errors


def test_a_missing_choice_option_is_a_one_line_usage_error(tmp_path: Path) -> None:
    # `holon import L session.jsonl` without --from printed click's list of formats a line
    # each ("Choose from:\n\tjsonl,\n\tclaude-code,..."): six lines where one is promised,
    # and a JSON error whose message a script shows cut into lines.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    text = invoke("import", ledger, tmp_path / "s.jsonl")
    assert text.exit_code == EXIT_USAGE
    (line,) = text.stderr.strip().splitlines()
    assert line == (
        "holon: usage error: Missing option '--from'. Choose from: jsonl, claude-code, openai-chat, "
        "swe-agent, openhands (see holon import --help)"
    )
    as_json = invoke("import", ledger, tmp_path / "s.jsonl", "--json")
    (json_line,) = as_json.stderr.strip().splitlines()
    message = json.loads(json_line)["error"]["message"]
    assert "\n" not in message and "\t" not in message
    assert message == line.removeprefix("holon: usage error: ")


# --------------------------------------------------------------------------- exact bytes on a terminal

# What a fetched web page or a tool can put in a record: an OSC 52 sequence writing the
# terminal's clipboard, a title change, colours and a carriage return hiding the line's start.
_HOSTILE = "ok \x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;PWNED\x07\x1b[31mred\x1b[0m\rHIDDEN end"


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A ledger whose turn 1 tool output (ledger:3) holds terminal escapes."""
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    records = [
        r.Record(body=r.TurnStarted(trigger="user", input="fetch the page"), ts=1, turn=1),
        r.Record(body=r.Message(role="user", text="fetch the page"), ts=2, turn=1),
        r.Record(body=r.ToolIntent(call_id="c1", tool="fetch", args={"url": "x"}), ts=3, turn=1),
        r.Record(
            body=r.ToolResult(call_id="c1", tool="fetch", status="ok", output=_HOSTILE),
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
def test_exact_bytes_reach_a_terminal_escaped(args: tuple[str, ...], hostile: Path) -> None:
    # `holon get L ledger:N` and `holon render L` wrote a record's bytes raw to the terminal:
    # an OSC 52 sequence in a fetched page wrote the user's clipboard, a title change retitled
    # the window, a carriage return hid what came before it. Every other command escaped them.
    code, shown = _on_a_terminal(args[0], hostile, *args[1:])
    assert code == EXIT_OK
    assert b"\x1b" not in shown and b"\x07" not in shown and b"\r\x48IDDEN" not in shown
    assert b"ok \\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b]0;PWNED\\x07\\x1b[31mred\\x1b[0m\\x0dHIDDEN" in shown


def test_a_pipe_still_gets_the_exact_bytes(hostile: Path) -> None:
    # The escaping is for a terminal only: a pipe or a file gets what was recorded.
    got = subprocess.run(
        [sys.executable, "-m", "holon", "get", str(hostile), "ledger:3"],
        capture_output=True,
        env=child_env(),
        check=True,
        timeout=120,
    ).stdout
    assert got == _HOSTILE.encode()
    doc = json.loads(invoke("render", hostile, "--json").stdout)
    rendered = subprocess.run(
        [sys.executable, "-m", "holon", "render", str(hostile)],
        capture_output=True,
        env=child_env(),
        check=True,
        timeout=120,
    ).stdout
    assert blake3.blake3(rendered).hexdigest() == doc["prompt_hash"]


# --------------------------------------------------------------------------- `-` for standard input


def test_dash_reads_standard_input_for_append_and_import(tmp_path: Path) -> None:
    # `zcat run.jsonl.gz | holon append L -` said "cannot read -: No such file or directory":
    # the input file was only ever a path (and a file named "-" in the working directory
    # was read instead, when there was one).
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    records = write_jsonl(tmp_path / "in.jsonl", _turn(1, 10)).read_bytes()
    done = _holon_with_stdin(records, "append", ledger, "-")
    assert done.returncode == EXIT_OK, done.stderr
    chat = IMPORTERS / "openai-chat" / "tau-bench-runs.json"
    done = _holon_with_stdin(chat.read_bytes(), "import", ledger, "-", "--from", "openai-chat")
    assert done.returncode == EXIT_OK, done.stderr
    with Ledger.open(ledger, readonly=True) as opened:
        inputs = [rec.body.input for rec in opened.read() if isinstance(rec.body, r.TurnStarted)]
    assert inputs == ["go 1", "Change my seat.", "Book a flight."]
    # A bad line is named in standard input, and nothing is appended.
    done = _holon_with_stdin(b"not json\n", "append", ledger, "-")
    assert done.returncode == EXIT_USAGE
    assert done.stderr.decode().startswith("holon: error: invalid record at line 1 of /dev/stdin")


def test_dash_on_a_terminal_is_refused_not_a_wait(tmp_path: Path) -> None:
    # Nothing piped in: rather than wait for typing, say what `-` means.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "holon", "append", str(ledger), "-"],
            stdin=terminal,
            capture_output=True,
            env=child_env(),
            check=False,
            timeout=120,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.decode().strip() == (
        "holon: error: - reads standard input, which is a terminal here: pipe or redirect the file in "
        "(`holon append PATH - < FILE`), or pass its path"
    )


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_export_to_dash_is_refused_not_a_file_named_dash(fmt: str, tmp_path: Path) -> None:
    # `holon export L -` wrote a file named "-" (and "-.blobs/") in the working directory
    # and said "wrote N records to -", which reads as standard output.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    done = subprocess.run(
        [sys.executable, "-m", "holon", "export", str(ledger), "-", "--format", fmt],
        capture_output=True,
        env=child_env(),
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert done.returncode == EXIT_USAGE
    assert "not to standard output: pass a path" in done.stderr.decode()
    assert done.stdout == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["L"]


# --------------------------------------------------------------------------- usage errors as JSON


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("stats", "{L}", "--json", "--budget", "3"), "No such option '--budget'"),
        (("render", "{L}", "--json", "--at-turn"), "Option '--at-turn' requires an argument"),
        (("import", "{L}", "x.jsonl", "--json", "--from"), "Option '--from' requires an argument"),
        (("--bogus", "stats", "{L}", "--json"), "No such option '--bogus'"),
        (("frobnicate", "--json"), "No such command 'frobnicate'"),
    ],
    ids=["unknown-option", "missing-value", "missing-choice-value", "group-option", "unknown-command"],
)
def test_a_script_passing_json_gets_every_usage_error_as_json(
    args: tuple[str, ...], says: str, tmp_path: Path
) -> None:
    # click stops parsing at an unknown option or at an option missing its value, before it
    # reads --json: `holon render L --json --at-turn` answered a script that asked for JSON
    # with a text line, which `json.loads` fails on.
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a").exit_code == EXIT_OK
    result = invoke(*(str(ledger) if a == "{L}" else a for a in args))
    assert result.exit_code == EXIT_USAGE and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    error = json.loads(line)["error"]
    assert (error["kind"], error["type"], error["exit_code"]) == ("usage error", "UsageError", EXIT_USAGE)
    assert says in error["message"]
    # Without --json, the same error is text.
    plain = [a for a in args if a != "--json"]
    text = invoke(*(str(ledger) if a == "{L}" else a for a in plain))
    assert text.stderr.startswith("holon: usage error: ") and says in text.stderr
