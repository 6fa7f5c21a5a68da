"""Provider adapters: a :class:`Prompt` as a plain request dict, no SDK needed.

- :func:`to_anthropic_messages` — Anthropic Messages API: ``tools``, ``system`` as text
  blocks (Stable first, then AgentScoped) and the TurnScoped sections as the user
  message, one text block per run of sections up to a breakpoint — the history cut
  into one block per turn — with ``cache_control`` on each breakpoint block (at most 4,
  the API's limit). Anthropic caches tools → system → messages in that order, so a
  breakpoint on the last Stable system block also covers the tool definitions; the one
  after the history lets the next turn's prompt, whose history is this one plus a
  block for the last turn, read everything before it (Anthropic looks a cached prefix
  up at the block boundaries before a breakpoint); the one at the end lets the turn's
  later calls, which append their rounds, read the whole prompt.
- :func:`to_openai_chat` / :func:`to_openai_responses` — OpenAI Chat Completions /
  Responses: one system message holding the cacheable prefix, one user message with the
  rest, ``tools`` as function tools (for Responses with ``strict: false``, Chat
  Completions' default), and ``prompt_cache_key`` set to the agent's routing key (OpenAI
  caches prefixes automatically; the key keeps one agent's requests on the same cache).
- :func:`parse_tool_arguments` — a tool call's arguments as the model sent them (OpenAI:
  a JSON string the model may get wrong) to the dict ``Turn.tool`` records, or
  :class:`InvalidToolArguments`, whose text tells the model what was wrong;
  :func:`openai_assistant_message` — the model's Chat Completions message as the
  assistant message a daemon appends to its next request.

The tool definitions travel structured in ``tools``; their text section only counts
their tokens and is not repeated in the system text. The history's tool calls and their
results (``PromptSection.calls``) are each provider's native blocks or items under their
own ids, when the prompt defines tools (docs/context-rendering.md, *The history's tool
calls*); the rest of the TurnScoped text is the user's.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final, NamedTuple, NoReturn

import blake3
import msgspec

import holon.records as r
from holon.context.budget import ToolExchange
from holon.context.prompt import SEPARATOR, Prompt, PromptSection
from holon.errors import InvalidToolArguments, UsageError

__all__ = [
    "MAX_ANTHROPIC_BREAKPOINTS",
    "MAX_ANTHROPIC_USER_ID",
    "MAX_OPENAI_CACHE_KEY",
    "InvalidToolArguments",
    "cache_last_block",
    "openai_assistant_message",
    "parse_tool_arguments",
    "to_anthropic_messages",
    "to_openai_chat",
    "to_openai_responses",
]

#: Anthropic accepts at most four cache_control breakpoints per request.
MAX_ANTHROPIC_BREAKPOINTS: Final = 4
#: The longest ``metadata.user_id`` Anthropic accepts.
MAX_ANTHROPIC_USER_ID: Final = 256
#: The longest ``prompt_cache_key`` OpenAI accepts.
MAX_OPENAI_CACHE_KEY: Final = 64


def _key(prompt: Prompt, limit: int) -> str:
    """The routing key, or — when it is longer than the provider accepts — a hash of it.

    ``holon:<agent>:<prompt_cache_key>`` can be long (an agent id may have 256 characters);
    a longer field is a 400 (OpenAI: ``string_above_max_length``). The hash,
    ``holon:`` and 32 hex digits of its blake3, is as stable per agent and cache key.
    """
    key = prompt.identity.routing_key
    if len(key) <= limit:
        return key
    return "holon:" + blake3.blake3(key.encode()).hexdigest()[:32]


def _prefix(prompt: Prompt) -> list[PromptSection]:
    return [s for s in prompt.sections if s.stability != "turn" and s.name != "tools"]


#: What both providers accept as a tool name (Anthropic and OpenAI answer 400 otherwise).
_TOOL_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _check_tools(tools: tuple[r.ToolDefinition, ...]) -> None:
    """Refuse tool names the providers reject, here, where the fix can be named.

    A name is not renamed on the way out: the model's tool calls come back under the name
    it was given, and the daemon maps them back by that name.
    """
    seen: set[str] = set()
    for tool in tools:
        if not _TOOL_NAME.fullmatch(tool.name):
            raise UsageError(
                f"tool name {tool.name!r} is not accepted by Anthropic or OpenAI: a name is 1-64 "
                "letters, digits, '_' or '-'; rename it in the SystemPolicy's tools"
            )
        if tool.name in seen:
            raise UsageError(
                f"tool {tool.name!r} is defined twice in the SystemPolicy; the providers refuse "
                "duplicate tool names: keep one definition"
            )
        seen.add(tool.name)


def _schema(tool: r.ToolDefinition) -> dict[str, Any]:
    """The tool's parameters as the object schema both providers require.

    Anthropic's ``input_schema`` and OpenAI's ``parameters`` must say ``"type": "object"``
    (Anthropic answers 400 ``input_schema.type: Field required``, OpenAI 400 ``schema must be
    a JSON Schema of 'type: "object"'``); a definition that leaves the type out — ``{}``, or
    ``{"properties": …}``, which describes an object anyway — gets it added.

    The schema is a deep copy: the definition is the folded state's ``SystemPolicy``, and a
    daemon that adjusts the request's schemas in place (``additionalProperties: false`` on
    every nested object, for OpenAI's strict mode) changed the policy every later prompt
    renders, so the tools section — and the cache key — no longer matched the ledger.
    """
    schema = copy.deepcopy(tool.parameters)
    if "type" in schema:
        return schema
    return {"type": "object", **schema}


def _breakpoint_after(prompt: Prompt, section: PromptSection) -> bool:
    # The tools section is not a system block; its breakpoint moves to the last Stable
    # system block before it (or after it), which covers the tools in Anthropic's order.
    if section.breakpoint:
        return True
    tools = prompt.section("tools")
    if tools is None or not tools.breakpoint or section.stability != "stable":
        return False
    stable = [s for s in _prefix(prompt) if s.stability == "stable"]
    return bool(stable) and stable[-1] is section


class _Text(NamedTuple):
    """A run of TurnScoped text; ``mark``: a cache breakpoint ends it."""

    text: str
    mark: bool


class _Call(NamedTuple):
    """A tool call and its result from the history, sent as the provider's own blocks."""

    call: ToolExchange
    output: str
    mark: bool


