"""Helpers for the importer review tests: hand-built transcripts, parsing, the texts imported."""

from __future__ import annotations

import json
from typing import Any

from holon.importers import IMPORTERS, ImportReport
from holon.importers._builder import UNDEFINED_TOOL
from holon.records import Message, ToolDefinition

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


def declared(*names: str) -> tuple[ToolDefinition, ...]:
    """The definitions an import adds for the tools a transcript called without defining them."""
    return tuple(
        ToolDefinition(name=name, description=UNDEFINED_TOOL, parameters={"type": "object"}) for name in names
    )
