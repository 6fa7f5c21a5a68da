"""The daemon's tools as the model is offered them: Python callables with a JSON schema.

A :class:`Tools` registry holds each tool's callable and its :class:`ToolDefinition`
(name, description, JSON schema of its arguments). The schema is given, or derived from
the callable's signature: its type hints (``str``, ``int``, ``float``, ``bool``,
``list[...]``, ``dict[str, ...]``, ``Literal[...]``, ``X | None``) and defaults
(a parameter with a default is optional), ``Annotated[T, "text"]`` for a parameter's
description, and the docstring's first paragraph for the tool's. ``tools.policy(text)``
builds the :class:`SystemPolicy` that offers them (and, by default, the recall tools
``holon_get`` / ``holon_search``, which :mod:`holon.runtime.loop` routes to
:meth:`Turn.recall`).

Nothing here calls a tool; :mod:`holon.runtime.loop` does, through the write-ahead log.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import msgspec

import holon.records as r
from holon.errors import UsageError
from holon.runtime.recall import RECALL_TOOL_NAMES, RECALL_TOOLS

__all__ = ["Tool", "Tools", "schema_of"]

#: What a tool returns: its output text, ``(output, exit_code)`` (non-zero records an
#: ``error`` result), None (no output) or any other JSON value (sent as its JSON text).
ToolFunction = Callable[..., Any]
#: A call's idempotency key from its arguments (None: that call is not keyed).
KeyFunction = Callable[[dict[str, Any]], str | None]

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _type_schema(hint: Any, where: str) -> dict[str, Any]:
    """The JSON schema of one type hint, or UsageError naming the hint that has none."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *meta = get_args(hint)
        schema = _type_schema(inner, where)
        texts = [m for m in meta if isinstance(m, str)]
        if texts:
            schema["description"] = texts[0]
        return schema
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if hint is Any:
        return {}
    if origin is Literal:
        values = list(get_args(hint))
        kinds = {_SCALARS.get(type(v)) for v in values}
        enum: dict[str, Any] = {"enum": values}
        if len(kinds) == 1 and None not in kinds:
            enum["type"] = kinds.pop()
        return enum
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple):
        args = get_args(hint)
        items = args[0] if args else None  # tuple[int, ...] as list[int]
        schema = {"type": "array"}
        if items is not None:
            schema["items"] = _type_schema(items, where)
        return schema
    if origin is dict or hint is dict:
        args = get_args(hint)
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _type_schema(args[1], where)
        return schema
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        if len(options) == 1:
            return _type_schema(options[0], where)
        return {"anyOf": [_type_schema(a, where) for a in options]}
    raise UsageError(
        f"{where}: no JSON schema for the type {hint!r}; use str, int, float, bool, list[...], "
        "dict[str, ...], Literal[...] or X | None, or pass parameters={...} (a JSON schema) to tools.add"
    )


def _description(fn: ToolFunction) -> str:
    doc = inspect.getdoc(fn) or ""
    return doc.split("\n\n", 1)[0].replace("\n", " ").strip()


def schema_of(fn: ToolFunction) -> dict[str, Any]:
    """The JSON schema of ``fn``'s keyword arguments, from its type hints and defaults."""
    name = getattr(fn, "__name__", repr(fn))
    try:
        hints = get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise UsageError(
            f"tool {name}: its type hints do not resolve ({exc}); pass parameters={{...}}"
        ) from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise UsageError(
                f"tool {name}: parameter {param.name!r} cannot be given by name ({param.kind.description}); "
                "a tool is called with the model's arguments as keywords"
            )
        if param.name not in hints:
            raise UsageError(
                f"tool {name}: parameter {param.name!r} has no type hint to derive its schema from; "
                "annotate it or pass parameters={...}"
            )
        properties[param.name] = _type_schema(hints[param.name], f"tool {name}, parameter {param.name!r}")
        if param.default is param.empty:
            required.append(param.name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


class Tool(msgspec.Struct, frozen=True):
    """One registered tool: its definition, its callable and how to key its calls."""

    definition: r.ToolDefinition
    function: ToolFunction
    #: The idempotency key of a call from its arguments (None: calls are not keyed). A
    #: keyed call whose key already has a result is not run again (docs/daemon-guide.md).
    idempotency_key: KeyFunction | None = None

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.function)


class Tools:
    """The tools a daemon offers its model, by name, in the order they were added."""

    def __init__(self, *, recall: bool = True) -> None:
        #: Whether the recall tools are offered too (routed to :meth:`Turn.recall`).
        self.recall = recall
        self._tools: dict[str, Tool] = {}

    def add(
        self,
        function: ToolFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        idempotency_key: KeyFunction | None = None,
    ) -> ToolFunction:
        """Register ``function`` as a tool; returns it (so it also works as a decorator's body).

        ``name`` defaults to the function's name, ``description`` to its docstring's first
        paragraph, ``parameters`` (a JSON schema) to :func:`schema_of` the function.
        """
        if not callable(function):
            raise UsageError(f"tools.add takes a callable, not {type(function).__name__}")
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if tool_name in RECALL_TOOL_NAMES and self.recall:
            raise UsageError(
                f"{tool_name!r} is a recall tool holon answers itself; name the tool otherwise, or build "
                "Tools(recall=False)"
            )
        if tool_name in self._tools:
            raise UsageError(f"tool {tool_name!r} is registered twice; the providers refuse duplicate names")
        text = description if description is not None else _description(function)
        if not text:
            raise UsageError(
                f"tool {tool_name!r} has no description: give the function a docstring or pass "
                "description=..., the model picks tools by it"
            )
        schema = dict(parameters) if parameters is not None else schema_of(function)
        definition = r.ToolDefinition(name=tool_name, description=text, parameters=schema)
        self._tools[tool_name] = Tool(definition, function, idempotency_key)
        return function

    def tool(
        self, *, name: str | None = None, idempotency_key: KeyFunction | None = None
    ) -> Callable[[ToolFunction], ToolFunction]:
        """``@tools.tool()`` registers the function below it, with the schema from its hints."""

        def register(function: ToolFunction) -> ToolFunction:
            return self.add(function, name=name, idempotency_key=idempotency_key)

        return register

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def get(self, name: str) -> Tool | None:
        """The registered tool of that name (None: no such tool, or a recall tool)."""
        return self._tools.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    @property
    def definitions(self) -> tuple[r.ToolDefinition, ...]:
        """What the model is offered: every registered tool, then the recall tools."""
        own = tuple(t.definition for t in self._tools.values())
        return own + (RECALL_TOOLS if self.recall else ())

    def policy(self, text: str) -> r.SystemPolicy:
        """The system policy offering these tools (pass it to ``Agent.open(policy=...)``)."""
        return r.SystemPolicy(text=text, tools=self.definitions)

    def check_offered(self, offered: tuple[r.ToolDefinition, ...]) -> None:
        """Raise UsageError unless the prompt offers exactly these tools (by name).

        A tool the prompt offers without a callable would be answered with an error on
        every call, and a registered one the prompt does not offer is never called: both
        are a policy built from something else than this registry.
        """
        names = {t.name for t in offered}
        ours = {t.name for t in self.definitions}
        missing, unknown = sorted(ours - names), sorted(names - ours)
        if missing or unknown:
            parts = []
            if unknown:
                parts.append(f"offers {', '.join(unknown)}, which no callable runs")
            if missing:
                parts.append(f"does not offer {', '.join(missing)}")
            raise UsageError(
                f"the prompt's system policy {' and '.join(parts)}: open the agent with "
                "policy=tools.policy(text), so the model is offered the tools the loop runs"
            )