def _turn_pieces(prompt: Prompt, *, native: bool) -> list[_Text | _Call]:
    """The TurnScoped text as content blocks, in order: text runs and (``native``) tool calls.

    A text run ends after each breakpoint section and at each of a section's ``cuts`` (in
    the history, before every turn's first unit). Without tool calls the runs joined are
    exactly the TurnScoped text: a separator between two sections, or the line break at a
    cut, starts the next run rather than ending the previous one, so a run holding the end
    of this prompt's history is byte-identical in the next turn's prompt — where the
    history goes on after it and no blank line follows — and Anthropic, which matches
    whole blocks, reads the cached prefix there.

    ``native``: each of a section's ``calls`` is a :class:`_Call` instead of its text — its
    call line, and its result's head and output as the output — and the line breaks
    joining it to the text around it are dropped. A run that would be blank is left out
    (Anthropic rejects a blank text block) and its breakpoint goes to the piece before it.
    """
    pieces: list[_Text | _Call] = []
    run = ""  # the text of the run being built
    pending = ""  # a separator owed before the next section's text

    def close(text: str, mark: bool) -> None:
        if text.strip():
            pieces.append(_Text(text, mark))
        elif mark and pieces:
            pieces[-1] = pieces[-1]._replace(mark=True)

    for section in prompt.sections:
        if section.stability != "turn":
            continue
        text = pending + section.text
        shift = len(pending)
        pending = SEPARATOR
        # (position, order, call): a cut ends a run there; a call spans to its end.
        events: list[tuple[int, int, ToolExchange | None]] = [(cut + shift, 0, None) for cut in section.cuts]
        if native:
            # A call under a name the providers refuse stays text: as a block it is a 400.
            named = [call for call in section.calls if _TOOL_NAME.fullmatch(call.tool)]
            events += [(call.start + shift, 1, call) for call in named]
        events.sort(key=lambda event: (event[0], event[1]))
        start = 0
        for at, _, call in events:
            if call is None:
                if at >= start:
                    close(run + text[start:at], False)
                    run, start = "", at
                continue
            before = run + text[start:at]
            close(before[:-1] if before.endswith("\n") else before, False)
            pieces.append(_Call(call, text[call.result + shift : call.end + shift], False))
            run, start = "", call.end + shift
            if text.startswith("\n", start):
                start += 1
        run += text[start:]
        if section.breakpoint:
            close(run, True)
            run = ""
    if run:
        close(run, False)
    return pieces


