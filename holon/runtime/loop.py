"""A ready turn loop: one call runs a turn to its end through a provider's SDK client.

``run_turn(turn, model, tools)`` (``await arun_turn(...)`` with an async client) runs the
model rounds of one turn: before every call it takes the prompt from ``turn.context()``
and converts it with the provider adapter of :mod:`holon.context.adapters`, appends the
model's rounds after it (starting over when the prompt was rendered again), records what
the model said, runs the tools it called through the write-ahead log
(``turn.tool(...).run(...)``), answers the recall tools with ``turn.recall``, records
every call's usage as the provider reported it (a :class:`~holon.records.ModelCall`) and
stops when the model calls no tool, or at the round cap (recorded as a ``failure`` brief).

The provider is one of three dialects, each holding an injected SDK client —
``anthropic.Anthropic`` / ``AsyncAnthropic``, ``openai.OpenAI`` / ``AsyncOpenAI`` or any
object with the same methods: :class:`AnthropicMessages`, :class:`OpenAIChat`,
:class:`OpenAIResponses`. This module imports no SDK; it reads the SDK's response
objects by attribute (their dict form works too).

The model's mistakes are answers, not exceptions: arguments that do not parse, a tool
that does not exist, arguments the function does not take and an exception the tool
raises are each recorded as an ``error`` result whose text is sent back to the model.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import msgspec

import holon.records as r
from holon.context import (
    Prompt,
    cache_last_block,
    openai_assistant_message,
    parse_tool_arguments,
    to_anthropic_messages,
    to_openai_chat,
    to_openai_responses,
)
from holon.errors import InvalidToolArguments, UsageError
from holon.runtime.calls import ToolCall
from holon.runtime.recall import RECALL_TOOL_NAMES
from holon.runtime.tools import Tool, Tools
from holon.runtime.turn import Turn

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "AnthropicMessages",
    "ModelDialect",
    "OpenAIChat",
    "OpenAIResponses",
    "ToolRequest",
    "TurnRun",
    "Usage",
    "arun_turn",
    "run_turn",
]

#: Model rounds one turn may take before the loop stops it (a ``failure`` brief says so).
DEFAULT_MAX_ROUNDS: Final = 25

#: The API a dialect calls, as its ``model_call`` records name it (a dialect of one's own
#: names its own).
Provider = str


def _field(obj: Any, name: str) -> Any:
    """An SDK object's attribute, or a dict's key (a recorded or hand-built response)."""
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _plain(item: Any) -> dict[str, Any]:
    """An SDK response item as the dict a request takes back (fields without a value left out)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if dump is None:
        raise UsageError(f"a response item of type {type(item).__name__} is neither a dict nor an SDK model")
    value = dump(mode="json", exclude_none=True)
    assert isinstance(value, dict)
    return value


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """A call's usage as the provider reported it, in :class:`~holon.records.ModelCall`'s terms.

    ``input_tokens`` counts every input token, cache reads and writes included; a field
    the provider did not report is None.
    """

    input_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None


class ToolRequest(msgspec.Struct, frozen=True):
    """One tool call the model asked for: the provider's id, the tool and its raw arguments."""

    id: str
    name: str
    arguments: Any  # a JSON string (OpenAI) or an object (Anthropic), as the provider sent it


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """What one response says: the model's text, its tool calls, usage, id, why it stopped."""

    text: str
    calls: tuple[ToolRequest, ...]
    usage: Usage
    response_id: str | None
    stop_reason: str | None


class ModelDialect(Protocol):
    """How one provider API is called: the request from holon's prompt, and its response read.

    A dialect holds the request being built in a turn (holon's prompt, then the rounds the
    loop appends). :func:`run_turn` drives it; a provider of another shape implements these.
    """

    provider: Provider
    model: str
    #: The prompt of the previous call and holon's estimate of its request's tokens.
    sent: tuple[Prompt, int] | None

    def begin(self, prompt: Prompt) -> None:
        """Start the request over from a (newly rendered) prompt."""

    def request(self) -> dict[str, Any]:
        """The keyword arguments of the next call: holon's prompt and the rounds after it."""

    def call(self, request: dict[str, Any]) -> Any:
        """Call the client (an async client returns an awaitable)."""

    def read(self, response: Any) -> Reply:
        """Read the response, appending the model's round to the request."""

    def answer(self, results: list[tuple[ToolRequest, ToolCall]]) -> None:
        """Append the tool results of the round, in the order the model called the tools."""


