"""Bugs found in a second review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import blake3
import msgspec
import pytest

from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE
from tests.cli_support import build_ledger, divergent_ledger, invoke, write_jsonl
from tests.ledger_support import child_env

# --------------------------------------------------------------------------- a reader that leaves early


def _with_closed_stdout(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``holon`` with stdout a pipe nobody reads (`holon ... | head -1` once head exited)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "holon", *args],
            stdout=write,
            stderr=subprocess.PIPE,
            env=child_env(),
            check=False,
            timeout=120,
        )
    finally:
        os.close(write)


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("render", "--help")])
def test_help_and_version_to_a_reader_that_left_exit_0(args: tuple[str, ...]) -> None:
    # `set -o pipefail; holon --help | head -1` failed: --help and --version print while the
    # group's own options are parsed, where click turns a broken pipe into exit code 1
    # ("a check failed"); a subcommand's --help already exited 0.
    done = _with_closed_stdout(*args)
    assert (done.returncode, done.stderr) == (EXIT_OK, b"")


# --------------------------------------------------------------------------- options that do not apply


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


# --------------------------------------------------------------------------- verify's divergence


def test_verify_says_what_a_divergence_means_as_replay_check_does(tmp_path: Path) -> None:
    # verify's error line read "derived records diverge at seq N (mismatch) (or derived under a
    # non-default ProjectionConfig ...)": an "or" to nothing, without the two likely causes
    # that `replay --check` names for the same ledger.
    ledger, seq = divergent_ledger(tmp_path / "D")
    verified = invoke("verify", ledger)
    replayed = invoke("replay", ledger, "--check")
    assert verified.exit_code == replayed.exit_code == EXIT_CHECK_FAILED
    line = verified.stderr.strip().splitlines()[-1]
    assert f"derived records diverge at seq {seq} (mismatch); " in line
    assert "the ledger was written by different projection code, or edited" in line
    assert line == replayed.stderr.strip().splitlines()[-1]


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