#: Call ids each provider accepts (Anthropic: letters, digits, ``_`` and ``-``; OpenAI: at
#: most 40 characters for a Chat Completions tool call).
_ANTHROPIC_ID: Final = re.compile(r"[a-zA-Z0-9_-]+")
_OPENAI_ID_MAX: Final = 40


def _call_ids(pieces: list[_Text | _Call], ok: Callable[[str], bool]) -> list[str]:
    """The id each call in ``pieces`` is sent under: its own, unless the provider refuses it.

    A refused id (a character or a length the provider rejects) or one already used in
    this request (ids are unique per request; an imported run may reuse them) is sent as
    ``holon_`` and 24 hex digits of the blake3 of the id and its occurrence: the same in
    every request that holds the same history, so the cached prefix stays byte-identical.
    """
    ids: list[str] = []
    seen: dict[str, int] = {}
    for piece in pieces:
        if not isinstance(piece, _Call):
            continue
        own = piece.call.call_id
        n = seen[own] = seen.get(own, 0) + 1
        if n == 1 and ok(own):
            ids.append(own)
        else:
            ids.append("holon_" + blake3.blake3(f"{own}#{n}".encode()).hexdigest()[:24])
    return ids


def _arguments(call: ToolExchange) -> str:
    return msgspec.json.encode(call.arguments, order="sorted").decode()


