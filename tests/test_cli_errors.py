"""Errors: one line on stderr, no traceback (unless --debug), and the documented exit codes."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import msgspec
import pytest
from click.testing import CliRunner, Result

import holon.replay
from holon import records as r
from holon.cli import (
    EXIT_CHECK_FAILED,
    EXIT_CORRUPT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SYSTEM,
    EXIT_USAGE,
    HolonGroup,
)
from holon.cli import main as holon_cli
from holon.errors import LedgerCorrupt
from holon.ledger import Ledger
from tests.cli_support import (
    build_ledger,
    corrupt_ledger,
    divergent_ledger,
    invoke,
    live_records,
    tree_bytes,
    write_jsonl,
)
from tests.ledger_support import AGENT, message

IMPORTERS = Path(__file__).resolve().parent.parent / "fixtures" / "importers"

READ_COMMANDS = [
    ("replay",),
    ("render",),
    ("explain",),
    ("memory",),
    ("episodes",),
    ("get", "ledger:0"),
    ("search", "payments"),
    ("verify",),
    ("stats",),
]


def _one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one error line, got:\n{stderr}"
    assert lines[0].startswith("holon: "), lines[0]
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_ledger(tmp_path_factory.mktemp("errors") / "L", "boundary_turn_cap")


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_missing_path_is_a_usage_error(command: tuple[str, ...], tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = invoke(command[0], missing, *command[1:])
    assert result.exit_code == EXIT_USAGE
    line = _one_line_error(result.stderr)
    assert str(missing) in line and "does not exist" in line
    assert result.stdout == ""


@pytest.mark.parametrize("command", READ_COMMANDS, ids=lambda c: c[0])
def test_a_directory_that_is_not_a_ledger_is_a_usage_error(command: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    result = invoke(command[0], tmp_path, *command[1:])
    assert result.exit_code == EXIT_USAGE
    line = _one_line_error(result.stderr)
    assert "not a holon ledger" in line


@pytest.mark.parametrize("command", [c for c in READ_COMMANDS if c[0] != "verify"], ids=lambda c: c[0])
def test_a_corrupt_segment_exits_3_naming_the_file(command: tuple[str, ...], tmp_path: Path) -> None:
    target = corrupt_ledger(tmp_path / "L")
    result = invoke(command[0], target, *command[1:])
    assert result.exit_code == EXIT_CORRUPT, result.output
    line = _one_line_error(result.stderr)
    assert "ledger corrupt" in line and ".seg" in line and "at byte" in line


def test_verify_lists_corruption_and_exits_3(tmp_path: Path) -> None:
    target = corrupt_ledger(tmp_path / "L")
    result = invoke("verify", target)
    assert result.exit_code == EXIT_CORRUPT
    assert "problem(s)" in result.stdout and ".seg at byte" in result.stdout
    assert "not checked" in result.stdout
    assert _one_line_error(result.stderr).startswith("holon: error: ledger")
    doc = json.loads(invoke("verify", target, "--json").stdout)
    # An active (plain) segment: the offset is a file offset, and --json says so.
    assert [(p["offset"] > 0, p["decompressed"]) for p in doc["storage"]["problems"]] == [(True, False)]


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    for args in (["--debug", "replay", missing], ["replay", missing, "--debug"]):
        result = invoke(*args)
        assert result.exit_code == EXIT_USAGE
        assert "Traceback (most recent call last)" in result.stderr
        assert "NotALedger" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("holon: error:")


def test_at_turn_beyond_the_end_names_the_turns_there_are(ledger: Path) -> None:
    for command in ("render", "explain", "memory"):
        result = invoke(command, ledger, "--at-turn", "99")
        assert result.exit_code == EXIT_USAGE, command
        line = _one_line_error(result.stderr)
        assert "turn 99 is not in this ledger" in line and "turns 1..14" in line
    result = invoke("replay", ledger, "--until-turn", "15")
    assert result.exit_code == EXIT_USAGE
    assert "turn 15 is not in this ledger" in _one_line_error(result.stderr)


def test_bad_refs(ledger: Path) -> None:
    result = invoke("get", ledger, "ledger:nine")
    assert result.exit_code == EXIT_USAGE
    assert "malformed ref" in _one_line_error(result.stderr)
    result = invoke("get", ledger, "ledger:100000")
    assert result.exit_code == EXIT_USAGE
    assert "past the end" in _one_line_error(result.stderr)
    result = invoke("get", ledger, "episode:77")
    assert result.exit_code == EXIT_USAGE
    assert "episode:77 is not in ledger" in _one_line_error(result.stderr)
    result = invoke("get", ledger, "blob:" + "0" * 64)
    assert result.exit_code == EXIT_USAGE
    assert _one_line_error(result.stderr)


def test_a_record_whose_blob_is_missing_is_corruption_not_a_bad_ref(tmp_path: Path) -> None:
    with Ledger.create(tmp_path / "L", agent_id="a") as led:
        seq = led.append(
            r.Record(body=r.ToolResult(call_id="c", tool="t", status="ok", output="x" * 9000), ts=1)
        )
        stored = led.get(seq)
    assert isinstance(stored.body, r.ToolResult) and stored.body.blob is not None
    for path in (tmp_path / "L" / "blobs").rglob(f"{stored.body.blob.hash}*"):
        path.unlink()
    result = invoke("get", tmp_path / "L", f"ledger:{stored.seq}")
    assert result.exit_code == EXIT_CORRUPT
    line = _one_line_error(result.stderr)
    assert f"ledger:{stored.seq} keeps its output in blob {stored.body.blob.hash}, which is missing" in line


def test_a_missing_segment_directory_is_corruption(ledger: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "L"
    shutil.copytree(ledger, damaged)
    shutil.rmtree(damaged / "segments")
    for command in ("verify", "replay", "render"):
        result = invoke(command, damaged)
        assert result.exit_code == EXIT_CORRUPT, command
        line = _one_line_error(result.stderr)
        assert "the segment directory is missing" in line and str(damaged / "segments") in line
        # verify does not send the user back to verify.
        assert ("run `holon verify`" in line) == (command != "verify")


def test_token_options_far_beyond_any_window_are_usage_errors(ledger: Path) -> None:
    for option in ("--budget", "--output-reserve"):
        result = invoke("render", ledger, option, "99999999999999999999")
        assert result.exit_code == EXIT_USAGE
        assert "is not in the range" in _one_line_error(result.stderr)


def test_a_budget_too_small_is_a_usage_error(ledger: Path) -> None:
    result = invoke("render", ledger, "--budget", "60", "--output-reserve", "0")
    assert result.exit_code == EXIT_USAGE
    line = _one_line_error(result.stderr)
    assert "tokens but only" in line and "--budget" in line and "--output-reserve" in line


def test_a_window_the_output_reserve_fills_says_so_with_its_numbers(ledger: Path) -> None:
    result = invoke("render", ledger, "--budget", "8000", "--output-reserve", "8000")
    assert result.exit_code == EXIT_USAGE
    line = _one_line_error(result.stderr)
    assert "output reserve (8,000 tokens) leaves no room for a prompt" in line
    assert "in a context window of 8,000 tokens" in line
    assert "--output-reserve" in line


def test_click_usage_errors_exit_2(ledger: Path) -> None:
    assert invoke("render", ledger, "--format", "yaml").exit_code == EXIT_USAGE
    assert invoke("frobnicate").exit_code == EXIT_USAGE
    assert invoke("get", ledger).exit_code == EXIT_USAGE


def test_a_locked_ledger_exits_3_for_writers_but_reads_fine(ledger: Path, tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    records.write_text("")
    with Ledger.open(ledger):
        result = invoke("append", ledger, records)
        assert result.exit_code == EXIT_CORRUPT
        line = _one_line_error(result.stderr)
        assert "locked for writing" in line
        # The command's own advice, not the library's "open it read-only" (append cannot).
        assert line.endswith(
            "holon append writes to it: wait for that process to finish or stop it first (read "
            "commands such as holon memory, holon render and holon verify work beside it)"
        ), line
        assert "read-only" not in line
        assert invoke("replay", ledger).exit_code == 0
        assert invoke("verify", ledger).exit_code == 0


def test_commands_registered_elsewhere_get_the_same_handling() -> None:
    group = HolonGroup(name="holon")

    @click.command()
    def corrupt() -> None:
        """A command from another module that meets a damaged ledger."""
        raise LedgerCorrupt("bad checksum", file="segments/x.seg", offset=12)

    @click.command()
    def bug() -> None:
        """A command with a bug."""
        raise ZeroDivisionError("division by zero")

    group.add_command(corrupt)
    group.add_command(bug)
    result = CliRunner().invoke(group, ["corrupt"])
    assert result.exit_code == EXIT_CORRUPT
    assert "segments/x.seg at byte 12" in _one_line_error(result.stderr)
    result = CliRunner().invoke(group, ["bug"])
    assert result.exit_code == EXIT_INTERNAL
    assert "internal error ZeroDivisionError" in _one_line_error(result.stderr)


def test_the_audit_command_is_registered() -> None:
    result = CliRunner().invoke(holon_cli, ["audit", "--help"])
    assert result.exit_code == 0
    assert "Usage: holon audit" in result.stdout


def test_exit_code_constants_are_the_documented_ones() -> None:
    assert (EXIT_CHECK_FAILED, EXIT_USAGE, EXIT_CORRUPT) == (1, 2, 3)


# --------------------------------------------------------------------------- writers: bad targets


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A valid input file for each writing command: append, import (jsonl), import (openai-chat)."""
    root = tmp_path_factory.mktemp("inputs")
    evidence = [
        r.Record(body=r.TurnStarted(trigger="user", input="hi"), ts=1, turn=1),
        r.Record(body=r.Message(role="user", text="hi"), ts=2, turn=1),
        r.Record(body=r.TurnEnded(outcome="completed"), ts=3, turn=1),
    ]
    return {
        "append": write_jsonl(root / "records.jsonl", evidence),
        "jsonl": write_jsonl(root / "export.jsonl", live_records("boundary_turn_cap")[:10]),
        "openai-chat": IMPORTERS / "openai-chat" / "conversation.json",
    }


