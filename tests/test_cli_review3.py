"""Bugs found in a third review of the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

from holon.cli import EXIT_OK, EXIT_USAGE
from tests.cli_support import invoke

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