def to_anthropic_messages(prompt: Prompt, *, model: str, max_tokens: int) -> dict[str, Any]:
    """An Anthropic Messages request body for this prompt.

    Raises UsageError for a ``max_tokens`` below 1 or a tool name the provider refuses.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise UsageError(
            f"max_tokens must be a positive integer (Anthropic refuses {max_tokens!r}); pass the "
            "output reserve of the budget, e.g. budget.output_reserve"
        )
    _check_tools(prompt.tools)
    tools = [{"name": t.name, "description": t.description, "input_schema": _schema(t)} for t in prompt.tools]
    # (block, marked) in Anthropic's cache order: tools → system → messages.
    system: list[tuple[dict[str, Any], bool]] = []
    tools_marked = False
    for section in _prefix(prompt):
        mark = _breakpoint_after(prompt, section)
        if not section.text.strip():
            # Anthropic rejects a blank text block (400 "text content blocks must contain
            # non-whitespace text"), e.g. a policy text of a line break: it is left out, and
            # its breakpoint — the prefix up to it is the prefix up to what came before —
            # goes to the block before it, or to the last tool definition.
            if mark and system:
                system[-1] = (system[-1][0], True)
            elif mark and tools:
                tools_marked = True
            continue
        system.append(({"type": "text", "text": section.text}, mark))
    # Tool blocks in a request that defines no tools are refused: without tools the
    # history's calls stay text.
    pieces = _turn_pieces(prompt, native=bool(tools))
    ids = iter(_call_ids(pieces, lambda own: _ANTHROPIC_ID.fullmatch(own) is not None))
    # (role, [(block, marked)]): a call is the assistant's tool_use, its result the next
    # user message's first block, as Anthropic requires (results before any text).
    messages: list[tuple[str, list[tuple[dict[str, Any], bool]]]] = [("user", [])]
    for piece in pieces:
        if isinstance(piece, _Text):
            messages[-1][1].append(({"type": "text", "text": piece.text}, piece.mark))
            continue
        call_id = next(ids)
        use = {"type": "tool_use", "id": call_id, "name": piece.call.tool, "input": piece.call.arguments}
        messages.append(("assistant", [(use, False)]))
        result = {"type": "tool_result", "tool_use_id": call_id, "content": piece.output}
        messages.append(("user", [(result, piece.mark)]))
    content = [block for _, blocks in messages for block in blocks]
    marks = 0
    for block, mark in [*([(tools[-1], True)] if tools_marked else []), *system, *content]:
        if mark and marks < MAX_ANTHROPIC_BREAKPOINTS:
            block["cache_control"] = {"type": "ephemeral"}
            marks += 1
    request: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if tools:
        request["tools"] = tools
    if system:
        request["system"] = [block for block, _ in system]
    request["messages"] = [
        {"role": role, "content": [block for block, _ in blocks]} for role, blocks in messages if blocks
    ]
    request["metadata"] = {"user_id": _key(prompt, MAX_ANTHROPIC_USER_ID)}
    return request


#: Blocks Anthropic takes no ``cache_control`` on ("Thinking blocks cannot be cached
#: directly"; they are cached with the turn they are part of).
_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})


def _markable(block: dict[str, Any]) -> bool:
    # Anthropic rejects cache_control on an empty text block, and on a thinking block.
    kind = block.get("type")
    if kind in _UNMARKABLE:
        return False
    return kind != "text" or bool(str(block.get("text", "")).strip())


def cache_last_block(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Move the request's last ``cache_control`` breakpoint to the last content block; in place.

    Within a turn a daemon appends the model's rounds after holon's prompt (see
    :meth:`holon.runtime.Turn.context`). Marking the newest block on every call lets each
    call read what the previous one wrote (Anthropic looks back up to 20 blocks from a
    breakpoint); the prompt may already use all four breakpoints Anthropic allows, so the
    last one in the messages — the previous end — moves to the newest block instead of a
    fifth being added. String contents are turned into one text block. A block Anthropic
    takes no ``cache_control`` on — a blank text (a final assistant message may be empty),
    a thinking or redacted thinking block — is passed over for the last one that does; a
    blank string content is left as it is.
    Returns ``messages``.
    """
    marked = [
        block
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and "cache_control" in block
    ]
    if not messages:
        return messages
    last = messages[-1]
    content = last.get("content")
    if isinstance(content, str):
        if not content.strip():
            return messages
        content = last["content"] = [{"type": "text", "text": content}]
    targets = [block for block in content or () if isinstance(block, dict) and _markable(block)]
    if not targets:
        return messages
    target = targets[-1]
    if marked and marked[-1] is not target:
        del marked[-1]["cache_control"]  # the previous end: the new one replaces it
    target["cache_control"] = {"type": "ephemeral"}
    return messages


def _openai_tools(tools: tuple[r.ToolDefinition, ...], *, nested: bool) -> list[dict[str, Any]]:
    _check_tools(tools)
    out: list[dict[str, Any]] = []
    for t in tools:
        fn: dict[str, Any] = {"name": t.name, "description": t.description, "parameters": _schema(t)}
        if nested:
            out.append({"type": "function", "function": fn})
        else:
            # Responses treats a function tool without ``strict`` as strict where its schema
            # allows (Chat Completions as not strict): every optional property becomes
            # required, and the model fills the ones it meant to leave out with "" or 0.
            # ``strict: false`` keeps the schema's meaning, as Chat Completions reads it.
            out.append({"type": "function", **fn, "strict": False})
    return out


def _openai_system(prompt: Prompt) -> str:
    """The cacheable prefix as one system text, without blank sections.

    A section of only whitespace (a policy template that rendered empty) adds nothing the
    model can read; sent, it was a system message of whitespace, or whitespace and a blank
    line before working memory. Left out, a prompt without other prefix text has no
    system message at all, as when there is no policy.
    """
    return SEPARATOR.join(s.text for s in _prefix(prompt) if s.text.strip())