class _Dialect:
    """What the three dialects share: the client, the model, the output cap, extra parameters.

    ``request`` holds further parameters of every call (``temperature``, ``reasoning``, ...).
    """

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        max_tokens: int | None = None,
        request: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise UsageError(f"model must be the provider's model name, not {model!r}")
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.extra = dict(request or {})
        self.sent: tuple[Prompt, int] | None = None
        self._base: dict[str, Any] = {}
        self._messages: list[dict[str, Any]] = []


class AnthropicMessages(_Dialect):
    """Anthropic Messages (``client.messages.create``), with cache breakpoints."""

    provider: Provider = "anthropic"

    def __init__(
        self, client: Any, *, model: str, max_tokens: int, request: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(client, model=model, max_tokens=max_tokens, request=request)
        self.max_tokens: int = max_tokens

    def begin(self, prompt: Prompt) -> None:
        self._base = to_anthropic_messages(prompt, model=self.model, max_tokens=self.max_tokens)
        self._messages = self._base.pop("messages")

    def request(self) -> dict[str, Any]:
        # Rounds are appended after holon's prompt; the end breakpoint moves to the newest
        # block, so each call reads what the previous one wrote to the cache.
        return {**self._base, **self.extra, "messages": cache_last_block(self._messages)}

    def call(self, request: dict[str, Any]) -> Any:
        return self.client.messages.create(**request)

    def read(self, response: Any) -> Reply:
        blocks = [_anthropic_block(b) for b in _field(response, "content") or ()]
        if blocks:
            self._messages.append({"role": "assistant", "content": blocks})
        text = "".join(b["text"] for b in blocks if b.get("type") == "text")
        calls = tuple(
            ToolRequest(b["id"], b["name"], b.get("input")) for b in blocks if b.get("type") == "tool_use"
        )
        usage = _field(response, "usage")
        read = _int(_field(usage, "cache_read_input_tokens"))
        written = _int(_field(usage, "cache_creation_input_tokens"))
        uncached = _int(_field(usage, "input_tokens"))
        total = None if uncached is None else uncached + (read or 0) + (written or 0)
        return Reply(
            text=text,
            calls=calls,
            usage=Usage(
                input_tokens=total,
                cache_read_tokens=read,
                cache_write_tokens=written,
                output_tokens=_int(_field(usage, "output_tokens")),
            ),
            response_id=_field(response, "id"),
            stop_reason=_field(response, "stop_reason"),
        )

    def answer(self, results: list[tuple[ToolRequest, ToolCall]]) -> None:
        content: list[dict[str, Any]] = []
        for request, call in results:
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": request.id, "content": call.output}
            if call.result is not None and call.result.status != "ok":
                block["is_error"] = True
            content.append(block)
        self._messages.append({"role": "user", "content": content})


#: The fields a request takes back of each kind of response block (a response's text
#: block also carries ``citations``, a tool_use block ``caller`` and the like).
_ANTHROPIC_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "text": ("type", "text"),
    "tool_use": ("type", "id", "name", "input"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
}


def _anthropic_block(block: Any) -> dict[str, Any]:
    """A response content block as a request takes it back (only the fields a request accepts)."""
    plain = _plain(block)
    keep = _ANTHROPIC_FIELDS.get(str(plain.get("type")))
    if keep is None:
        return plain
    return {key: plain[key] for key in keep if key in plain}


class OpenAIChat(_Dialect):
    """OpenAI Chat Completions (``client.chat.completions.create``), keyed by ``prompt_cache_key``."""

    provider: Provider = "openai-chat"

    def begin(self, prompt: Prompt) -> None:
        self._base = to_openai_chat(prompt, model=self.model)
        self._messages = self._base.pop("messages")

    def request(self) -> dict[str, Any]:
        request = {**self._base, **self.extra, "messages": self._messages}
        if self.max_tokens is not None:
            request["max_completion_tokens"] = self.max_tokens
        return request

    def call(self, request: dict[str, Any]) -> Any:
        return self.client.chat.completions.create(**request)

    def read(self, response: Any) -> Reply:
        choices = _field(response, "choices") or ()
        if not choices:
            raise UsageError(
                f"the Chat Completions response {_field(response, 'id')!r} has no choice to read"
            )
        message = _field(choices[0], "message")
        self._messages.append(openai_assistant_message(message))
        calls = tuple(
            ToolRequest(_field(c, "id"), _field(function, "name"), _field(function, "arguments"))
            for c in _field(message, "tool_calls") or ()
            if (function := _field(c, "function")) is not None
        )
        usage = _field(response, "usage")
        details = _field(usage, "prompt_tokens_details")
        return Reply(
            text=_field(message, "content") or "",
            calls=calls,
            usage=Usage(
                input_tokens=_int(_field(usage, "prompt_tokens")),
                cache_read_tokens=_int(_field(details, "cached_tokens")),
                cache_write_tokens=_int(_field(details, "cache_write_tokens")),
                output_tokens=_int(_field(usage, "completion_tokens")),
            ),
            response_id=_field(response, "id"),
            stop_reason=_field(choices[0], "finish_reason"),
        )

    def answer(self, results: list[tuple[ToolRequest, ToolCall]]) -> None:
        for request, call in results:
            self._messages.append({"role": "tool", "tool_call_id": request.id, "content": call.output})


class OpenAIResponses(_Dialect):
    """OpenAI Responses (``client.responses.create``), stateless: holon's prompt is the state."""

    provider: Provider = "openai-responses"

    def begin(self, prompt: Prompt) -> None:
        self._base = to_openai_responses(prompt, model=self.model)
        self._messages = self._base.pop("input")

    def request(self) -> dict[str, Any]:
        request = {**self._base, **self.extra, "input": self._messages}
        if self.max_tokens is not None:
            request["max_output_tokens"] = self.max_tokens
        return request

    def call(self, request: dict[str, Any]) -> Any:
        return self.client.responses.create(**request)

    def read(self, response: Any) -> Reply:
        # Every output item goes back as it came (a reasoning model needs its reasoning items).
        output = [_plain(item) for item in _field(response, "output") or ()]
        self._messages.extend(output)
        text = "".join(
            part.get("text", "")
            for item in output
            if item.get("type") == "message"
            for part in item.get("content") or ()
            if part.get("type") == "output_text"
        )
        calls = tuple(
            ToolRequest(item["call_id"], item["name"], item.get("arguments"))
            for item in output
            if item.get("type") == "function_call"
        )
        usage = _field(response, "usage")
        details = _field(usage, "input_tokens_details")
        status = _field(response, "status")
        incomplete = _field(_field(response, "incomplete_details"), "reason")
        return Reply(
            text=text,
            calls=calls,
            usage=Usage(
                input_tokens=_int(_field(usage, "input_tokens")),
                cache_read_tokens=_int(_field(details, "cached_tokens")),
                cache_write_tokens=_int(_field(details, "cache_write_tokens")),
                output_tokens=_int(_field(usage, "output_tokens")),
            ),
            response_id=_field(response, "id"),
            stop_reason=incomplete or status,
        )

    def answer(self, results: list[tuple[ToolRequest, ToolCall]]) -> None:
        for request, call in results:
            self._messages.append(
                {"type": "function_call_output", "call_id": request.id, "output": call.output}
            )


class TurnRun(msgspec.Struct, kw_only=True):
    """What :func:`run_turn` did: rounds, the model's last words, the calls it ran, the usage."""

    rounds: int = 0
    #: The text of the model's last response (its answer, when it stopped calling tools).
    text: str = ""
    #: True when the round cap stopped the turn (a ``failure`` brief records it).
    capped: bool = False
    calls: list[ToolCall] = msgspec.field(default_factory=list)
    #: The seqs of the turn's ``model_call`` records, one per call.
    model_calls: list[int] = msgspec.field(default_factory=list)


def _shared_sections(previous: Prompt, current: Prompt) -> int:
    """Tokens of the whole leading sections two prompts share (what a provider cache can hold)."""
    shared = 0
    for index, (before, now) in enumerate(zip(previous.sections, current.sections, strict=False)):
        if before.name != now.name or before.text != now.text:
            break
        shared += now.tokens + (1 if index else 0)
    return shared


class _Loop:
    """The provider-neutral steps of a turn's loop, shared by the sync and the async driver."""

    def __init__(self, turn: Turn, model: ModelDialect, tools: Tools, max_rounds: int) -> None:
        if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
            raise UsageError(f"max_rounds must be a positive integer, not {max_rounds!r}")
        if not isinstance(tools, Tools):
            raise UsageError(f"tools must be a holon.runtime.Tools registry, not {type(tools).__name__}")
        self.turn = turn
        self.model = model
        self.tools = tools
        self.max_rounds = max_rounds
        self.run = TurnRun()
        self._held: Prompt | None = None
        self._round = 0  # calls made on the held prompt

    def prepare(self) -> dict[str, Any]:
        prompt = self.turn.context()
        if prompt is not self._held:
            if self._held is None:
                self.tools.check_offered(prompt.tools)
            self._held = prompt
            self._round = 0
            self.model.begin(prompt)
        self._round += 1
        return self.model.request()

    def record(self, response: Any) -> Reply | None:
        """Record the response's usage and words; the tool calls to run (None: the turn is done)."""
        turn, prompt = self.turn, self._held
        assert prompt is not None
        reply = self.model.read(response)
        estimate = prompt.total_tokens + turn.round_tokens
        # The previous call of this dialect (this turn's or an earlier one's), as holon
        # estimates it: what of this request a provider cache can already hold.
        sent = self.model.sent
        if sent is None:
            cached = 0
        elif sent[0] is prompt:
            cached = sent[1]  # the previous call's request is this one's start
        else:
            cached = _shared_sections(sent[0], prompt)
        self.model.sent = (prompt, estimate)
        seq = turn.record_model_call(
            r.ModelCall(
                provider=self.model.provider,
                model=self.model.model,
                prompt_seq=turn.prompt_seq if turn.prompt_seq is not None else -1,
                round=self._round,
                input_tokens=reply.usage.input_tokens,
                cache_read_tokens=reply.usage.cache_read_tokens,
                cache_write_tokens=reply.usage.cache_write_tokens,
                output_tokens=reply.usage.output_tokens,
                estimated_input_tokens=estimate,
                estimated_cache_read_tokens=min(cached, estimate),
                response_id=reply.response_id if isinstance(reply.response_id, str) else None,
                stop_reason=reply.stop_reason if isinstance(reply.stop_reason, str) else None,
            )
        )
        self.run.rounds += 1
        self.run.model_calls.append(seq)
        self.run.text = reply.text
        if reply.text:
            turn.record_message(reply.text)
        return reply if reply.calls else None

    def start(self, request: ToolRequest) -> tuple[ToolCall, Callable[[], Any] | None]:
        """Record the call's intent; the function to run (None: it is answered already)."""
        turn = self.turn
        try:
            args = parse_tool_arguments(request.name, request.arguments)
        except InvalidToolArguments as exc:  # the model's mistake: recorded, nothing run
            call = turn.tool(request.name, exc.recorded_args)
            call.finish(str(exc), status="error")
            return call, None
        if request.name in RECALL_TOOL_NAMES and self.tools.recall:
            return turn.recall(request.name, args), None
        tool = self.tools.get(request.name)
        key = tool.idempotency_key(args) if tool is not None and tool.idempotency_key is not None else None
        call = turn.tool(request.name, args, idempotency_key=key)
        if call.done:  # replayed by its idempotency key: not run again
            return call, None
        if tool is None:
            offered = ", ".join(t.name for t in self.tools.definitions)
            call.finish(f"there is no tool named {request.name!r}; the tools are: {offered}", status="error")
            return call, None
        problem = _binding_problem(tool, args)
        if problem is not None:
            call.finish(problem, status="error")
            return call, None
        return call, lambda: tool.function(**args)

    def answer(self, results: list[tuple[ToolRequest, ToolCall]]) -> None:
        self.run.calls.extend(call for _, call in results)
        self.model.answer(results)

    def cap(self) -> TurnRun:
        self.run.capped = True
        self.turn.record_brief("failure", f"stopped after {self.max_rounds} model rounds")
        return self.run


def _binding_problem(tool: Tool, args: dict[str, Any]) -> str | None:
    """Why the function cannot take the model's arguments (in words for the model), or None."""
    try:
        inspect.signature(tool.function).bind(**args)
    except TypeError as exc:
        return f"{tool.name}: the arguments do not fit the tool ({exc}); call it as its schema says"
    except ValueError:  # a callable without a signature: let the call itself say
        return None
    return None


def _finish(call: ToolCall, value: Any) -> None:
    """Record a tool's return value as its result (JSON text for a value that is not text)."""
    if value is None:
        value = ""
    elif not isinstance(value, str) and not (
        isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
    ):
        try:
            value = msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError) as exc:
            # The effect ran: its result is recorded, as an error naming what came back.
            call.finish(f"{call.tool} ran, but returned what JSON cannot hold ({exc})", status="error")
            return
    call.run(lambda: value)


