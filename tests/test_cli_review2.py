"""Bugs found in a second review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from holon.cli import EXIT_OK
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