def _openai_turn(prompt: Prompt) -> list[tuple[str, _Call | None, str]]:
    """The TurnScoped text as (user text, the call after it, the id it is sent under).

    Calls are native where the prompt defines tools. Runs of text between two calls are
    joined back: without calls there is one, exactly the TurnScoped text. The last
    entry's call is ``None``.
    """
    out: list[tuple[str, _Call | None]] = []
    text = ""
    for piece in _turn_pieces(prompt, native=bool(prompt.tools)):
        if isinstance(piece, _Text):
            text += piece.text
        else:
            out.append((text, piece))
            text = ""
    out.append((text, None))
    ids = iter(_call_ids([call for _, call in out if call is not None], _openai_ok))
    return [(text, call, next(ids) if call is not None else "") for text, call in out]


def _openai_ok(own: str) -> bool:
    return 0 < len(own) <= _OPENAI_ID_MAX


def _openai_request(
    prompt: Prompt,
    *,
    model: str,
    field: str,
    nested: bool,
    pair: Callable[[_Call, str], list[dict[str, Any]]],
) -> dict[str, Any]:
    """The request both OpenAI APIs share: a system message holding the cacheable prefix,
    then user text with each history call as the ``pair`` of entries the API sends it as,
    in ``field``; the tools and the routing key."""
    entries: list[dict[str, Any]] = []
    prefix = _openai_system(prompt)
    if prefix:
        entries.append({"role": "system", "content": prefix})
    turn = _openai_turn(prompt)
    for text, call, call_id in turn:
        # A prompt whose turn's own work ends with a call ends with its result: no empty
        # user message after it (only a prompt with no calls and no text sends one).
        if text or len(turn) == 1:
            entries.append({"role": "user", "content": text})
        if call is not None:
            entries.extend(pair(call, call_id))
    request: dict[str, Any] = {"model": model, field: entries}
    if prompt.tools:
        request["tools"] = _openai_tools(prompt.tools, nested=nested)
    request["prompt_cache_key"] = _key(prompt, MAX_OPENAI_CACHE_KEY)
    return request


def _chat_pair(piece: _Call, call_id: str) -> list[dict[str, Any]]:
    function = {"name": piece.call.tool, "arguments": _arguments(piece.call)}
    tool_call = {"id": call_id, "type": "function", "function": function}
    return [
        {"role": "assistant", "content": None, "tool_calls": [tool_call]},
        {"role": "tool", "tool_call_id": call_id, "content": piece.output},
    ]


def _responses_pair(piece: _Call, call_id: str) -> list[dict[str, Any]]:
    call = {"type": "function_call", "call_id": call_id, "name": piece.call.tool}
    return [
        {**call, "arguments": _arguments(piece.call)},
        {"type": "function_call_output", "call_id": call_id, "output": piece.output},
    ]


def to_openai_chat(prompt: Prompt, *, model: str) -> dict[str, Any]:
    """An OpenAI Chat Completions request body for this prompt.

    The history's tool calls are assistant ``tool_calls`` each followed by its ``tool``
    message, under the call's own id; the text around them is user messages.
    """
    return _openai_request(prompt, model=model, field="messages", nested=True, pair=_chat_pair)


def to_openai_responses(prompt: Prompt, *, model: str) -> dict[str, Any]:
    """An OpenAI Responses request body for this prompt.

    The history's tool calls are ``function_call`` items each followed by its
    ``function_call_output``, under the call's own id; the text around them is user items.
    """
    return _openai_request(prompt, model=model, field="input", nested=False, pair=_responses_pair)


# --------------------------------------------------------------------------- the model's tool calls

#: The integers the ledger stores (msgpack: int64 and uint64).
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1


def _no_constant(name: str) -> NoReturn:
    # json.loads accepts NaN, Infinity and -Infinity, which are not JSON.
    raise ValueError(f"{name} is not a JSON value")


