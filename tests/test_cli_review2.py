"""Bugs found in a second review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from holon import records as r
from holon.cli import EXIT_CHECK_FAILED, EXIT_OK, EXIT_USAGE
from holon.ledger import Ledger
from tests.cli_support import build_ledger, invoke, live_records
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


# --------------------------------------------------------------------------- verify's divergence


def test_verify_says_what_a_divergence_means_as_replay_check_does(tmp_path: Path) -> None:
    # verify's error line read "derived records diverge at seq N (mismatch) (or derived under a
    # non-default ProjectionConfig ...)": an "or" to nothing, without the two likely causes
    # that `replay --check` names for the same ledger.
    records = list(live_records("boundary_task_rejoined"))
    index = next(i for i, rec in enumerate(records) if isinstance(rec.body, r.ContextEpisodeRecord))
    body = records[index].body
    assert isinstance(body, r.ContextEpisodeRecord)
    records[index] = msgspec.structs.replace(
        records[index], body=msgspec.structs.replace(body, objective="rewritten")
    )
    ledger = tmp_path / "D"
    with Ledger.create(ledger, agent_id="x", fsync="never") as opened:
        opened.append_many(records)
    verified = invoke("verify", ledger)
    replayed = invoke("replay", ledger, "--check")
    assert verified.exit_code == replayed.exit_code == EXIT_CHECK_FAILED
    line = verified.stderr.strip().splitlines()[-1]
    assert f"derived records diverge at seq {records[index].seq} (mismatch); " in line
    assert "the ledger was written by different projection code, or edited" in line
    assert line == replayed.stderr.strip().splitlines()[-1]
