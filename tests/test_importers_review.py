"""Importer edge cases found in review: real tools' files that must import, or fail clearly."""

from __future__ import annotations

import json
from typing import Any

import pytest

from holon.importers import IMPORTERS, ImportReport
from holon.records import Message

USER = {"role": "user", "content": "fix it"}


def _claude(*events: dict[str, Any]) -> bytes:
    lines = []
    for index, event in enumerate(events):
        base = {"uuid": f"u{index}", "timestamp": f"2025-03-01T10:00:{index:02d}Z", "sessionId": "s1"}
        lines.append(json.dumps(base | event))
    return ("\n".join(lines) + "\n").encode()


def _parse(fmt: str, data: bytes) -> ImportReport:
    return IMPORTERS[fmt].parse_bytes(data, source="t")


def _messages(report: ImportReport) -> list[str]:
    return [rec.body.text for rec in report.records if isinstance(rec.body, Message)]


SAMPLES: dict[str, bytes] = {
    "claude-code": _claude({"type": "user", "message": {"role": "user", "content": "fix it"}}),
    "openai-chat": json.dumps([USER]).encode(),
    "swe-agent": json.dumps({"history": [USER]}).encode(),
    "openhands": json.dumps(
        [{"id": 1, "source": "user", "action": "message", "args": {"content": "fix it"}}]
    ).encode(),
}


@pytest.mark.parametrize("fmt", sorted(SAMPLES))
def test_a_utf8_byte_order_mark_is_ignored(fmt: str) -> None:
    # Windows tools (PowerShell's Out-File, Notepad) prefix UTF-8 files with a BOM; RFC 8259
    # lets a parser ignore it, and the file is otherwise the tool's own.
    assert _messages(_parse(fmt, b"\xef\xbb\xbf" + SAMPLES[fmt])) == ["fix it"]
