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


def test_lone_surrogate_escapes_become_replacement_characters() -> None:
    # JavaScript (Claude Code) and Python's json.dumps write half of a character, e.g. an
    # output cut in the middle of an emoji, as a lone `\udXXX` escape: valid JSON grammar.
    # The rest of the file must still import; an escaped backslash before `u` is just text.
    text = r"cut \ud83d|\ude00|\ud83d\ude00|\\ud800"
    data = SAMPLES["claude-code"].replace(b'"fix it"', f'"{text}"'.encode())
    assert _messages(_parse("claude-code", data)) == ["cut \ufffd|\ufffd|\U0001f600|\\ud800"]
    for fmt, sample in SAMPLES.items():
        damaged = sample.replace(b"fix it", rb"fix \udcff it")
        assert _messages(_parse(fmt, damaged)) == ["fix \ufffd it"], fmt