def _unrecordable(value: Any) -> str | None:
    """Why the ledger cannot store a decoded JSON value (naming where in it), or None."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        at = f" at `{where}`" if where else ""
        if isinstance(item, dict):
            stack.extend((v, f"{where}.{k}" if where else str(k)) for k, v in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((v, f"{where}[{i}]") for i, v in reversed(list(enumerate(item))))
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return f"hold text that is not valid UTF-8 (a lone surrogate escape such as \\ud800){at}"
        elif isinstance(item, float) and not math.isfinite(item):
            return f"hold a number too large for JSON ({item!r}){at}: send it as a string"
        elif isinstance(item, int) and not isinstance(item, bool) and not _INT_MIN <= item <= _INT_MAX:
            return f"hold an integer beyond 64 bits{at}: send it as a string"
    return None


def parse_tool_arguments(tool: str, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments of a model's tool call as the dict ``Turn.tool`` records.

    ``arguments`` is what the provider returned: OpenAI's ``function.arguments`` (Chat
    Completions) or ``arguments`` (Responses) — a JSON string the model wrote, which may
    be cut off (``finish_reason="length"``) or otherwise malformed — or an already
    decoded object (Anthropic's ``input``). An empty string or None is ``{}`` (a call
    without arguments). Raises :class:`InvalidToolArguments`, whose text is written for
    the model, when the text is not JSON, is JSON but not an object, holds ``NaN`` or an
    infinity (``json.loads`` accepts those) or what the ledger cannot store (an integer
    beyond 64 bits, a lone surrogate) — ``Turn.tool`` would otherwise raise
    ``InvalidRecord`` and end the turn over the model's mistake. ``tool`` names the tool
    in that text. Arguments of another type are the caller's mistake: UsageError.
    """
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments, parse_constant=_no_constant)
        except RecursionError:
            raise InvalidToolArguments(tool, arguments, "are nested too deeply to decode") from None
        except ValueError as exc:
            raise InvalidToolArguments(tool, arguments, f"are not valid JSON ({exc})") from None
    elif isinstance(arguments, Mapping):
        value = dict(arguments)
    else:
        raise UsageError(
            f"parse_tool_arguments({tool!r}, ...): arguments must be the JSON text the provider "
            f"returned (a str), a dict or None, not {type(arguments).__name__}"
        )
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number"
        )
        raise InvalidToolArguments(tool, arguments, f"are {kind}, not a JSON object")
    problem = _unrecordable(value)
    if problem is not None:
        raise InvalidToolArguments(tool, arguments, problem)
    return value


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def openai_assistant_message(message: Any) -> dict[str, Any]:
    """The model's Chat Completions message as the assistant message of the next request.

    ``message`` is ``response.choices[0].message`` (an SDK object or its dict). The result
    holds only what the request accepts: ``role``, ``content`` (``None`` beside tool
    calls, ``""`` for a message without either), ``refusal`` when there is one, and
    ``tool_calls`` with each call's id, name and arguments. Arguments that
    :func:`parse_tool_arguments` refuses are sent back as ``"{}"``: OpenAI-compatible
    servers (vLLM, llama.cpp, SGLang) parse the arguments in the history and answer 400
    for every later request of the conversation otherwise. The daemon answers such a
    call with the :class:`InvalidToolArguments` text, which quotes what the model sent.
    Append the result after the prompt's messages, then one ``{"role": "tool",
    "tool_call_id": ..., "content": ...}`` per call, in order.
    """
    content = _field(message, "content")
    calls = _field(message, "tool_calls") or ()
    out: dict[str, Any] = {"role": "assistant", "content": content if content is not None or calls else ""}
    refusal = _field(message, "refusal")
    if refusal is not None:
        out["refusal"] = refusal
    if calls:
        sent = []
        for call in calls:
            function = _field(call, "function")
            name = _field(function, "name")
            arguments = _field(function, "arguments")
            try:
                parse_tool_arguments(name, arguments)
            except InvalidToolArguments:
                arguments = "{}"
            sent.append(
                {
                    "id": _field(call, "id"),
                    "type": _field(call, "type") or "function",
                    "function": {"name": name, "arguments": arguments if arguments is not None else "{}"},
                }
            )
        out["tool_calls"] = sent
    return out
