"""Bugs found in a second review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from holon.cli import EXIT_OK, EXIT_USAGE
from tests.cli_support import build_ledger, invoke
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
    # `holon render L --model gpt-4.1` printed the text prompt and exited 0: the model named
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
