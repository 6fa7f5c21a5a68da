"""Helpers for the importer tests: hand-built transcripts, parsing, importing, the texts imported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from holon.importers import IMPORTERS, ImportReport
from holon.importers._builder import UNDEFINED_TOOL
from holon.ledger import Ledger
from holon.projections import fold
from holon.records import Message, ToolDefinition, ToolIntent, ToolResult
from tests.cli_support import invoke, tree_bytes

USER = {"role": "user", "content": "fix it"}


def claude_jsonl(*events: dict[str, Any]) -> bytes:
    """A Claude Code session file of ``events``, each given a uuid, a timestamp and a session."""
    lines = []
    for index, event in enumerate(events):
        base = {"uuid": f"u{index}", "timestamp": f"2025-03-01T10:00:{index:02d}Z", "sessionId": "s1"}
        lines.append(json.dumps(base | event))
    return ("\n".join(lines) + "\n").encode()


def parse_as(fmt: str, data: bytes) -> ImportReport:
    """What importer ``fmt`` makes of ``data`` (pure: nothing is appended)."""
    return IMPORTERS[fmt].parse_bytes(data, source="t")


def message_texts(report: ImportReport) -> list[str]:
    return [rec.body.text for rec in report.records if isinstance(rec.body, Message)]


def channel_messages(report: ImportReport) -> list[tuple[int | None, str | None, str]]:
    """(turn, channel, text) of every channel message ``report`` holds."""
    return [
        (r.turn, r.body.channel, r.body.text)
        for r in report.records
        if isinstance(r.body, Message) and r.body.role == "channel"
    ]


def declared(*names: str) -> tuple[ToolDefinition, ...]:
    """The definitions an import adds for the tools a transcript called without defining them."""
    return tuple(
        ToolDefinition(name=name, description=UNDEFINED_TOOL, parameters={"type": "object"}) for name in names
    )


SUFFIXES = {"claude-code": "jsonl", "openai-chat": "json", "swe-agent": "traj", "openhands": "json"}


def tool_calls_of(data: bytes, fmt: str) -> list[tuple[str, str, str | None]]:
    """(call id, tool, output or None for an intent) of every tool record ``fmt`` makes of ``data``."""
    out: list[tuple[str, str, str | None]] = []
    for record in parse_as(fmt, data).records:
        if isinstance(record.body, ToolIntent):
            out.append((record.body.call_id, record.body.tool, None))
        elif isinstance(record.body, ToolResult):
            out.append((record.body.call_id, record.body.tool, record.body.output))
    return out


def imported_tools(tmp_path: Path, fmt: str, data: bytes) -> list[tuple[str, str, str]]:
    """Import ``data`` through the CLI, verify the ledger, and fold it: (call id, tool, outcome)."""
    ledger, file = tmp_path / "L", tmp_path / f"t.{SUFFIXES[fmt]}"
    file.write_bytes(data)
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    result = invoke("import", ledger, file, "--from", fmt)
    assert result.exit_code == 0, result.stderr
    assert invoke("verify", ledger).exit_code == 0
    with Ledger.open(ledger, readonly=True) as opened:
        state = fold(opened.read())
    return [(ex.call_id, ex.tool, ex.outcome) for ex in state.runtime.tools]


def refused_import(tmp_path: Path, fmt: str, data: bytes) -> str:
    """Import ``data`` into a ledger holding a session; assert it is refused with nothing written."""
    ledger, file = tmp_path / "L", tmp_path / f"t.{SUFFIXES[fmt]}"
    file.write_bytes(data)
    assert invoke("init", ledger, "--agent-id", "a1").exit_code == 0
    before = tree_bytes(ledger)
    result = invoke("import", ledger, file, "--from", fmt)
    assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
    assert tree_bytes(ledger) == before
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]
