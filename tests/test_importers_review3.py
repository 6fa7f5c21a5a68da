"""Third review of the transcript importers: gaps found after the first two reviews."""

from __future__ import annotations

import json
from typing import Any

import pytest

from holon.errors import InvalidRecord
from holon.records import Message, TurnStarted
from tests.importers_support import USER, parse_as

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


CALLED = {"role": "assistant", "content": None, "tool_calls": [CALL]}


@pytest.mark.parametrize(
    "chat",
    [
        [{"role": "user", "content": None}],
        [{"role": "user"}],
        [{"role": "system", "content": None}],
        [{"role": "developer"}],
        [USER, CALLED, {"role": "tool", "tool_call_id": "c1", "content": None}],
        [USER, {"role": "assistant", "content": None}],
        [USER, {"role": "assistant", "content": None, "tool_calls": []}],
    ],
)
def test_an_openai_message_without_content_is_refused_where_it_is(chat: list[dict[str, Any]]) -> None:
    # The chat API refuses these; imported, a user one opened a turn whose input was empty.
    index, role = len(chat) - 1, chat[-1]["role"]
    with pytest.raises(InvalidRecord, match=rf"field `\[{index}\]\.content`: an? `{role}` message needs"):
        parse_as("openai-chat", json.dumps(chat).encode())


@pytest.mark.parametrize(
    "standin",
    [
        {"tool_calls": [CALL]},
        {"function_call": {"name": "f", "arguments": "{}"}},
        {"refusal": "no"},
        {"audio": {"id": "audio_1"}},
    ],
)
def test_an_openai_assistant_message_may_say_something_else_than_content(standin: dict[str, Any]) -> None:
    chat = [USER, {"role": "assistant", "content": None} | standin]
    report = parse_as("openai-chat", json.dumps(chat).encode())
    assert isinstance(report.records[0].body, TurnStarted)
    if "audio" in standin:
        assert report.skipped == {"audio": 1}


def test_an_openai_user_message_with_empty_text_still_opens_its_turn() -> None:
    # Empty text is content the API accepts: imported as it is, not refused like a null.
    report = parse_as("openai-chat", json.dumps([{"role": "user", "content": ""}]).encode())
    assert [type(r.body) for r in report.records][:2] == [TurnStarted, Message]
