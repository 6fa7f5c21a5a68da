"""Import OpenAI chat-completions transcripts, including tau-bench's list-of-runs form.

Accepted documents (one JSON value per file):

* a list of chat messages (``{"role": ..., "content": ..., "tool_calls": [...]}``);
* an object with ``messages`` (and optionally ``tools``), as sent to the API;
* a list of runs, each an object holding its messages under ``traj`` (tau-bench's
  historical trajectories) or ``messages``; runs are imported one after another;
* JSON Lines of conversations, one ``{"messages": [...], "tools": [...]}`` object per
  line (OpenAI's fine-tuning files, and the many datasets in that form), imported one
  after another as the runs of a list are, and read a line at a time.

Chat messages carry no timestamps, so records get the synthetic clock. See
docs/importers.md for the full mapping.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from holon.importers._builder import ImportReport, ToolStatus, TranscriptBuilder
from holon.importers._effects import edit_targets
from holon.importers._shape import Node, decode_json_document, is_json_lines, iter_jsonl, try_json_document
from holon.records import Message, SystemPolicy, ToolDefinition

__all__ = ["FORMAT", "call_key", "join_key", "parse_openai_chat", "tool_definitions"]

FORMAT: Final = "openai-chat"
_HINT: Final = "is this really an OpenAI chat transcript (--from openai-chat)?"
_SHAPES: Final = (
    "not an OpenAI chat transcript: expected a list of messages, an object with `messages`, "
    "or a list of runs with `traj` or `messages`"
)


def parse_openai_chat(data: bytes, *, source: str) -> ImportReport:
    """Map an OpenAI chat transcript's bytes (a JSON document, or JSON Lines of conversations) to records."""
    root = try_json_document(data, source=source, format_hint=_HINT)
    if root is None and is_json_lines(data):
        return _conversation_lines(data, source)
    if root is None:
        # Not JSON Lines either: decoded again only to raise the document's own located error.
        root = decode_json_document(data, source=source, format_hint=_HINT)
    builder = TranscriptBuilder(format=FORMAT, source=source)
    if root.is_object():
        if not root.has("messages"):
            raise root.error(_SHAPES)
        builder.session(_run_id(root))
        _conversation(builder, root.field("messages"), _tools_of(root))
        return builder.finish()
    entries = list(root.items()) if isinstance(root.value, list) else None
    if entries is None:
        raise root.error(_SHAPES)
    # A run holds its messages; a Responses API item (`function_call`, `reasoning`) has a `type`.
    if entries and entries[0].is_object() and not entries[0].has("role") and not entries[0].has("type"):
        for run in entries:
            if not run.is_object():
                raise run.error("expected a run object with `traj` or `messages`")
            messages = run.get("traj") or run.get("messages")
            if messages is None:
                raise run.error("a run has neither `traj` nor `messages`")
            builder.session(_run_id(run))
            _conversation(builder, messages, _tools_of(run))
            builder.end_run()
        return builder.finish()
    builder.session(None)
    _conversation(builder, root, ())
    return builder.finish()


def _run_id(run: Node) -> str | None:
    """A run's own name: tau-bench's ``task_id`` (and ``trial``: a task is run several times), else None.

    Chat messages name no conversation, so a run without one is named by its place (``run <n>``).
    """
    fields = run.as_object()
    task = fields.get("task_id")
    if isinstance(task, bool) or not isinstance(task, int | str) or not str(task).strip():
        return None
    trial = fields.get("trial")
    has_trial = isinstance(trial, int | str) and not isinstance(trial, bool) and str(trial).strip()
    return f"task {task} trial {trial}" if has_trial else f"task {task}"


_LINE_SHAPE: Final = (
    "not an OpenAI chat conversation: a JSON Lines file holds one conversation per line, an object "
    "with `messages` (as OpenAI fine-tuning files do)"
)


def _conversation_lines(data: bytes, source: str) -> ImportReport:
    """JSON Lines of conversations (OpenAI fine-tuning files), each imported as a run of a list is.

    Lines are decoded one at a time: a training file can be far larger than any one conversation.
    """
    builder = TranscriptBuilder(format=FORMAT, source=source)
    for _, line in iter_jsonl(data, source=source, format_hint=_HINT):
        if not line.is_object() or not line.has("messages"):
            one_message = line.is_object() and line.has("role")
            # A file of one conversation's messages, one per line, has no way to say where a
            # conversation ends; the message says how to write it instead.
            raise line.error(
                f"{_LINE_SHAPE}; this line is one chat message, and a conversation's messages go in one "
                "JSON array"
                if one_message
                else _LINE_SHAPE
            )
        builder.session(_run_id(line))
        _conversation(builder, line.field("messages"), _tools_of(line))
        builder.end_run()
    return builder.finish()


def _tools_of(conversation: Node) -> tuple[ToolDefinition, ...]:
    """The tools a conversation object offers: ``tools``, or the legacy ``functions`` list."""
    return tool_definitions(conversation.get("tools") or conversation.get("functions"))


