"""Provider APIs without the network: a scripted model behind the official SDK clients.

:class:`ScriptedModel` answers Anthropic Messages, OpenAI Chat Completions and OpenAI
Responses requests the way the real APIs shape their JSON, so the real SDK parses each
response: the first round of a turn calls the tools the turn's input asks for, the next
round answers in words. It reports usage as a provider with a prefix cache does (what
this request shares with the previous one is read from the cache, Anthropic writes the
rest), and validates every request against the installed SDK's request types
(:mod:`tests.sdk_types`), keeping the problems for the test to assert on.

:class:`RecordedTransport` replays recorded response bodies in order (the example agents'
tests), checking each request the same way.

Clients: :func:`anthropic_client` / :func:`openai_client`, sync or async, on an
``httpx.MockTransport`` (the SDKs' HTTP library is ``httpx2`` from SDK 2 / 3 on).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.sdk_types import anthropic_problems, openai_chat_problems, openai_responses_problems

httpx = pytest.importorskip("httpx2")
anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

_INPUT = re.compile(r"\[input (\d+)\]([^\n]*)")
API = str  # "anthropic", "openai-chat" or "openai-responses"
PATHS = {
    "anthropic": "/v1/messages",
    "openai-chat": "/v1/chat/completions",
    "openai-responses": "/v1/responses",
}
PROBLEMS: dict[API, Callable[[dict[str, Any]], list[str]]] = {
    "anthropic": anthropic_problems,
    "openai-chat": openai_chat_problems,
    "openai-responses": openai_responses_problems,
}


def _tokens(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True)) // 4


def _common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class ScriptedModel:
    """A deterministic model: tool calls named in the turn's input, then a reply in words.

    The input (the last user text of holon's prompt) names the calls as lines
    ``call <tool> <json arguments>``; a line ``call <tool> !bad`` sends arguments that are
    not JSON (the model's mistake the loop must answer). A request that ends with tool
    results gets the reply ``done: <each result's first line>``.
    """

    def __init__(self, api: API) -> None:
        self.api = api
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self._previous = ""
        self._ids = 0
        self._issued: set[str] = set()

    # ------------------------------------------------------------------ transport

    def handler(self, request: Any) -> Any:
        assert request.url.path == PATHS[self.api], request.url.path
        body = json.loads(request.content)
        self.requests.append(body)
        self.problems += [f"request {len(self.requests)}: {p}" for p in PROBLEMS[self.api](body)]
        response = self.respond(body)
        self.responses.append(response)
        return httpx.Response(200, json=response)

    def transport(self) -> Any:
        return httpx.MockTransport(self.handler)

    # ------------------------------------------------------------------ the script

    def _id(self, prefix: str) -> str:
        self._ids += 1
        issued = f"{prefix}_{self._ids}"
        self._issued.add(issued)
        return issued

    def _usage(self, body: dict[str, Any]) -> tuple[int, int, int]:
        """(input, cache read, cache write): what this request shares with the previous one is read."""
        text = json.dumps({k: v for k, v in body.items() if k not in ("max_tokens", "max_completion_tokens")})
        shared = _common(self._previous, text)
        self._previous = text
        total = len(text) // 4
        read = shared // 4 if shared > 1024 else 0  # providers cache from 1,024 tokens-ish up
        return total, read, total - read

    def _turn_text(self, body: dict[str, Any]) -> tuple[str, list[str]]:
        """The text holon's prompt shows, and the tool outputs the request ends with.

        The prompt may hold native tool blocks of earlier turns (the history's calls, under
        holon's ids); those never end a request, which ends with the turn's input. The
        results it ends with answer this turn's calls: the loop's answers to this model's
        own ids, or — in a prompt rendered again within the turn, whose rounds outgrew it —
        the turn's work shown after its input, under holon's ids.
        """
        texts: list[str] = []
        results: list[str] = []
        if self.api == "anthropic":
            for message in body["messages"]:
                content = message["content"]
                blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
                if message["role"] == "user":
                    texts += [b["text"] for b in blocks if b.get("type") == "text"]
            last = body["messages"][-1]
            if last["role"] == "user" and isinstance(last["content"], list):
                # The tool results the request ends with (a history call's result is
                # followed by the rest of the prompt in the same message).
                for block in reversed(last["content"]):
                    if block.get("type") != "tool_result":
                        break
                    results.insert(0, str(block.get("content")))
            return "\n".join(texts), results
        items = body["messages"] if self.api == "openai-chat" else body["input"]
        for item in items:
            if item.get("role") in ("user", "system") and isinstance(item.get("content"), str):
                texts.append(item["content"])
        for item in reversed(items):
            if self.api == "openai-chat" and item.get("role") == "tool":
                answered, output = item.get("tool_call_id"), item.get("content")
            elif self.api == "openai-responses" and item.get("type") == "function_call_output":
                answered, output = item.get("call_id"), item.get("output")
            else:
                break
            if answered is None:
                break
            results.insert(0, str(output))
        return "\n".join(texts), results

    def _calls(self, text: str) -> list[tuple[str, str]]:
        """The (tool, arguments) the newest input asks for.

        An input reads ``[input N] call <tool> <json> | call <tool> <json>``; the prompt's
        history repeats earlier inputs, so the one with the highest N is the turn's.
        """
        inputs = [(int(m.group(1)), m.group(2)) for m in _INPUT.finditer(text)]
        if not inputs:
            return []
        calls = []
        for part in max(inputs)[1].split(" | "):
            asked = part.strip()
            if asked.startswith("call "):
                _, tool, arguments = asked.split(" ", 2)
                calls.append((tool, arguments))
        return calls

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        text, results = self._turn_text(body)
        calls = [] if results else self._calls(text)
        reply = "done: " + "; ".join(r.splitlines()[0] if r else "" for r in results) if results else ""
        if not calls and not reply:
            reply = "nothing to do"
        total, read, written = self._usage(body)
        out = 7 + 5 * len(calls)
        model = body["model"]
        if self.api == "anthropic":
            content: list[dict[str, Any]] = []
            if reply:
                content.append({"type": "text", "text": reply, "citations": None})
            for tool, arguments in calls:
                content.append(
                    {
                        "type": "tool_use",
                        "id": self._id("toolu"),
                        "name": tool,
                        "input": json.loads(arguments),
                    }
                )
            return {
                "id": self._id("msg"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": "tool_use" if calls else "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": total - read - written,
                    "cache_read_input_tokens": read,
                    "cache_creation_input_tokens": written,
                    "output_tokens": out,
                },
            }
        if self.api == "openai-chat":
            tool_calls = [
                {"id": self._id("call"), "type": "function", "function": {"name": tool, "arguments": args}}
                for tool, args in calls
            ]
            message: dict[str, Any] = {"role": "assistant", "content": reply or None, "refusal": None}
            if tool_calls:
                message["tool_calls"] = tool_calls
            return {
                "id": self._id("chatcmpl"),
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if calls else "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": total,
                    "completion_tokens": out,
                    "total_tokens": total + out,
                    "prompt_tokens_details": {"cached_tokens": read, "audio_tokens": 0},
                },
            }
        output: list[dict[str, Any]] = []
        for tool, args in calls:
            output.append(
                {
                    "type": "function_call",
                    "id": self._id("fc"),
                    "call_id": self._id("call"),
                    "name": tool,
                    "arguments": args,
                    "status": "completed",
                }
            )
        if reply:
            output.append(
                {
                    "type": "message",
                    "id": self._id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply, "annotations": []}],
                }
            )
        return {
            "id": self._id("resp"),
            "object": "response",
            "created_at": 1_700_000_000,
            "model": model,
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": total,
                "input_tokens_details": {"cached_tokens": read},
                "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": total + out,
            },
        }


class RecordedTransport:
    """Replays recorded response bodies (a JSON file, or a list) in order, checking each request."""

    def __init__(self, api: API, responses: Path | list[dict[str, Any]]) -> None:
        self.api = api
        if isinstance(responses, Path):
            responses = json.loads(responses.read_text(encoding="utf-8"))
        self.responses: list[dict[str, Any]] = responses
        self.requests: list[dict[str, Any]] = []
        self.problems: list[str] = []

    def handler(self, request: Any) -> Any:
        assert request.url.path == PATHS[self.api], request.url.path
        body = json.loads(request.content)
        self.requests.append(body)
        self.problems += [f"request {len(self.requests)}: {p}" for p in PROBLEMS[self.api](body)]
        if len(self.requests) > len(self.responses):
            return httpx.Response(500, json={"error": {"message": "no recorded response left"}})
        return httpx.Response(200, json=self.responses[len(self.requests) - 1])

    def transport(self) -> Any:
        return httpx.MockTransport(self.handler)


def anthropic_client(transport: Any, *, asynchronous: bool = False) -> Any:
    """An ``anthropic.Anthropic`` (or ``AsyncAnthropic``) on the transport: no network, no retries."""
    if asynchronous:
        return anthropic.AsyncAnthropic(
            api_key="test", base_url="http://anthropic.test", max_retries=0,
            http_client=httpx.AsyncClient(transport=transport),
        )  # fmt: skip
    return anthropic.Anthropic(
        api_key="test",
        base_url="http://anthropic.test",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
    )


def openai_client(transport: Any, *, asynchronous: bool = False) -> Any:
    """An ``openai.OpenAI`` (or ``AsyncOpenAI``) on the transport: no network, no retries."""
    if asynchronous:
        return openai.AsyncOpenAI(
            api_key="test", base_url="http://openai.test/v1", max_retries=0,
            http_client=httpx.AsyncClient(transport=transport),
        )  # fmt: skip
    return openai.OpenAI(
        api_key="test",
        base_url="http://openai.test/v1",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
    )


def anthropic_reply(
    *blocks: dict[str, Any], usage: tuple[int, int, int, int] = (100, 0, 0, 10)
) -> dict[str, Any]:
    """An Anthropic Messages response body of these content blocks; usage (uncached, read, written, out)."""
    uncached, read, written, out = usage
    uses = any(b["type"] == "tool_use" for b in blocks)
    return {
        "id": f"msg_{abs(hash(json.dumps(blocks, sort_keys=True))) % 10**8}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(blocks),
        "stop_reason": "tool_use" if uses else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": uncached,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": out,
        },
    }


def chat_reply(content: str | None, *calls: tuple[str, str, str], prompt_tokens: int = 100) -> dict[str, Any]:
    """A Chat Completions response body: the message's content and its (id, name, arguments) calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, name, arguments in calls
        ]
    return {
        "id": f"chatcmpl-{abs(hash(json.dumps(message, sort_keys=True))) % 10**8}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": 10,
            "total_tokens": prompt_tokens + 10,
            "prompt_tokens_details": {"cached_tokens": 0},
        },
    }
