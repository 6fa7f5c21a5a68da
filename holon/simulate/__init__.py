"""What holon would have sent: any run's model calls replayed through holon's renderer.

A run's evidence — generated, imported from another tool, or a holon ledger's — is
replayed call by call (:func:`call_positions` finds the calls): :class:`HolonSimulation`
renders the prompt the runtime would have sent and keeps the records the runtime would
have written; :class:`FullHistory` is what a chat-style tool sends (its whole transcript,
truncated oldest-first). The cache models (:class:`PrefixCache`, :class:`BreakpointCache`)
say what a provider would have served from its cache and what that costs.

The evaluation (benchmarks/eval) measures these policies on generated runs and real
transcripts. An edge module like :mod:`holon.replay`: it composes the pure layers.
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
from holon.simulate.model_calls import ModelCalls, RecordedRun, recorded_run
from holon.simulate.prompts import UNIT_START, Block, CallPrompt, TokenCounter
from holon.simulate.renderer import DEFAULT_AGENT, HolonSimulation, LedgerSource
from holon.simulate.transcript import FullHistory, RestoreOutcome, Transcript, TranscriptItem

__all__ = [
    "DEFAULT_AGENT",
    "READ_PRICE",
    "UNIT_START",
    "WRITE_PRICE",
    "Block",
    "BreakpointCache",
    "CacheTotals",
    "CallPrompt",
    "FullHistory",
    "HolonSimulation",
    "LedgerSource",
    "ModelCalls",
    "PrefixCache",
    "PrefixHashes",
    "RecordedRun",
    "RestoreOutcome",
    "TokenCounter",
    "Transcript",
    "TranscriptItem",
    "block_floor",
    "call_positions",
    "common_prefix",
    "cumulative",
    "is_model_output",
    "recorded_run",
    "transcript_text",
]
