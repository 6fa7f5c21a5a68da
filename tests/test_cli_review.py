"""Bugs found reviewing the command line, each pinned by a test that failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import blake3
import pytest

from holon import records as r
from tests.cli_support import invoke, write_jsonl

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
