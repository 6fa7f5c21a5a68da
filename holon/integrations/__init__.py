"""holon inside the frameworks agents are built with, each behind its own optional extra.

- :mod:`holon.integrations.mcp_server` (``pip install 'holon[mcp]'``) — ``holon mcp LEDGER``:
  the recall tools ``holon_search`` and ``holon_get`` over the Model Context Protocol, for
  any MCP client (Claude Code, Cursor, the OpenAI Agents SDK), read-only.
- :mod:`holon.integrations.openai_agents` (``pip install 'holon[openai-agents]'``) —
  :class:`~holon.integrations.openai_agents.HolonSession`, a ``Session`` of the OpenAI Agents
  SDK that records the run's items in a ledger and answers with holon's budgeted context.
- :mod:`holon.integrations.langgraph` (``pip install 'holon[langgraph]'``) —
  :class:`~holon.integrations.langgraph.HolonPreModelHook`, a ``pre_model_hook`` for
  LangGraph's ``create_react_agent`` that records the graph's messages and sends holon's
  context as ``llm_input_messages``.

Importing ``holon`` or this package imports none of these frameworks: each module imports
its own, and only when it is imported (docs/daemon-guide.md, "Frameworks").

What it may import: :mod:`holon.records`, :mod:`holon.errors`, :mod:`holon.ledger`,
:mod:`holon.context`, :mod:`holon.runtime`, :mod:`holon.search` and ``holon._version``, and
each module its own framework's extra (tests/test_layers.py holds it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

from holon.errors import UsageError

if TYPE_CHECKING:
    from holon.integrations.langgraph import HolonHook
    from holon.integrations.mcp_server import LedgerRecall
    from holon.integrations.mcp_server import describe as describe_mcp
    from holon.integrations.mcp_server import serve as serve_mcp
    from holon.integrations.openai_agents import HolonSession

__all__ = ["HolonHook", "HolonSession", "LedgerRecall", "describe_mcp", "serve_mcp"]

# name -> (module, attribute): each module is imported on first use, so that one framework
# missing (an extra not installed) breaks only the names that need it.
_LAZY: Final = {
    "LedgerRecall": ("holon.integrations.mcp_server", "LedgerRecall"),
    "serve_mcp": ("holon.integrations.mcp_server", "serve"),
    "describe_mcp": ("holon.integrations.mcp_server", "describe"),
    "HolonSession": ("holon.integrations.openai_agents", "HolonSession"),
    "HolonHook": ("holon.integrations.langgraph", "HolonHook"),
}
# module -> (what it plugs holon into, the extra that installs it, the packages it imports)
_EXTRAS: Final = {
    "holon.integrations.mcp_server": ("the MCP SDK", "mcp", ("mcp", "mcp_types", "anyio")),
    "holon.integrations.openai_agents": ("the OpenAI Agents SDK", "openai-agents", ("agents", "openai")),
    "holon.integrations.langgraph": ("LangGraph", "langgraph", ("langgraph", "langchain_core")),
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'holon.integrations' has no attribute {name!r}")
    module, attribute = target
    try:
        loaded = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        framework, extra, packages = _EXTRAS[module]
        if (exc.name or "").split(".")[0] not in packages:
            raise
        raise UsageError(
            f"holon.integrations.{name} needs {framework}, and {exc.name} is not installed: "
            f"pip install 'holon[{extra}]'"
        ) from None
    value = getattr(loaded, attribute)
    globals()[name] = value
    return value
