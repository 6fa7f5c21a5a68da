"""Evaluation harness: holon's context against baseline policies, with no LLM involved.

For every model call of long generated agent runs (with planted ground-truth facts) and
of real transcripts imported with holon's importers, four policies build the exact
prompt: full history truncated oldest-first, a rolling token window, Anthropic-style
tool-result clearing, and holon's ``build_context``. The harness measures prompt tokens,
fact retention and false carry-over, simulated provider prompt caching and input cost,
evictions and their restoration. See docs/evaluation.md.

Run: ``python -m benchmarks.eval`` (``make eval``; also the ``eval`` suite of ``make bench``).
"""

from benchmarks.eval.run import main

__all__ = ["main"]
