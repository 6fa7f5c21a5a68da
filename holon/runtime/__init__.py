"""The runtime facade: :class:`Agent` composes ledger, projections and renderer for a daemon.

- :class:`Agent` (``Agent.open(path, agent_id=..., config=...)``) — create or resume an
  agent's ledger; ``agent.state``, ``agent.working_memory``, ``agent.episodes``.
- :class:`Turn` (``with agent.turn(input=...) as turn``) — record a turn, render its
  prompt (``turn.context()``), run tools through the write-ahead log (``turn.tool``).
- :class:`ToolCall`, :class:`UnknownOutcome` — the tool WAL.
- :data:`RECALL_TOOLS` (``holon_get``, ``holon_search``) — tools that let the model
  restore what its prompt left out; route their calls to :meth:`Turn.recall`;
  :func:`is_recall` tells their records apart (memory search leaves them out);
  :func:`blob_text_of` reads a blob-stored output's text for memory search.
- :class:`AgentConfig`, :class:`OpenReport`, :class:`TurnSummary`.
- :func:`run_turn` / :func:`arun_turn` — a ready loop that runs a turn's model rounds
  to its end through an SDK client (:class:`AnthropicMessages`, :class:`OpenAIChat`,
  :class:`OpenAIResponses`), with the tools of a :class:`Tools` registry.

The package is the runtime layer: it may import every layer below it (records, errors,
ledger, projections, context) and the search index, never the edges (cli, replay, audit).
Inside it, :mod:`~holon.runtime.core` is the write core :class:`Agent` and :class:`Turn`
share; :mod:`~holon.runtime.opening` opens an existing ledger; :mod:`~holon.runtime.calls`
is the tool WAL; :mod:`~holon.runtime.refusals` the named methods' id checks.

See docs/daemon-guide.md.
"""

from holon.runtime.agent import Agent, AgentConfig, OpenReport
from holon.runtime.calls import ToolCall
from holon.runtime.checkpoints import CHECKPOINT_DIR, UnknownOutcome, checkpoint_resume
from holon.runtime.core import wall_clock_ms
from holon.runtime.loop import (
    AnthropicMessages,
    ModelDialect,
    OpenAIChat,
    OpenAIResponses,
    TurnRun,
    arun_turn,
    run_turn,
)
from holon.runtime.recall import RECALL_TOOL_NAMES, RECALL_TOOLS, blob_text_of, is_recall
from holon.runtime.tools import Tool, Tools
from holon.runtime.turn import Turn, TurnSummary

__all__ = [
    "CHECKPOINT_DIR",
    "RECALL_TOOLS",
    "RECALL_TOOL_NAMES",
    "Agent",
    "AgentConfig",
    "AnthropicMessages",
    "ModelDialect",
    "OpenAIChat",
    "OpenAIResponses",
    "OpenReport",
    "Tool",
    "ToolCall",
    "Tools",
    "Turn",
    "TurnRun",
    "TurnSummary",
    "UnknownOutcome",
    "arun_turn",
    "blob_text_of",
    "checkpoint_resume",
    "is_recall",
    "run_turn",
    "wall_clock_ms",
]
