"""Validate a request body against the installed provider SDK's own request types.

What holon's adapters and its turn loop send must be a request the provider accepts. The
SDKs describe their requests as TypedDicts (``MessageCreateParams``,
``CompletionCreateParams``, ``ResponseCreateParams``); this module checks a body against
them two ways:

- a strict walk: every key known to the TypedDict it sits in (a TypedDict does not refuse
  an unknown key, the API answers 400), every required key present, every value of its
  declared type, recursively, unions tried in turn;
- pydantic's ``TypeAdapter`` validation of the same TypedDict (what the SDK's own
  types accept at run time);

and checks the rules the types cannot state: Anthropic's alternation of roles, each
``tool_use`` answered by a ``tool_result`` in the next user message (and none without
one), at most 4 ``cache_control`` breakpoints; OpenAI's ``tool_calls`` each answered by a
``role: tool`` message, a Responses ``function_call_output`` only for an earlier
``function_call``. Native tool blocks are accepted anywhere in the history, not only in
the rounds a loop appends.

The SDKs are an optional extra (``holon[anthropic]``, ``holon[openai]``): a test that
uses this module skips without them (``pytest.importorskip``).
"""

from __future__ import annotations

import collections.abc as cabc
import functools
import types
import typing
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin

__all__ = [
    "RequestProblem",
    "anthropic_problems",
    "check_anthropic",
    "check_openai_chat",
    "check_openai_responses",
    "openai_chat_problems",
    "openai_responses_problems",
    "strict_problems",
]


class RequestProblem(AssertionError):
    """A request body the SDK's types (or the provider's rules) refuse; the text lists why."""


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


@functools.cache
def _hints(td: type) -> dict[str, Any]:
    return typing.get_type_hints(td, include_extras=True)


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) in (Required, NotRequired, typing.Annotated):
        tp = get_args(tp)[0]
    return tp


_SEQUENCES = (
    list,
    cabc.Iterable,
    cabc.Sequence,
    cabc.Collection,
    typing.List,  # noqa: UP006 - what older SDK annotations say
    typing.Sequence,
    typing.Iterable,
)


def strict_problems(value: Any, tp: Any, where: str = "$") -> list[str]:
    """Why ``value`` is not of type ``tp`` as the SDK declares it (empty: it is)."""
    tp = _unwrap(tp)
    if tp is Any or tp is object:
        return []
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: expected an object ({tp.__name__}), got {type(value).__name__}"]
        hints = _hints(tp)
        problems = [f"{where}.{key}: not a key of {tp.__name__}" for key in value if key not in hints]
        problems += [
            f"{where}: {tp.__name__} requires {key!r}"
            for key in sorted(tp.__required_keys__)
            if key not in value
        ]
        for key, item in value.items():
            if key in hints:
                problems += strict_problems(item, hints[key], f"{where}.{key}")
        return problems
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        options = get_args(tp)
        failures = []
        for option in options:
            found = strict_problems(value, option, where)
            if not found:
                return []
            failures.append(found)
        # The option that came closest says best what is wrong: the one whose problems lie
        # deepest (its shape matched furthest), then the one with the fewest.
        return max(failures, key=lambda found: (max(len(p.split(": ", 1)[0]) for p in found), -len(found)))
    if origin is Literal:
        return [] if value in get_args(tp) else [f"{where}: {value!r} is not one of {get_args(tp)}"]
    if tp is type(None) or tp is None:
        return [] if value is None else [f"{where}: expected null, got {type(value).__name__}"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{where}: expected a string, got {type(value).__name__}"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{where}: expected a boolean, got {type(value).__name__}"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected an integer, got {type(value).__name__}"]
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{where}: expected a number, got {type(value).__name__}"]
    if origin in _SEQUENCES or tp in (list, tuple):
        if not isinstance(value, list | tuple):
            return [f"{where}: expected an array, got {type(value).__name__}"]
        (item_type,) = get_args(tp)[:1] or (Any,)
        return [p for i, item in enumerate(value) for p in strict_problems(item, item_type, f"{where}[{i}]")]
    if origin in (dict, cabc.Mapping, typing.Dict) or tp is dict:  # noqa: UP006
        if not isinstance(value, dict):
            return [f"{where}: expected an object, got {type(value).__name__}"]
        args = get_args(tp)
        item_type = args[1] if len(args) == 2 else Any
        return [p for k, item in value.items() for p in strict_problems(item, item_type, f"{where}.{k}")]
    if origin is not None:  # another generic (e.g. a SequenceNotStr): check its origin's shape
        if origin is typing.Union:  # pragma: no cover - handled above
            return []
        args = get_args(tp)
        if isinstance(value, list) and args:
            return [
                p for i, item in enumerate(value) for p in strict_problems(item, args[0], f"{where}[{i}]")
            ]
        return []
    if isinstance(tp, type):
        return (
            [] if isinstance(value, tp) else [f"{where}: expected {tp.__name__}, got {type(value).__name__}"]
        )
    return []  # a type this walk does not know (a TypeVar): pydantic checks it


def _pydantic_problems(value: Any, td: type) -> list[str]:
    import pydantic  # noqa: PLC0415 - installed with the SDKs

    try:
        _adapter(td).validate_python(value)
    except pydantic.ValidationError as exc:
        return [f"pydantic: {error['loc']}: {error['msg']}" for error in exc.errors()[:10]]
    return []


@functools.cache
def _adapter(td: type) -> Any:
    import pydantic  # noqa: PLC0415

    return pydantic.TypeAdapter(td)


def _raise(problems: list[str], what: str) -> None:
    if problems:
        raise RequestProblem(f"{what} refused:\n  " + "\n  ".join(problems[:20]))


# --------------------------------------------------------------------------- Anthropic


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)]