def _failed(call: ToolCall, exc: Exception) -> None:
    """Record a tool's exception as an ``error`` result (its text goes back to the model)."""

    def rethrow() -> Any:
        raise exc

    with contextlib.suppress(Exception):
        call.run(rethrow)


def _not_awaitable(value: Any, what: str) -> Any:
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        raise UsageError(f"{what} returned an awaitable: with an async client or async tools, use arun_turn")
    return value


def run_turn(
    turn: Turn, model: ModelDialect, tools: Tools, *, max_rounds: int = DEFAULT_MAX_ROUNDS
) -> TurnRun:
    """Run the turn's model rounds to the end with a sync client (see the module docstring)."""
    asynchronous = [tool.name for tool in tools if tool.is_async] if isinstance(tools, Tools) else []
    if asynchronous:
        raise UsageError(f"tools {', '.join(asynchronous)} are async: run the turn with arun_turn")
    loop = _Loop(turn, model, tools, max_rounds)
    for _ in range(max_rounds):
        response = _not_awaitable(model.call(loop.prepare()), f"{type(model).__name__}.call")
        reply = loop.record(response)
        if reply is None:
            return loop.run
        results = []
        for request in reply.calls:
            call, function = loop.start(request)
            if function is not None:
                try:
                    value = function()
                except Exception as exc:
                    _failed(call, exc)
                else:
                    _finish(call, value)
            results.append((request, call))
        loop.answer(results)
    return loop.cap()


async def arun_turn(
    turn: Turn, model: ModelDialect, tools: Tools, *, max_rounds: int = DEFAULT_MAX_ROUNDS
) -> TurnRun:
    """:func:`run_turn` with an async client (``AsyncAnthropic``, ``AsyncOpenAI``); async tools are awaited.

    A sync tool is called as it is, in the event loop's thread (the agent is driven by one
    thread at a time); wrap a slow one in ``asyncio.to_thread`` yourself.
    """
    loop = _Loop(turn, model, tools, max_rounds)
    for _ in range(max_rounds):
        response = await _awaited(model.call(loop.prepare()))
        reply = loop.record(response)
        if reply is None:
            return loop.run
        results = []
        for request in reply.calls:
            call, function = loop.start(request)
            if function is not None:
                try:
                    value = await _awaited(function())
                except Exception as exc:
                    _failed(call, exc)
                else:
                    _finish(call, value)
            results.append((request, call))
        loop.answer(results)
    return loop.cap()


async def _awaited(value: Awaitable[Any] | Any) -> Any:
    return await value if inspect.isawaitable(value) else value