WRITERS = ["append", "jsonl", "openai-chat"]


def _write(writer: str, target: Path, inputs: dict[str, Path]) -> Result:
    if writer == "append":
        return invoke("append", target, inputs["append"])
    return invoke("import", target, inputs[writer], "--from", writer)


@pytest.mark.parametrize("writer", ["append"])
def test_writing_into_a_missing_path_is_a_usage_error(
    writer: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    missing = tmp_path / "nope"
    result = _write(writer, missing, inputs)
    assert result.exit_code == EXIT_USAGE, result.output
    line = _one_line_error(result.stderr)
    assert line.startswith("holon: error:") and str(missing) in line and "does not exist" in line
    assert "holon init PATH --agent-id ID" in line  # what to do, in the user's own terms
    assert result.stdout == ""
    assert not missing.exists()  # nothing was created


@pytest.mark.parametrize("writer", [w for w in WRITERS if w != "append"])
def test_importing_into_a_missing_path_creates_the_ledger(
    writer: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    # holon import creates it (docs/importers.md, "Into a new ledger"); tests/test_cli_import.py
    # has the agent ids and the failures that leave nothing.
    missing = tmp_path / "nope"
    result = _write(writer, missing, inputs)
    assert result.exit_code == 0, result.output
    assert f"created ledger {missing} for agent nope" in result.stdout
    assert invoke("verify", missing).exit_code == 0


@pytest.mark.parametrize("writer", WRITERS)
def test_writing_into_a_directory_that_is_not_a_ledger_is_a_usage_error(
    writer: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    before = tree_bytes(tmp_path)
    result = _write(writer, tmp_path, inputs)
    assert result.exit_code == EXIT_USAGE, result.output
    line = _one_line_error(result.stderr)
    assert "not a holon ledger" in line and "holon init PATH --agent-id ID" in line
    assert tree_bytes(tmp_path) == before


@pytest.mark.parametrize("writer", WRITERS)
def test_writing_into_a_corrupt_ledger_exits_3_and_changes_nothing(
    writer: str, inputs: dict[str, Path], tmp_path: Path
) -> None:
    target = corrupt_ledger(tmp_path / "L")
    before = tree_bytes(target)
    result = _write(writer, target, inputs)
    assert result.exit_code == EXIT_CORRUPT, result.output
    line = _one_line_error(result.stderr)
    assert "ledger corrupt" in line and ".seg" in line and "at byte" in line
    assert tree_bytes(target) == before


# --------------------------------------------------------------------------- holon audit


def test_audit_on_a_missing_path_is_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = invoke("audit", missing)
    assert result.exit_code == EXIT_USAGE
    line = _one_line_error(result.stderr)
    assert line.startswith("holon: error:") and str(missing) in line and "does not exist" in line
    assert result.stdout == ""


def test_audit_takes_debug_after_the_command_name(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    for args in (["--debug", "audit", missing], ["audit", missing, "--debug"]):
        result = invoke(*args)
        assert result.exit_code == EXIT_USAGE, args
        assert "Traceback (most recent call last)" in result.stderr
        assert "NotALedger" in result.stderr
        assert result.stderr.strip().splitlines()[-1].startswith("holon: error:")


def test_every_command_takes_debug_after_its_name() -> None:
    ctx = click.Context(holon_cli, info_name="holon")
    for name in holon_cli.list_commands(ctx):
        command = holon_cli.get_command(ctx, name)
        assert command is not None
        assert any("--debug" in p.opts for p in command.params if isinstance(p, click.Option)), name


# --------------------------------------------------------------------------- click usage errors


def _usage_line(result: Result, command: str) -> str:
    assert result.exit_code == EXIT_USAGE, result.output
    line = _one_line_error(result.stderr)
    assert line.startswith("holon: usage error: "), line
    assert line.endswith(f"(see {command} --help)"), line
    assert "Usage:" not in result.stderr and "Try " not in result.stderr
    assert result.stdout == ""
    return line


@pytest.mark.parametrize("name", sorted(holon_cli.list_commands(click.Context(holon_cli))))
def test_a_usage_error_is_one_line_for_every_command(name: str, ledger: Path) -> None:
    line = _usage_line(invoke(name, ledger, "--no-such-option"), f"holon {name}")
    assert "--no-such-option" in line


def test_usage_errors_of_the_group_and_of_arguments_are_one_line(ledger: Path) -> None:
    assert "No such command 'frobnicate'" in _usage_line(invoke("frobnicate"), "holon")
    assert "--bogus" in _usage_line(invoke("--bogus", "replay", ledger), "holon")
    assert "Missing argument 'REF'" in _usage_line(invoke("get", ledger), "holon get")
    line = _usage_line(invoke("render", ledger, "--format", "yaml"), "holon render")
    assert "Invalid value for '--format'" in line and "'yaml'" in line
    line = _usage_line(invoke("audit", ledger, "--param", "window=1"), "holon audit")
    assert "--param applies to --report only" in line


def test_help_is_unchanged_by_the_one_line_errors() -> None:
    for args in (["--help"], ["render", "--help"], ["audit", "-h"]):
        result = invoke(*args)
        assert result.exit_code == 0
        assert result.stdout.startswith("Usage: holon") and result.stderr == ""


# --------------------------------------------------------------------------- errors under --json


def _json_error(result: Result) -> dict[str, object]:
    """The one JSON error line a --json command writes to stderr (stdout stays empty)."""
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    error = json.loads(line)["error"]
    assert set(error) == {"exit_code", "kind", "type", "message"}
    assert error["exit_code"] == result.exit_code
    return dict(error)


def test_errors_under_json_are_json_objects(tmp_path: Path, ledger: Path) -> None:
    missing = tmp_path / "nope"
    error = _json_error(invoke("stats", missing, "--json"))
    assert (error["kind"], error["type"], error["exit_code"]) == ("error", "NotALedger", EXIT_USAGE)
    assert f"{missing} does not exist" in str(error["message"])
    # Without --json, the same error is the usual text line.
    line = _one_line_error(invoke("stats", missing).stderr)
    assert line.startswith(f"holon: error: {missing} does not exist")
    error = _json_error(invoke("stats", corrupt_ledger(tmp_path / "C"), "--json"))
    assert (error["type"], error["exit_code"]) == ("LedgerCorrupt", EXIT_CORRUPT)
    # A command registered from another module (lazily) answers in JSON too.
    error = _json_error(invoke("audit", ledger, "--sql", "SELECT nope", "--json"))
    assert error["type"] == "AuditError" and str(error["message"]).startswith("SQL error")
    error = _json_error(invoke("audit", ledger, "--json", "--csv"))
    assert error["kind"] == "usage error" and "either --json or --csv" in str(error["message"])


@pytest.mark.parametrize(
    "args", [("--budget", "abc", "--json"), ("--json", "--budget", "abc")], ids=["json-last", "json-first"]
)
def test_a_bad_option_value_is_a_json_usage_error_wherever_json_stands(
    ledger: Path, args: tuple[str, ...]
) -> None:
    error = _json_error(invoke("render", ledger, *args))
    assert (error["kind"], error["type"], error["exit_code"]) == ("usage error", "UsageError", EXIT_USAGE)
    message = str(error["message"])
    assert "Invalid value for '--budget'" in message and "see holon render --help" in message


def test_python_dash_m_holon_is_the_holon_command(tmp_path: Path) -> None:
    # Where the console script is not on PATH (a venv not activated, a zipapp), `python -m
    # holon` must behave as `holon`, with the same name in its messages and exit codes.
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "holon", "verify", str(tmp_path / "missing")],
        capture_output=True, text=True, env=env, check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("holon: error:")
    usage = subprocess.run(
        [sys.executable, "-m", "holon", "--help"], capture_output=True, text=True, env=env, check=False
    )
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: holon ")


# --------------------------------------------------------------------------- options that do not apply


@pytest.mark.parametrize(
    "args",
    [("render", "--call", "2"), ("explain", "--call", "2"), ("episodes", "--limit", "3")],
    ids=["render-call", "explain-call", "episodes-limit"],
)
def test_an_option_that_does_not_apply_is_a_usage_error_not_ignored(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    # --call without --at-turn rendered the next prompt as if it were absent; --limit without
    # --search listed every episode: the user got something other than what was asked, with exit 0.
    ledger = build_ledger(tmp_path / "L", "session_multi_work")
    result = invoke(args[0], ledger, *args[1:])
    assert result.exit_code == 2, result.stdout[:200]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"holon: usage error: {args[1]} applies to ")
    assert line.endswith(f"(see holon {args[0]} --help)")
    # With the option it belongs to, it works.
    paired = (
        ("--call", "1", "--at-turn", "217") if args[1] == "--call" else ("--limit", "3", "--search", "W3")
    )
    assert invoke(args[0], ledger, *paired).exit_code == 0


@pytest.mark.parametrize(
    "extra",
    [(), ("--format", "text"), ("--format", "json"), ("--json",)],
    ids=["default", "text", "json", "--json"],
)
def test_model_without_a_provider_format_is_a_usage_error(extra: tuple[str, ...], tmp_path: Path) -> None:
    # `holon render L --model gpt-5.5` printed the text prompt and exited 0: the model named
    # was silently dropped, as --call without --at-turn was before it.
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    result = invoke("render", ledger, "--model", "gpt-x", *extra)
    assert result.exit_code == EXIT_USAGE, result.stdout[:200]
    assert result.stdout == ""
    line = result.stderr.strip().splitlines()[-1]
    assert "--model applies to the provider formats only" in line
    # With a provider format it is the request's model.
    request = invoke("render", ledger, "--format", "openai", "--model", "gpt-x")
    assert request.exit_code == EXIT_OK, request.stderr
    assert msgspec.json.decode(request.stdout)["model"] == "gpt-x"


# --------------------------------------------------------------------------- JSON error types


def test_json_errors_name_the_public_error_class_never_a_private_one(tmp_path: Path) -> None:
    # `type` is documented to name the error (LedgerCorrupt, BudgetExceeded, ...): verify's
    # corruption said "_Corrupt" and a budget too small said "_Failure".
    corrupt = corrupt_ledger(tmp_path / "C")
    for args, expected in [
        (("verify", corrupt, "--json"), "LedgerCorrupt"),
        (("stats", corrupt, "--json"), "LedgerCorrupt"),
        (("render", divergent_ledger(tmp_path / "D")[0], "--budget", "1", "--json"), "BudgetExceeded"),
    ]:
        result = invoke(*args)
        error = json.loads(result.stderr.strip().splitlines()[-1])["error"]
        assert error["type"] == expected, (args, error)


# --------------------------------------------------------------------------- Ctrl-C


def test_an_interrupt_exits_130_not_the_code_of_a_failed_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ctrl-C became click's Abort: "Aborted!" and exit code 1, which holon documents as
    # "a check failed" (a script would report a divergent ledger).
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")

    def interrupted(*_args: object, **_kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(holon.replay, "ledger_stats", interrupted)  # what `holon stats` calls
    result = invoke("stats", ledger)
    assert result.exit_code == EXIT_INTERRUPTED == 130
    assert result.stderr == "holon: error: interrupted\n"
    error = json.loads(invoke("stats", ledger, "--json").stderr)["error"]
    assert (error["exit_code"], error["type"]) == (130, "KeyboardInterrupt")


# --------------------------------------------------------------------------- budgets too small


@pytest.mark.parametrize("window", ["1", "5"])
def test_a_window_too_small_for_any_prompt_does_not_blame_a_zero_output_reserve(
    window: str, tmp_path: Path
) -> None:
    # "the output reserve (0 tokens) leaves no room ...; lower the output reserve": it was 0.
    ledger = build_ledger(tmp_path / "L", "boundary_turn_cap")
    result = invoke("render", ledger, "--budget", window, "--output-reserve", "0")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"a context window of {window} token" in line and "leaves no room for a prompt" in line
    assert "raise the context window" in line and "lower the output reserve" not in line


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


# --------------------------------------------------------------------------- the system refuses a write


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on the device: free some space"),
        (errno.EDQUOT, "disk quota"),
        (errno.EROFS, "read-only file system"),
        (errno.EACCES, "permission denied"),
        (errno.EPERM, "permission denied"),
    ],
)
def test_a_write_the_system_refuses_says_why_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, words: str
) -> None:
    ledger = tmp_path / "L"
    real_open = os.open

    def refusing_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if str(path).endswith(".tmp"):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", refusing_open)
    result = invoke("init", ledger, "--agent-id", "a")
    monkeypatch.undo()
    assert result.exit_code == (EXIT_USAGE if code in (errno.EACCES, errno.EPERM) else EXIT_SYSTEM)
    (line,) = result.stderr.strip().splitlines()
    assert words in line
    # the file meant, not the temporary name it is written under
    assert f"({ledger / 'segments' / '00000000000000000000.seg'})" in line
    assert ".tmp" not in line


def test_a_write_refused_without_a_file_name_still_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # os.write reports a full disk without naming the file.
    with Ledger.create(tmp_path / "L", agent_id=AGENT) as ledger:
        ledger.append(message(0))
    (tmp_path / "r.jsonl").write_bytes(b"")
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if len(data) > 0 and os.readlink(f"/proc/self/fd/{fd}").endswith(".jsonl.tmp"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", full)
    result = invoke("export", tmp_path / "L", tmp_path / "x.jsonl", "--json")
    monkeypatch.undo()
    assert result.exit_code == EXIT_SYSTEM
    error = json.loads(result.stderr)["error"]
    assert error["type"] == "OSError"
    assert error["message"].startswith("no space left on the device: free some space")
    assert not (tmp_path / "x.jsonl.tmp").exists()