def anthropic_problems(request: dict[str, Any]) -> list[str]:
    """What the SDK's ``MessageCreateParamsNonStreaming`` and Anthropic's rules refuse in ``request``."""
    from anthropic.types.message_create_params import MessageCreateParamsNonStreaming  # noqa: PLC0415

    problems = strict_problems(request, MessageCreateParamsNonStreaming)
    problems += _pydantic_problems(request, MessageCreateParamsNonStreaming)
    messages = request.get("messages") or []
    if messages and messages[0].get("role") != "user":
        problems.append("messages[0]: the first message must be the user's")
    pending: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if i and role == messages[i - 1].get("role"):
            problems.append(f"messages[{i}]: two {role} messages in a row (roles must alternate)")
        blocks = _blocks(message.get("content", []))
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if role == "user":
            answered = {b.get("tool_use_id") for b in results}
            if pending - answered:
                problems.append(f"messages[{i}]: tool_use {sorted(pending - answered)} not answered here")
            if answered - pending:
                problems.append(
                    f"messages[{i}]: tool_result for {sorted(answered - pending)} with no tool_use"
                )
            first = [b.get("type") for b in blocks[: len(results)]]
            if results and any(kind != "tool_result" for kind in first):
                problems.append(f"messages[{i}]: tool_result blocks must come first in the message")
            pending = set()
        else:
            if results:
                problems.append(f"messages[{i}]: a tool_result in an assistant message")
            pending = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
            if not blocks:
                problems.append(f"messages[{i}]: an assistant message with no content")
        for j, block in enumerate(blocks):
            if (
                block.get("type") == "text"
                and not str(block.get("text", "")).strip()
                and i < len(messages) - 1
            ):
                problems.append(f"messages[{i}].content[{j}]: a blank text block")
    if pending:
        problems.append("the last assistant message's tool_use blocks are not answered")
    marks = sum("cache_control" in block for block in request.get("tools") or ())
    marks += sum("cache_control" in block for block in request.get("system") or () if isinstance(block, dict))
    marks += sum("cache_control" in b for m in messages for b in _blocks(m.get("content", [])))
    if marks > 4:
        problems.append(f"{marks} cache_control breakpoints (Anthropic accepts at most 4)")
    return problems


def check_anthropic(request: dict[str, Any]) -> None:
    """Raise :class:`RequestProblem` unless Anthropic would accept ``request``."""
    _raise(anthropic_problems(request), "Anthropic Messages request")


# --------------------------------------------------------------------------- OpenAI


def openai_chat_problems(request: dict[str, Any]) -> list[str]:
    """What the SDK's ``CompletionCreateParamsNonStreaming`` and the tool-call rules refuse."""
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming  # noqa: PLC0415

    problems = strict_problems(request, CompletionCreateParamsNonStreaming)
    problems += _pydantic_problems(request, CompletionCreateParamsNonStreaming)
    pending: list[str] = []
    for i, message in enumerate(request.get("messages") or []):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in pending:
                problems.append(
                    f"messages[{i}]: tool message for {message.get('tool_call_id')!r}, not asked for"
                )
            else:
                pending.remove(message["tool_call_id"])
            continue
        if pending:
            problems.append(f"messages[{i}]: tool calls {pending} not answered before this message")
        pending = (
            [c.get("id") for c in message.get("tool_calls") or ()]
            if message.get("role") == "assistant"
            else []
        )
    if pending:
        problems.append(f"tool calls {pending} not answered")
    return problems


def check_openai_chat(request: dict[str, Any]) -> None:
    """Raise :class:`RequestProblem` unless Chat Completions would accept ``request``."""
    _raise(openai_chat_problems(request), "OpenAI Chat Completions request")


def openai_responses_problems(request: dict[str, Any]) -> list[str]:
    """What the SDK's ``ResponseCreateParamsNonStreaming`` and the function-call rules refuse."""
    from openai.types.responses.response_create_params import ResponseCreateParamsNonStreaming  # noqa: PLC0415

    problems = strict_problems(request, ResponseCreateParamsNonStreaming)
    problems += _pydantic_problems(request, ResponseCreateParamsNonStreaming)
    items = request.get("input")
    if isinstance(items, list):
        called: set[str] = set()
        answered: set[str] = set()
        for i, item in enumerate(items):
            if item.get("type") == "function_call":
                called.add(item.get("call_id"))
            elif item.get("type") == "function_call_output":
                if item.get("call_id") not in called:
                    problems.append(
                        f"input[{i}]: function_call_output for {item.get('call_id')!r}, never called"
                    )
                answered.add(item.get("call_id"))
        if called - answered:
            problems.append(f"function calls {sorted(called - answered)} have no function_call_output")
    return problems


def check_openai_responses(request: dict[str, Any]) -> None:
    """Raise :class:`RequestProblem` unless Responses would accept ``request``."""
    _raise(openai_responses_problems(request), "OpenAI Responses request")