def tool_definitions(tools: Node | None) -> tuple[ToolDefinition, ...]:
    """Tool definitions from an OpenAI ``tools`` array (``{"type": "function", "function": ...}``)."""
    if tools is None:
        return ()
    definitions = []
    for tool in tools.items():
        spec = tool.get("function") or tool
        parameters = spec.get("parameters")
        definitions.append(
            ToolDefinition(
                name=spec.field("name").as_str(),
                description=spec.str_of("description"),
                parameters=parameters.as_object() if parameters is not None else {},
            )
        )
    return tuple(definitions)


def message_text(content: Node | None, builder: TranscriptBuilder) -> str:
    """The text of a chat ``content`` (a string, null, or a list of parts)."""
    if content is None:
        return ""
    if isinstance(content.value, str):
        return content.value
    parts: list[str] = []
    for part in content.items():
        if isinstance(part.value, str):
            parts.append(part.value)
            continue
        part_type = part.field("type").as_str()
        # A refusal part is what the model said instead of an answer: it is the message's text.
        text = part.get("refusal") if part_type == "refusal" else part.get("text")
        if text is not None:
            parts.append(text.as_str())
        else:
            builder.skip(f"content part:{part_type}")
    return "\n".join(parts)


def tool_arguments(arguments: Node | None) -> dict[str, Any]:
    """A call's arguments as an object; unparseable JSON is kept whole under ``arguments``.

    Models do emit malformed argument strings; the call still happened, so it is kept.
    """
    if arguments is None:
        return {}
    if arguments.is_object():
        return arguments.as_object()
    if not isinstance(arguments.value, str):
        # Not the API's JSON string (a runner logged it decoded, or a model wrote a bare value):
        # the call still happened, so the value is kept whole rather than refusing the file.
        return {"arguments": arguments.value}
    raw = arguments.as_str()
    try:
        value = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return {"arguments": raw}
    return value if isinstance(value, dict) else {"arguments": raw}


def _conversation(builder: TranscriptBuilder, messages: Node, tools: tuple[ToolDefinition, ...]) -> None:
    legacy: list[tuple[str, str]] = []  # (synthetic call id, function name) of `function_call`s
    if tools and not any(
        isinstance(message, dict) and message.get("role") in ("system", "developer")
        for message in messages.as_list()
    ):
        # The tools were offered from the first message on: with no system message to carry
        # them, they are a policy of their own before it, not one after the conversation ended.
        builder.emit(SystemPolicy(text="", tools=tools))
    for index, message in enumerate(messages.items()):
        if message.is_object() and not message.has("role") and message.has("type"):
            _response_item(builder, message, index)
            continue
        if not message.is_object() or not message.has("role"):
            raise message.error("not a chat message (no `role`) or Responses API item (no `type`)")
        role = message.field("role").as_str()
        _require_content(message, role)
        text = message_text(message.get("content"), builder)
        if role in ("system", "developer"):
            builder.emit(SystemPolicy(text=text, tools=tools))
        elif role == "user":
            builder.user_turn(text)
        elif role == "assistant":
            # `refusal` holds what the model said when it declined (and `content` is null then).
            text = "\n".join(t for t in (text, message.str_of("refusal")) if t)
            if text:
                builder.agent(Message(role="assistant", text=text))
            if message.has("audio"):
                builder.skip("audio")  # spoken output; audio is not imported (as images are not)
            if any(message.as_object().get(key) for key in _REASONING_KEYS):
                # The model's reasoning, as OpenAI-compatible servers return it: not imported, as
                # Claude Code's thinking blocks and Responses `reasoning` items are not, but counted.
                builder.skip("reasoning")
            _assistant_calls(builder, message, index, legacy)
        elif role == "tool":
            _tool_result(builder, call_key(message, "tool_call_id"), text)
        elif role == "function":
            name = message.field("name").as_str()
            match = next((pair for pair in legacy if pair[1] == name), None)
            if match is None:
                builder.skip("orphan tool result")
            else:
                legacy.remove(match)
                _tool_result(builder, match[0], text)
        else:
            builder.skip(f"role:{role}")


#: Where OpenAI-compatible servers put an assistant message's reasoning: `reasoning_content`
#: (DeepSeek, vLLM, LiteLLM), `reasoning` and `reasoning_details` (OpenRouter, Ollama, vLLM).
_REASONING_KEYS: Final = ("reasoning_content", "reasoning", "reasoning_details")
#: Roles whose message the API refuses without `content` (an assistant one may leave it null).
_CONTENT_REQUIRED: Final = frozenset({"system", "developer", "user", "tool"})
#: What stands in for an assistant message's `content` when it is null.
_ASSISTANT_CONTENT_STANDINS: Final = ("tool_calls", "function_call", "refusal", "audio")


