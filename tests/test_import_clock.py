"""`holon import` says when a transcript had no timestamps and its clock is invented.

An imported tau-bench run (OpenAI chat messages carry no times) had its records 1 s apart
on a synthetic clock; nothing said so, and `holon audit` showed every tool call taking
1,000 ms as if it had been measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_support import invoke

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "importers"


def _import(tmp_path: Path, fmt: str, name: str, *extra: str) -> str:
    ledger = tmp_path / "L"
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    result = invoke("import", ledger, FIXTURES / fmt / name, "--from", fmt, *extra)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_an_untimestamped_transcript_is_said_to_run_on_a_synthetic_clock(tmp_path: Path) -> None:
    out = _import(tmp_path, "openai-chat", "conversation.json")
    assert "the transcript has no timestamps: its records are 1,000 ms apart on a synthetic clock" in out
    assert "durations (holon stats, holon audit) are not real" in out


def test_a_timestamped_transcript_says_nothing_of_its_clock(tmp_path: Path) -> None:
    out = _import(tmp_path, "claude-code", "session.jsonl")
    assert "synthetic clock" not in out


def test_json_output_states_the_clock(tmp_path: Path) -> None:
    untimed = json.loads(_import(tmp_path / "a", "openai-chat", "conversation.json", "--json"))
    timed = json.loads(_import(tmp_path / "b", "claude-code", "session.jsonl", "--json"))
    assert untimed["synthetic_clock"] is True and timed["synthetic_clock"] is False
