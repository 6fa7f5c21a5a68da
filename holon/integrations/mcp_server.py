"""``holon mcp LEDGER``: the recall tools over the Model Context Protocol, read-only.

An MCP client (Claude Code, Cursor, the OpenAI Agents SDK's ``MCPServerStdio``) starts
``holon mcp runs/agent-7`` and gets the two tools the runtime offers its own model
(:data:`holon.runtime.RECALL_TOOLS`): ``holon_search`` (BM25 over the agent's episodes and
evidence) and ``holon_get`` (the original text behind a ref, a page at a time). Their names,
descriptions, argument schemas, argument checks and answers are the recall module's own
(:func:`~holon.runtime.recall.recall_args`, :func:`~holon.runtime.recall.get_text`,
:func:`~holon.runtime.recall.search_text`): what a client's model is told is what holon's
own model is told.

The server never writes: the ledger is opened read-only (no lock, no recovery, nothing
written), so it runs beside the agent that appends to it. Each call first reads the records
appended since the previous call (:meth:`LedgerRecall.follow`), so a search finds what the
agent recorded a second ago and a ref the agent just printed restores. Unlike the runtime's
own ``holon_get``/``holon_search`` (:meth:`holon.runtime.Turn.recall`), calls are not
recorded in the ledger: a read-only server has nowhere to record them, and the client keeps
its own transcript.

A bad ref, a ref that names nothing, an offset past the end or malformed arguments come
back as a tool error (``isError``) whose text says what to do, as the runtime tells its
model; so does a damaged ledger (``holon verify`` names the damage).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from holon._version import __version__
from holon.context import EpisodeIndex
from holon.errors import HolonError, InvalidRef, RefNotFound, UsageError
from holon.ledger import Ledger
from holon.records import ContextEpisodeRecord
from holon.runtime.recall import (
    GET_TOOL,
    RECALL_PAGE_CHARS,
    RECALL_TOOLS,
    AgentRefSource,
    RestoredText,
    blob_text_of,
    get_text,
    is_recall,
    recall_args,
    search_text,
)
from holon.search import MemorySearch

__all__ = ["INSTRUCTIONS", "LedgerRecall", "build_server", "describe", "serve"]


log = logging.getLogger("holon.integrations.mcp")

#: What the server tells the client's model about itself (MCP ``instructions``).
INSTRUCTIONS: Final = (
    "Recall for a holon agent's ledger. When your context says something was cleared, left "
    "out or archived and names a ref (ledger:<seq>, blob:<hash>, episode:<id>), call holon_get "
    "with it; to find what was recorded earlier (a past decision, a tool's output, an earlier "
    "request), call holon_search with words from it. Both only read the ledger."
)


class LedgerRecall:
    """``holon_search`` and ``holon_get`` over a ledger opened read-only, kept up with its appends.

    The search index and the episode index are built from the records read so far and
    extended, at each call, by the ones appended since (:meth:`follow`): the first call
    reads the whole ledger once, later ones only what is new. As in the runtime, the
    recall calls a ledger holds (the agent's own ``holon_get``/``holon_search``) are left
    out of the search.
    """

    def __init__(self, ledger: Ledger, *, page_chars: int = RECALL_PAGE_CHARS) -> None:
        if not ledger.readonly:
            raise UsageError(
                f"LedgerRecall serves ledger {ledger.path} read-only: open it with "
                "Ledger.open(path, readonly=True)"
            )
        self._ledger = ledger
        self._page_chars = page_chars
        self._episodes = EpisodeIndex()
        self._source = AgentRefSource(ledger, self._episodes)
        self._search = MemorySearch(blob_text=blob_text_of(ledger), read_record=ledger.get)
        self._next_seq = 0  # the first seq not read yet
        # The text holon_get paged last: a client paging through a 50 KB output restores it once.
        self._restored = RestoredText()

    @property
    def ledger(self) -> Ledger:
        """The ledger served (read-only)."""
        return self._ledger

    @property
    def seq(self) -> int:
        """The newest seq read (-1 before the first call on an empty ledger)."""
        return self._next_seq - 1

    def follow(self) -> int:
        """Read the records appended since the last call into the indexes; returns how many.

        Stops at the head the ledger has now: a record the agent appends meanwhile is read
        by the next call.
        """
        head = self._ledger.head()[0]
        read = 0
        for record in self._ledger.read(self._next_seq, head + 1):
            if isinstance(record.body, ContextEpisodeRecord):
                self._episodes.add(record.body)
            if not is_recall(record):
                self._search.add(record)
            self._next_seq = record.seq + 1
            read += 1
        return read

    def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        """The answer to one call of a recall tool, as the runtime gives it to its own model.

        Raises UsageError (an unknown tool, malformed arguments, an offset past the end),
        InvalidRef and RefNotFound, each with a message written for the model.
        """
        args = recall_args(name, dict(arguments or {}))
        self.follow()
        if name == GET_TOOL.name:
            return get_text(
                args["ref"],
                self._source,
                offset=args["offset"],
                page_chars=self._page_chars,
                kept=self._restored,
            )
        hits = self._search.search(args["query"], limit=args["limit"])
        return search_text(args["query"], hits)


def _tools() -> list[mcp_types.Tool]:
    # Read-only, and the same answer for the same ledger state: clients may run them unasked.
    annotations = mcp_types.ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    return [
        mcp_types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=dict(tool.parameters),
            annotations=annotations,
        )
        for tool in RECALL_TOOLS
    ]


def build_server(recall: LedgerRecall) -> Server[Any]:
    """The MCP server (the SDK's low-level ``Server``) answering ``tools/list`` and ``tools/call``."""

    async def list_tools(
        _ctx: Any, _params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=_tools())

    async def call_tool(_ctx: Any, params: mcp_types.CallToolRequestParams) -> mcp_types.CallToolResult:
        try:
            text = recall.call(params.name, params.arguments)
        except (InvalidRef, RefNotFound, UsageError) as exc:
            # The model's mistake: the model is told, as Turn.recall tells the runtime's model.
            return _result(str(exc), error=True)
        except HolonError as exc:
            # A damaged ledger: said to the model and logged for the person running the server.
            log.error("holon mcp: %s: %s", recall.ledger.path, exc)
            return _result(f"the ledger could not be read: {exc}", error=True)
        return _result(text, error=False)

    return Server(
        "holon",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _result(text: str, *, error: bool) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=error)


def describe(path: str | Path) -> dict[str, Any]:
    """What the server at ``path`` offers, as JSON data: its name, version, instructions and tools.

    For a script that configures an MCP client (``holon mcp PATH --json``); the ledger is
    opened read-only, so a path that is not a ledger fails as :func:`serve` would.
    """
    with Ledger.open(path, readonly=True) as ledger:
        head = ledger.head()[0]
        return {
            "server": "holon",
            "version": __version__,
            "ledger": str(ledger.path),
            "agent_id": ledger.agent_id,
            "head_seq": head,
            "instructions": INSTRUCTIONS,
            "tools": [tool.model_dump(by_alias=True, exclude_none=True) for tool in _tools()],
        }


def serve(path: str | Path) -> None:
    """Serve the recall tools of the ledger at ``path`` over stdio until the client closes stdin.

    The ledger is opened (read-only) before the server starts, so a path that is not a
    ledger fails at once (NotALedger) rather than at the first call.
    """
    ledger = Ledger.open(path, readonly=True)
    try:
        server = build_server(LedgerRecall(ledger))

        async def run() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        anyio.run(run)
    finally:
        ledger.close()