def _require_content(message: Node, role: str) -> None:
    """Refuse a message with null or missing `content` where the chat API requires it.

    Only an assistant message may leave `content` null, and only when it says something
    else: tool calls, a legacy `function_call`, a `refusal` or `audio`. Anything else with no
    content is no message the API accepts or returns (a user message that says nothing cannot
    open a turn), so the file is refused where it is rather than imported as empty text.
    """
    if message.has("content"):
        return
    if role == "assistant":
        if any(message.as_object().get(key) for key in _ASSISTANT_CONTENT_STANDINS):
            return
        expected = "`content`, `tool_calls`, `function_call`, `refusal` or `audio`"
    elif role in _CONTENT_REQUIRED:
        expected = "`content` (a string or an array of content parts)"
    else:
        return  # a role holon does not import (counted as skipped) needs nothing
    missing = "null" if "content" in message.as_object() else "missing"
    article = "an" if role[:1] in ("a", "e", "i", "o", "u") else "a"
    raise message.error(
        f"{article} `{role}` message needs {expected}, but its `content` is {missing}: the chat API accepts "
        "no such message; fix or remove it",
        key="content",
    )


def call_key(node: Node, key: str) -> str:
    """The call id at ``key``, as the key joining a call and its result; a blank id is ``""``.

    The chat API always names a call, but OpenAI-compatible servers (Gemini's, LM Studio, some
    streaming proxies) send ``"id": ""``, and their runners answer with ``"tool_call_id": ""``.
    Such calls share the key ``""``: each id-less result answers the oldest id-less call, in
    the order the runner answered them, and never a call that has an id.
    """
    return join_key(node.field(key).as_str())


def join_key(call_id: str) -> str:
    """``call_id`` as the key joining a call and its result: ``""`` when blank (see :func:`call_key`)."""
    return call_id if call_id.strip() else ""


def _assistant_calls(
    builder: TranscriptBuilder, message: Node, index: int, legacy: list[tuple[str, str]]
) -> None:
    calls = message.get("tool_calls")
    if calls is not None:
        for position, call in enumerate(calls.items()):
            key = call_key(call, "id")
            # A blank id is derived from the call's place: the message and its position in it.
            call_id = key or f"tool_call-{index}.{position}"
            custom = call.get("custom") if call.str_of("type") == "custom" else None
            if custom is not None:
                # A custom (free-form) tool takes one text `input`, not JSON arguments.
                name = custom.tool_name("name", what="a custom tool call")
                builder.intent(key, name, _custom_input(custom), call_id=call_id)
                continue
            function = call.field("function")
            name = function.tool_name("name", what="a tool call's `function`")
            builder.intent(key, name, tool_arguments(function.get("arguments")), call_id=call_id)
    function_call = message.get("function_call")
    if function_call is not None:
        name = function_call.tool_name("name", what="a `function_call`")
        # The legacy API has no call ids: the message position names the call.
        call_id = f"function_call-{index}"
        legacy.append((call_id, name))
        builder.intent(call_id, name, tool_arguments(function_call.get("arguments")))


#: Responses API items that call a tool -> the item type of their output.
_RESPONSE_CALLS: Final = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}
_RESPONSE_OUTPUTS: Final = frozenset(_RESPONSE_CALLS.values())


def _response_item(builder: TranscriptBuilder, item: Node, index: int) -> None:
    """A Responses API item other than a message (messages have a `role` and read as chat messages).

    The Responses API (and the Agents SDK's ``to_input_list()``) writes a call and its output as
    items of their own, joined by ``call_id``; reasoning, built-in tool calls (web search, file
    search, computer use) and other items are skipped and counted (``item:<type>``).
    """
    kind = item.field("type").as_str()
    if kind not in _RESPONSE_CALLS and kind not in _RESPONSE_OUTPUTS:
        builder.skip(f"item:{kind}")
        return
    if not item.has("call_id"):
        raise item.error(
            f"a `{kind}` item has no `call_id`: the Responses API gives every call one, and a call's "
            "output is joined to it by it alone; fix or remove the item",
            key="call_id",
            hint=False,
        )
    key = call_key(item, "call_id")
    if kind in _RESPONSE_OUTPUTS:
        _tool_result(builder, key, message_text(item.field("output"), builder))
        return
    name = item.tool_name("name", what=f"a `{kind}` item")
    args = tool_arguments(item.get("arguments")) if kind == "function_call" else _custom_input(item)
    builder.intent(key, name, args, call_id=key or f"{kind}-{index}")


def _custom_input(custom: Node) -> dict[str, Any]:
    value = custom.as_object().get("input")
    return {} if value is None else {"input": value}


def _tool_result(builder: TranscriptBuilder, call_id: str, text: str) -> None:
    # Chat transcripts record no status; tau-bench and most function-calling runners
    # report a failed tool as a result string starting with "Error:", and tau-bench answers a
    # call of a tool it does not have "Unknown action <name>" (tau_bench/envs/base.py: Env.step).
    pending = builder.pending(call_id)
    unknown = pending is not None and text == f"Unknown action {pending.tool}"
    status: ToolStatus = "error" if text.startswith("Error:") or unknown else "ok"
    touched = edit_targets(pending.tool, pending.args) if pending is not None and status == "ok" else ()
    builder.result(call_id, status=status, output=text, touched_files=touched)
