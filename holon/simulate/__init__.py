"""What holon would have sent: any run's model calls replayed through holon's renderer.

A run's evidence — generated, imported from another tool, or a holon ledger's — is
replayed call by call (:func:`call_positions` finds the calls): :class:`HolonSimulation`
renders the prompt the runtime would have sent and keeps the records the runtime would
have written; :class:`FullHistory` is what a chat-style tool sends (its whole transcript,
truncated oldest-first). The cache models (:class:`PrefixCache`, :class:`BreakpointCache`)
say what a provider would have served from its cache and what that costs.

:func:`simulate_ledger` (``holon simulate``) does it for a ledger and writes the result as
a new ledger with a comparison file (:class:`Simulation`, :func:`read_simulation`); the
evaluation (benchmarks/eval) measures the same policies on generated runs. An edge module
like :mod:`holon.replay`: it composes the pure layers and writes a ledger.

What it may import: :mod:`holon.records`, :mod:`holon.errors`, :mod:`holon.ledger`,
:mod:`holon.projections`, :mod:`holon.context` and :mod:`holon.replay`, msgspec and blake3
(tests/test_layers.py holds it).
"""

from __future__ import annotations

from holon.simulate.cache import (
    READ_PRICE,
    WRITE_PRICE,
    BreakpointCache,
    CacheTotals,
    PrefixCache,
    PrefixHashes,
    block_floor,
    common_prefix,
    cumulative,
)
from holon.simulate.calls import call_positions, is_model_output, transcript_text
from holon.simulate.model_calls import ModelCalls, RecordedRun, inline_outputs, recorded_run
from holon.simulate.prompts import UNIT_START, Block, CallPrompt, TokenCounter
from holon.simulate.renderer import DEFAULT_AGENT, HolonSimulation, LedgerSource
from holon.simulate.run import (
    SIMULATION_FILE,
    SIMULATION_VERSION,
    CallCost,
    SeriesTotals,
    SimulatedCall,
    Simulation,
    read_simulation,
    simulate_ledger,
    simulation_budget,
)
from holon.simulate.transcript import FullHistory, RestoreOutcome, Transcript, TranscriptItem

__all__ = [
    "DEFAULT_AGENT",
    "READ_PRICE",
    "SIMULATION_FILE",
    "SIMULATION_VERSION",
    "UNIT_START",
    "WRITE_PRICE",
    "Block",
    "BreakpointCache",
    "CacheTotals",
    "CallCost",
    "CallPrompt",
    "FullHistory",
    "HolonSimulation",
    "LedgerSource",
    "ModelCalls",
    "PrefixCache",
    "PrefixHashes",
    "RecordedRun",
    "RestoreOutcome",
    "SeriesTotals",
    "SimulatedCall",
    "Simulation",
    "TokenCounter",
    "Transcript",
    "TranscriptItem",
    "block_floor",
    "call_positions",
    "common_prefix",
    "cumulative",
    "inline_outputs",
    "is_model_output",
    "read_simulation",
    "recorded_run",
    "simulate_ledger",
    "simulation_budget",
    "transcript_text",
]
